// Conformance: every client in clients.ts against `candor serve`, over stdio (the client spawns the
// gateway) and over Streamable HTTP (one gateway process), without any model. For each client and
// transport: listing, a success, a failure (isError and the first text line), invalid arguments
// (an invalid_input envelope reaches the client's tool output), 20 parallel calls, and an
// approval-gated call that returns approval_pending (within wait_ms + 1 s: the client's own request
// timeout enforces it, for the Inspector CLI a proxy's deadline that kills it) and proceeds after `candor approve yes ID`, with the fake's ground truth
// checked at each step. Results feed the compatibility table in docs/mcp-clients.md (see table.ts).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService } from '../../src/fakes/index.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from '../fixtures/mcp/config.js';
import { ROOT, serveCommand, tempDir, writeConfig } from '../fixtures/mcp/stdio.js';
import { CLIENTS, type Connection, type Target } from './clients.js';
import { inspect, type Deadline, type InspectorEra } from './inspector.js';
import { ensureNode22, type Node22 } from './node22.js';
import { RESULTS_FILE, type Check, type ResultRow } from './table.js';

const WAIT_MS = 1_500;
/** The Inspector CLI's approval calls must be answered within wait_ms + 1 s of reaching the gateway. */
const APPROVAL_DEADLINE: Deadline = { method: 'tools/call', ms: WAIT_MS + 1_000 };
const ALLOWED_ORIGIN = 'https://app.example.com';
const BIN = join(ROOT, 'bin', 'candor.js');

let fake: FakeService;
let dir: string;
let config: string;
let http: { child: ChildProcess; url: string } | null = null;
const rows: ResultRow[] = [];

// Node 22 clients: provisioned once (npm registry); outside CI a failure skips them with the reason.
let node22: Node22 | null = null;
let node22Skip: string | null = null;
function provisionNode22(): void {
  if (node22 || node22Skip) return;
  try {
    node22 = ensureNode22();
  } catch (error) {
    if (process.env['CI'] === 'true') throw error;
    node22Skip = error instanceof Error ? error.message : String(error);
    console.warn(`Node 22 MCP clients skipped: ${node22Skip}`);
  }
}

function conformanceYaml(origin: string, approvalsDir: string, waitMs = WAIT_MS): string {
  return (
    testConfigYaml({ origin }) +
    `approvals:
  approver: elicitation
  wait_ms: ${waitMs}
  dir: '${approvalsDir}'
  classes: { create: auto, append: auto, set_state: auto }
mcp:
  http:
    allowed_origins: ['${ALLOWED_ORIGIN}']
`
  );
}

async function startHttpGateway(
  configFile = config,
  ledger = 'http.db',
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [
      ...serveCommand(),
      '--config',
      configFile,
      '--http',
      '0',
      '--ledger',
      `sqlite:${join(dir, ledger)}`,
    ],
    { cwd: dir, env: { PATH: process.env['PATH'] ?? '', [TEST_TOKEN_VAR]: TEST_TOKEN } },
  );
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      const m = /MCP on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once('exit', () => reject(new Error(`gateway exited before listening: ${out}`)));
  });
  return { child, url };
}

let stdioCount = 0;
function targetFor(transport: 'stdio' | 'http'): Target {
  if (transport === 'http') return { kind: 'http', url: http!.url };
  stdioCount += 1;
  return {
    kind: 'stdio',
    command: process.execPath,
    args: [
      ...serveCommand(),
      '--config',
      config,
      '--ledger',
      `sqlite:${join(dir, `stdio-${stdioCount}.db`)}`,
    ],
    env: { PATH: process.env['PATH'] ?? '', [TEST_TOKEN_VAR]: TEST_TOKEN },
    cwd: dir,
  };
}

function approve(id: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, 'approve', 'yes', id, '--dir', join(dir, 'q')], {
      cwd: dir,
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.once('exit', (code) => resolve({ code, out }));
  });
}

beforeAll(async () => {
  fake = await startFakeService({ seed: 15, tokens: [{ name: 'agent', token: TEST_TOKEN }] });
  dir = tempDir('candor-conformance-');
  config = writeConfig(dir, conformanceYaml(fake.url, join(dir, 'q')));
  http = await startHttpGateway();
});

afterAll(async () => {
  if (http) {
    const exited = new Promise((r) => http!.child.once('exit', r));
    http.child.kill('SIGTERM');
    await exited;
  }
  await fake?.close();
  if (process.env['CANDOR_WRITE_COMPAT'] === '1')
    writeFileSync(RESULTS_FILE, `${JSON.stringify(rows, null, 2)}\n`);
});

const firstLine = (text: string): string => text.split('\n')[0] ?? '';

for (const transport of ['stdio', 'http'] as const) {
  for (const kind of CLIENTS) {
    describe(`${kind.label} over ${transport}`, () => {
      let conn: Connection;
      const row: ResultRow = { client: kind.id, transport, version: null, checks: {} };
      const check = (name: Check, fn: () => Promise<void>) =>
        it(name, async (ctx) => {
          if (kind.needsNode22 && !node22) return ctx.skip(node22Skip ?? 'no Node 22');
          row.checks[name] = 'fail';
          await fn();
          row.checks[name] = 'pass';
        });

      beforeAll(async () => {
        if (kind.needsNode22) {
          provisionNode22();
          if (!node22) return;
        }
        rows.push(row);
        conn = await kind.connect(targetFor(transport));
        row.version = conn.version;
      }, 900_000);
      afterAll(async () => {
        await conn?.close();
      });

      check('list', async () => {
        const names = await conn.list();
        expect(names).toEqual(
          expect.arrayContaining(['create_record', 'reconcile_operation', 'operation_status']),
        );
        if (kind.id === 'sdk-v2-pin') expect(conn.version).toBe('2026-07-28');
        if (kind.id === 'sdk-v1' || kind.id === 'sdk-v2-legacy')
          expect(conn.version).toBe('2025-11-25');
      });

      check('success', async () => {
        const title = `ok ${kind.id} ${transport}`;
        const r = await conn.call('create_record', { title });
        expect(r.isError).toBe(false);
        expect(firstLine(r.text)).toBe('DONE — create_record succeeded.');
        expect(r.structured).toMatchObject({ ok: true, category: 'succeeded' });
        expect(fake.resources.all('records').filter((x) => x['title'] === title)).toHaveLength(1);
      });

      check('failure', async () => {
        const r = await conn.call('get_record', { id: 'rec_missing' });
        expect(r.isError).toBe(true);
        expect(firstLine(r.text)).toBe('NOT DONE — confirmed_rejection: do not retry this call');
        expect(r.structured).toMatchObject({ category: 'confirmed_rejection', retry: 'never' });
      });

      check('invalid_input', async () => {
        const before = fake.groundTruth().length;
        if (kind.validatesArguments) {
          // The framework checks inputSchema itself: nothing reaches the gateway or the service.
          const refused = await conn.call('create_record', { title: 7 });
          expect(refused.refusedByClient).toMatch(/did not match expected schema/);
          expect(fake.groundTruth().length).toBe(before);
          // An argument only the gateway can judge — an operation id its ledger does not hold —
          // reaches the output as the gateway's refusal: nothing sent, and never "not applied".
          const r = await conn.call('operation_status', { operation_id: 'op_00unknown00' });
          expect(r.isError).toBe(true);
          expect(firstLine(r.text)).toMatch(/^OUTCOME UNKNOWN — .*\(refused: unknown_operation\)$/);
          expect(r.structured).toMatchObject({
            category: 'outcome_unknown',
            retry: 'escalate',
            remote_effect: 'unknown',
            data: { refusal: { code: 'unknown_operation' } },
          });
          expect(fake.groundTruth().length).toBe(before);
          return;
        }
        const r = await conn.call('create_record', { title: 7 });
        expect(r.isError).toBe(true);
        expect(firstLine(r.text)).toBe(
          'NOT DONE — invalid input: fix the arguments, nothing was sent',
        );
        expect(r.text).toContain('"category":"invalid_input"');
        expect(r.structured).toMatchObject({
          category: 'invalid_input',
          retry: 'never',
          data: { field: 'title' },
        });
        expect(fake.groundTruth().length).toBe(before);
      });

      check('parallel', async () => {
        const titles = Array.from({ length: 20 }, (_, i) => `par ${kind.id} ${transport} ${i}`);
        const results = await Promise.all(
          titles.map((title) => conn.call('create_record', { title })),
        );
        expect(results.map((r) => r.isError)).toEqual(titles.map(() => false));
        const ids = new Set(results.map((r) => r.structured?.['operation_id']));
        expect(ids.size).toBe(20);
        const stored = fake.resources.all('records').map((x) => x['title']);
        for (const t of titles) expect(stored.filter((s) => s === t)).toHaveLength(1);
      });

      check('approval', async () => {
        const created = await conn.call('create_record', {
          title: `doomed ${kind.id} ${transport}`,
        });
        const recordId = (created.structured?.['data'] as { id: string }).id;
        // The client's own request timeout (wait_ms + 1 s) proves the call did not hang.
        const pending = await conn.call('delete_record', { id: recordId }, WAIT_MS + 1_000);
        expect(pending.isError).toBe(true);
        expect(pending.structured).toMatchObject({
          category: 'approval_pending',
          retry: 'after_approval',
          remote_effect: 'none',
        });
        const opId = pending.structured!['operation_id'] as string;
        const card = (pending.structured!['data'] as { approval_id: string }).approval_id;
        expect(firstLine(pending.text)).toBe(
          `NOT DONE — waiting for a person's approval (${card}): call again with operation_id ${opId} after it is approved`,
        );
        expect(fake.resources.all('records').find((x) => x['id'] === recordId)).toMatchObject({
          state: 'active',
        });
        const approved = await approve(card);
        expect(approved.code, approved.out).toBe(0);
        const done = await conn.call('delete_record', { id: recordId, operation_id: opId });
        expect(done.structured).toMatchObject({ ok: true, operation_id: opId });
        expect(fake.resources.all('records').find((x) => x['id'] === recordId)).toMatchObject({
          state: 'deleted',
        });
      });
    });
  }
}

describe('Origin allow-list from candor.yaml (mcp.http.allowed_origins)', () => {
  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: {
      protocolVersion: '2025-11-25',
      capabilities: {},
      clientInfo: { name: 'origin-check', version: '1.0.0' },
    },
  };
  const post = (origin: string) =>
    fetch(http!.url, {
      method: 'POST',
      headers: {
        origin,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify(initialize),
    });

  it('admits the configured origin and loopback ones; http://evil.example gets 403 and no session', async () => {
    const configured = await post(ALLOWED_ORIGIN);
    expect(configured.status).toBe(200);
    expect(configured.headers.get('mcp-session-id')).toMatch(/.+/);
    expect(await configured.text()).toContain('"protocolVersion":"2025-11-25"');
    const loopback = await post('http://localhost:3000');
    expect(loopback.status).toBe(200);
    await loopback.body?.cancel();
    const evil = await post('http://evil.example');
    expect(evil.status).toBe(403);
    expect(evil.headers.get('mcp-session-id')).toBeNull();
    expect(await evil.json()).toMatchObject({
      error: { message: 'Forbidden: origin not allowed' },
    });
    // A neighbour of the configured origin (other scheme or port) is not it.
    expect((await post('http://app.example.com')).status).toBe(403);
    expect((await post('https://app.example.com:8443')).status).toBe(403);
  });

  it('a value that is not an origin stops `candor serve` with FILE:LINE:COL and exit 2', () => {
    const badDir = tempDir('candor-conformance-origin-');
    const yaml = conformanceYaml(fake.url, join(badDir, 'q')).replace(
      `['${ALLOWED_ORIGIN}']`,
      `['${ALLOWED_ORIGIN}', 'https://app.example.com/ui']`,
    );
    const bad = writeConfig(badDir, yaml);
    const lines = yaml.split('\n');
    const lineNo = lines.findIndex((l) => l.includes('/ui')) + 1;
    const col = lines[lineNo - 1]!.indexOf("'https://app.example.com/ui'") + 1;
    const r = spawnSync(process.execPath, [...serveCommand(), '--config', bad, '--http', '0'], {
      cwd: badDir,
      encoding: 'utf8',
      input: '',
    });
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    const line = bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    expect(r.stderr).toMatch(
      new RegExp(`^${line}:${lineNo}:${col}: mcp\\.http\\.allowed_origins\\[1\\]: not an origin`),
    );
  });
});

for (const transport of ['stdio', 'http'] as const) {
  for (const era of ['legacy', 'modern'] as const satisfies readonly InspectorEra[]) {
    describe(`MCP Inspector CLI 2.12 (--protocol-era ${era}) over ${transport}`, () => {
      const row: ResultRow = { client: `inspector-${era}`, transport, version: null, checks: {} };
      let target: Target;
      let home: string;
      const check = (name: Check, fn: (n22: Node22) => Promise<void>) =>
        it(name, async (ctx) => {
          if (!node22) return ctx.skip(node22Skip ?? 'no Node 22');
          row.checks[name] = 'fail';
          await fn(node22);
          row.checks[name] = 'pass';
        });
      const run = (n22: Node22, args: string[], deadline?: Deadline) =>
        inspect(n22, target, era, args, home, deadline);
      const call = (
        n22: Node22,
        name: string,
        args: Record<string, unknown>,
        deadline?: Deadline,
      ) =>
        run(
          n22,
          ['--method', 'tools/call', '--tool-name', name, '--tool-args-json', JSON.stringify(args)],
          deadline,
        );
      const resultOf = (r: { json: Record<string, unknown> | null }) =>
        (r.json?.['result'] ?? {}) as {
          isError?: boolean;
          content?: Array<{ type: string; text?: string }>;
          structuredContent?: Record<string, unknown>;
        };
      const textOf = (r: { json: Record<string, unknown> | null }) =>
        (resultOf(r).content ?? []).map((c) => c.text ?? '').join('\n');

      beforeAll(() => {
        provisionNode22();
        rows.push(row);
        target = targetFor(transport);
        home = join(dir, `inspector-home-${era}-${transport}`);
        mkdirSync(home, { recursive: true });
      }, 900_000);

      check('list', async (n22) => {
        const r = await run(n22, ['--strict', '--method', 'tools/list']);
        expect(r.code, r.stderr).toBe(0);
        const tools = (resultOf(r) as { tools?: Array<{ name: string }> }).tools ?? [];
        expect(tools.map((t) => t.name)).toEqual(
          expect.arrayContaining(['create_record', 'reconcile_operation', 'operation_status']),
        );
        // --strict: every tool schema passes the portability lint (no findings at all).
        expect(r.json).not.toHaveProperty('schemaFindings');
        expect(r.stderr).not.toMatch(/portability|Suggestion:/i);
      });

      check('success', async (n22) => {
        const title = `ok inspector-${era} ${transport}`;
        const r = await call(n22, 'create_record', { title });
        expect(r.code, r.stderr).toBe(0);
        expect(firstLine(textOf(r))).toBe('DONE — create_record succeeded.');
        expect(resultOf(r).structuredContent).toMatchObject({ ok: true, category: 'succeeded' });
        expect(fake.resources.all('records').filter((x) => x['title'] === title)).toHaveLength(1);
        // The era really differs: only a 2026-07-28 result carries the server's identity in _meta.
        const meta = (resultOf(r) as { _meta?: Record<string, unknown> })._meta ?? {};
        if (era === 'modern')
          expect(meta['io.modelcontextprotocol/serverInfo']).toMatchObject({ name: 'candor' });
        else expect(meta).not.toHaveProperty('io.modelcontextprotocol/serverInfo');
      });

      check('failure', async (n22) => {
        const r = await call(n22, 'get_record', { id: 'rec_missing' });
        // The Inspector exits 5 on isError:true.
        expect(r.code).toBe(5);
        expect(resultOf(r).isError).toBe(true);
        expect(firstLine(textOf(r))).toBe('NOT DONE — confirmed_rejection: do not retry this call');
        expect(resultOf(r).structuredContent).toMatchObject({
          category: 'confirmed_rejection',
          retry: 'never',
        });
      });

      check('invalid_input', async (n22) => {
        const before = fake.groundTruth().length;
        const r = await call(n22, 'create_record', { title: 7 });
        expect(r.code).toBe(5);
        expect(firstLine(textOf(r))).toBe(
          'NOT DONE — invalid input: fix the arguments, nothing was sent',
        );
        expect(resultOf(r).structuredContent).toMatchObject({
          category: 'invalid_input',
          data: { field: 'title' },
        });
        expect(fake.groundTruth().length).toBe(before);
      });

      check('parallel', async (n22) => {
        // --load: one connection, 20 calls in flight at once.
        const title = `par inspector-${era} ${transport}`;
        const r = await run(n22, [
          '--method',
          'tools/call',
          '--tool-name',
          'create_record',
          '--tool-args-json',
          JSON.stringify({ title }),
          '--load',
          '--load-requests',
          '20',
          '--load-concurrency',
          '20',
        ]);
        expect(r.code, r.stderr + r.stdout).toBe(0);
        const stored = fake.resources.all('records').filter((x) => x['title'] === title);
        expect(stored).toHaveLength(20);
        // One operation per call: each record carries its own operation id.
        expect(new Set(stored.map((x) => x['client_ref'])).size).toBe(20);
      });

      // One process per request: over stdio each call has its own gateway process, and a gateway
      // that stops denies its open cards, so a card outliving its call needs the HTTP gateway.
      if (transport === 'http')
        check('approval', async (n22) => {
          const created = await call(n22, 'create_record', {
            title: `doomed inspector-${era} ${transport}`,
          });
          const recordId = (resultOf(created).structuredContent?.['data'] as { id: string }).id;
          // The CLI has no per-request timeout flag (a session file's requestTimeout did not bound
          // tools/call in 2.12), so the proxy's deadline stands in for one: no answer within
          // wait_ms + 1 s of the request and the CLI is killed.
          const pending = await call(n22, 'delete_record', { id: recordId }, APPROVAL_DEADLINE);
          expect(pending.hung, `the approval call hung: ${pending.hung}`).toBeNull();
          expect(pending.code).toBe(5);
          expect(resultOf(pending).structuredContent).toMatchObject({
            category: 'approval_pending',
            retry: 'after_approval',
            remote_effect: 'none',
          });
          const env = resultOf(pending).structuredContent!;
          const opId = env['operation_id'] as string;
          const card = (env['data'] as { approval_id: string }).approval_id;
          expect(firstLine(textOf(pending))).toBe(
            `NOT DONE — waiting for a person's approval (${card}): call again with operation_id ${opId} after it is approved`,
          );
          expect(fake.resources.all('records').find((x) => x['id'] === recordId)).toMatchObject({
            state: 'active',
          });
          const approved = await approve(card);
          expect(approved.code, approved.out).toBe(0);
          // After approval the same operation proceeds, under the same deadline.
          const done = await call(
            n22,
            'delete_record',
            { id: recordId, operation_id: opId },
            APPROVAL_DEADLINE,
          );
          expect(done.hung, `the approved call hung: ${done.hung}`).toBeNull();
          expect(done.code, done.stderr).toBe(0);
          expect(resultOf(done).structuredContent).toMatchObject({ ok: true, operation_id: opId });
          expect(fake.resources.all('records').find((x) => x['id'] === recordId)).toMatchObject({
            state: 'deleted',
          });
        });
    });
  }
}

describe('inspector --strict positive control', () => {
  beforeAll(() => provisionNode22(), 900_000);

  it('reports the findings the Candor gateway must not have, for a server that has them', async (ctx) => {
    if (!node22) return ctx.skip(node22Skip ?? 'no Node 22');
    const home = join(dir, 'inspector-home-control');
    mkdirSync(home, { recursive: true });
    const r = await inspect(
      node22,
      {
        kind: 'stdio',
        command: process.execPath,
        args: [join(ROOT, 'test', 'fixtures', 'mcp', 'unportable-server.mjs')],
        env: {},
        cwd: dir,
      },
      'legacy',
      ['--strict', '--method', 'tools/list'],
      home,
    );
    expect(r.code, r.stderr).toBe(0);
    const findings = (r.json?.['schemaFindings'] ?? []) as Array<{
      findings: Array<{ rule: string; path: string }>;
    }>;
    expect(findings.flatMap((f) => f.findings.map((x) => `${x.rule} ${x.path}`))).toEqual([
      'untyped-schema properties.data.anyOf[0]',
      'type-union properties.data.anyOf[1]',
    ]);
    expect(r.stderr).toContain('0 errors, 2 warnings across 1 tool.');
  });
});

describe('inspector approval deadline control', () => {
  let slow: { child: ChildProcess; url: string } | null = null;
  beforeAll(async () => {
    provisionNode22();
    // The same gateway, but it waits a minute for a person: the deadline must kill the CLI.
    const slowConfig = join(dir, 'slow');
    mkdirSync(slowConfig, { recursive: true });
    const file = writeConfig(slowConfig, conformanceYaml(fake.url, join(dir, 'q-slow'), 60_000));
    slow = await startHttpGateway(file, 'http-slow.db');
  }, 900_000);
  afterAll(async () => {
    if (!slow) return;
    const exited = new Promise((r) => slow!.child.once('exit', r));
    slow.child.kill('SIGTERM');
    await exited;
  });

  it('kills an Inspector whose approval-gated call is not answered in wait_ms + 1 s', async (ctx) => {
    if (!node22) return ctx.skip(node22Skip ?? 'no Node 22');
    const home = join(dir, 'inspector-home-deadline');
    mkdirSync(home, { recursive: true });
    const target: Target = { kind: 'http', url: slow!.url };
    const call = (name: string, args: Record<string, unknown>, deadline?: Deadline) =>
      inspect(
        node22!,
        target,
        'legacy',
        ['--method', 'tools/call', '--tool-name', name, '--tool-args-json', JSON.stringify(args)],
        home,
        deadline,
      );
    const created = await call('create_record', { title: 'deadline control' }, APPROVAL_DEADLINE);
    // An answered call passes through the proxy untouched.
    expect(created.hung).toBeNull();
    expect(created.code, created.stderr).toBe(0);
    const recordId = (created.json?.['result'] as { structuredContent: { data: { id: string } } })
      .structuredContent.data.id;
    const r = await call('delete_record', { id: recordId }, APPROVAL_DEADLINE);
    expect(r.hung).toBe(
      `tools/call hung: no answer within ${WAIT_MS + 1_000} ms of the request reaching the gateway; the Inspector was killed`,
    );
    expect(r.code).toBeNull();
    expect(r.json).toBeNull();
    expect(fake.resources.all('records').find((x) => x['id'] === recordId)).toMatchObject({
      state: 'active',
    });
  });
});
