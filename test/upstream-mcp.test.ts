// Candor in front of real third-party MCP servers from npm (@modelcontextprotocol/server-filesystem
// and server-memory), driven by a real MCP client over stdio through `candor serve`. The upstream
// is killed deterministically after the request was written (test/fixtures/upstream/
// kill-on-call.mjs); the ground truth is the upstream's own state (the disk, the memory file).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { envelopeSchema, type Envelope } from '../src/core/envelope.js';
import type { StoredEvent } from '../src/ledger/events.js';
import { openLedger } from '../src/ledger/open.js';
import { createKeyFile, initVault } from '../src/vault/index.js';
import {
  connectStdio,
  ROOT,
  tempDir,
  writeConfig,
  type StdioGateway,
} from './fixtures/mcp/stdio.js';

const KILL = join(ROOT, 'test', 'fixtures', 'upstream', 'kill-on-call.mjs');
const FS_SERVER = join(
  ROOT,
  'node_modules',
  '@modelcontextprotocol',
  'server-filesystem',
  'dist',
  'index.js',
);
const MEMORY_SERVER = join(
  ROOT,
  'node_modules',
  '@modelcontextprotocol',
  'server-memory',
  'dist',
  'index.js',
);
const NODE = process.execPath;

let open: StdioGateway[] = [];
afterEach(async () => {
  for (const gw of open) await gw.close();
  open = [];
});

async function serve(dir: string, yaml: string): Promise<StdioGateway> {
  const config = writeConfig(dir, yaml);
  const gw = await connectStdio(
    ['--config', config, '--ledger', `sqlite:${join(dir, 'ledger.db')}`],
    {},
    dir,
  );
  open.push(gw);
  return gw;
}

async function call(
  gw: StdioGateway,
  name: string,
  args: Record<string, unknown>,
): Promise<Envelope> {
  const r = await gw.client.callTool({ name, arguments: args });
  return envelopeSchema.parse(r.structuredContent);
}

const q = (s: string): string => JSON.stringify(s);

/** Every ledger event of one operation, from the gateway's SQLite ledger in `dir`. */
async function operationEvents(dir: string, operationId: string): Promise<StoredEvent[]> {
  const ledger = await openLedger(`sqlite:${join(dir, 'ledger.db')}`);
  if (!ledger.ok) throw new Error(`ledger: ${ledger.failure.message}`);
  try {
    return await ledger.value.query({ operation_id: operationId });
  } finally {
    await ledger.value.close();
  }
}

function fsConfig(dir: string, root: string, kill: Record<string, string>, extra = ''): string {
  return `${extra}upstreams:
  fs:
    command: ${q(NODE)}
    args: [${q(KILL)}, ${q(NODE)}, ${q(FS_SERVER)}, ${q(root)}]
    env:${Object.keys(kill).length === 0 ? ' {}' : ''}
${Object.entries(kill)
  .map(([k, v]) => `      ${k}: ${q(v)}`)
  .join('\n')}
    deadline_ms: 20000
    tools:
      write_file:
        class: create
        lookup:
          tool: read_text_file
          arguments: { path: '{{input.path}}' }
          match: { kind: text_equals, value: '{{input.content}}', absent_on_error: true }
`;
}

describe('server-filesystem behind Candor', () => {
  it('lists the upstream tools namespaced, with the envelope outputSchema and classes from annotations', async () => {
    const dir = tempDir('candor-up-list-');
    const gw = await serve(dir, fsConfig(dir, dir, {}));
    const { tools } = await gw.client.listTools();
    const write = tools.find((t) => t.name === 'fs_write_file');
    const read = tools.find((t) => t.name === 'fs_read_text_file');
    expect(write?.outputSchema?.properties).toHaveProperty('retry');
    expect(write?.annotations?.readOnlyHint).toBe(false);
    expect(read?.annotations?.readOnlyHint).toBe(true);
    expect(write?.inputSchema.properties).toHaveProperty('path');
    expect(write?.inputSchema.properties).toHaveProperty('operation_id');
  });

  it('a write answered normally succeeds with the upstream result in data', async () => {
    const dir = tempDir('candor-up-ok-');
    const log = join(dir, 'calls.log');
    const gw = await serve(dir, fsConfig(dir, dir, { CANDOR_CALL_LOG: log }));
    const path = join(dir, 'a.txt');
    const e = await call(gw, 'fs_write_file', { path, content: 'hello' });
    expect(e).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
    expect(JSON.stringify(e.data)).toContain('Successfully wrote');
    expect(readFileSync(path, 'utf8')).toBe('hello');
    // The positive control of the "never asked" checks below: the call log sees a real call.
    expect(calls(log)).toEqual(['write_file']);
  });

  it('write_file whose upstream is SIGKILLed after it answered is outcome_unknown; reconcile finds the file and settles', async () => {
    const dir = tempDir('candor-up-kill-');
    const gw = await serve(
      dir,
      fsConfig(dir, dir, {
        CANDOR_KILL_TOOL: 'write_file',
        CANDOR_KILL_ONCE: join(dir, 'killed'),
        CANDOR_KILL_MODE: 'after',
        CANDOR_FLIP_READONLY: 'write_file',
      }),
    );
    const path = join(dir, 'report.txt');
    const e = await call(gw, 'fs_write_file', { path, content: 'quarterly' });
    expect(gw.stderr()).not.toContain('annotations of write_file changed');
    expect(existsSync(join(dir, 'killed'))).toBe(true);
    expect(e).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      remote_effect: 'unknown',
    });
    // Ground truth: the upstream wrote the file before it died.
    expect(readFileSync(path, 'utf8')).toBe('quarterly');
    const r = await call(gw, 'reconcile_operation', { operation_id: e.operation_id });
    expect(r).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
    const s = await call(gw, 'operation_status', { operation_id: e.operation_id });
    expect((s.data as { state: string }).state).toBe('succeeded');
    // The restarted upstream now claims write_file is read-only: reported, and not believed.
    await expect
      .poll(() => gw.stderr())
      .toContain('upstream fs: the annotations of write_file changed from');
    const after = await call(gw, 'fs_write_file', { path: join(dir, 'b.txt'), content: 'b' });
    expect(after).toMatchObject({ ok: true, remote_effect: 'applied' });
    await gw.close();
    open = [];
    const events = await operationEvents(dir, e.operation_id!);
    expect(events.map((ev) => ev.kind)).toEqual([
      'operation_opened',
      'attempt_started',
      'attempt_finished',
      'observation_recorded',
      'operation_resolved',
    ]);
    const finished = events[2]!;
    expect(finished.kind === 'attempt_finished' && finished.data.dispatch_state).toBe(
      'sent_no_response',
    );
  });
});

describe('candor recover with upstreams', () => {
  it('settles an unknown proxied write left by a dead gateway through the upstream lookup (exit 0), never a second write', async () => {
    const dir = tempDir('candor-up-recover-');
    const yaml = fsConfig(dir, dir, {
      CANDOR_KILL_TOOL: 'write_file',
      CANDOR_KILL_ONCE: join(dir, 'killed'),
      CANDOR_KILL_MODE: 'after',
    });
    const gw = await serve(dir, yaml);
    const path = join(dir, 'left-behind.txt');
    const e = await call(gw, 'fs_write_file', { path, content: 'once' });
    expect(e).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    await gw.close();
    open = [];
    // The file is there (ground truth); the gateway that wrote it is gone.
    expect(readFileSync(path, 'utf8')).toBe('once');
    const r = spawnSync(
      NODE,
      [
        join(ROOT, 'bin', 'candor.js'),
        'recover',
        '--config',
        join(dir, 'candor.yaml'),
        '--ledger',
        `sqlite:${join(dir, 'ledger.db')}`,
      ],
      { cwd: dir, encoding: 'utf8', env: { PATH: process.env['PATH'] ?? '' } },
    );
    expect(r.stderr).not.toContain('Error:');
    expect(r.stdout).toContain(`${e.operation_id}  fs_write_file  found by lookup`);
    expect(r.status).toBe(0);
    const events = await operationEvents(dir, e.operation_id!);
    expect(events.map((ev) => ev.kind)).toEqual([
      'operation_opened',
      'attempt_started',
      'attempt_finished',
      // No owner_changed: recover composed from the same candor.yaml is the same owner (a gateway
      // outside a fleet keeps its owner id across restarts, issue 29).
      'observation_recorded',
      'operation_resolved',
    ]);
    expect(events.at(-1)).toMatchObject({ data: { state: 'succeeded' } });
    // One attempt only, and the file holds what the one write wrote.
    expect(readFileSync(path, 'utf8')).toBe('once');
  });
});

const calls = (log: string): string[] =>
  existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];

describe('nothing reaches the upstream without a licence', () => {
  it('the locked gate answers gate_locked and the upstream is never asked', async () => {
    const dir = tempDir('candor-up-lock-');
    const approvals = join(dir, 'approvals');
    mkdirSync(approvals);
    const log = join(dir, 'calls.log');
    const gw = await serve(
      dir,
      fsConfig(
        dir,
        dir,
        { CANDOR_CALL_LOG: log },
        `approvals:\n  approver: console\n  dir: ${q(approvals)}\n`,
      ),
    );
    writeFileSync(join(approvals, 'LOCKED'), JSON.stringify({ by: 'test', at: Date.now() }));
    const path = join(dir, 'locked.txt');
    const e = await call(gw, 'fs_write_file', { path, content: 'x' });
    expect(e).toMatchObject({
      ok: false,
      category: 'gate_locked',
      remote_effect: 'none',
      retry: 'never',
    });
    expect(existsSync(path)).toBe(false);
    expect(calls(log)).toEqual([]);
  });

  it('a declined approval answers approval_denied and the upstream is never asked', async () => {
    const dir = tempDir('candor-up-deny-');
    const log = join(dir, 'calls.log');
    const config = writeConfig(
      dir,
      fsConfig(
        dir,
        dir,
        { CANDOR_CALL_LOG: log },
        `approvals:\n  approver: elicitation\n  dir: ${q(join(dir, 'approvals'))}\n  classes: { create: per_call }\n`,
      ),
    );
    const gw = await connectStdio(
      ['--config', config, '--ledger', `sqlite:${join(dir, 'ledger.db')}`],
      {},
      dir,
      { elicitation: () => ({ action: 'decline' }) },
    );
    open.push(gw);
    const path = join(dir, 'denied.txt');
    const e = await call(gw, 'fs_write_file', { path, content: 'x' });
    expect(e).toMatchObject({ ok: false, category: 'approval_denied', remote_effect: 'none' });
    expect(existsSync(path)).toBe(false);
    expect(calls(log)).toEqual([]);
  });

  it('a canary secret injected through env never appears in a result, the ledger or the log', async () => {
    const dir = tempDir('candor-up-canary-');
    const CANARY = 'canary-7f3e9a1b2c4d5e6f';
    const keyFile = join(dir, 'vault.key');
    const vaultPath = join(dir, 'vault.json');
    expect((await createKeyFile(keyFile)).ok).toBe(true);
    const v = await initVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
    if (!v.ok) throw new Error(v.failure.message);
    const set = await v.value.set({
      name: 'fs-token',
      type: 'ssh_secret',
      secret: CANARY,
      bindings: [{ kind: 'ssh', host_ref: 'mcp.fs' }],
    });
    expect(set.ok).toBe(true);
    v.value.close();
    const leakFile = join(dir, 'leak.txt');
    const gw = await serve(
      dir,
      fsConfig(
        dir,
        dir,
        { API_TOKEN: 'vault:fs-token', CANDOR_LEAK_ENV: `API_TOKEN:${leakFile}` },
        `vault: { key_file: ${q(keyFile)}, path: ${q(vaultPath)} }\n`,
      ),
    );
    // The careless upstream did receive the secret (it wrote it to disk)...
    expect(readFileSync(leakFile, 'utf8')).toBe(CANARY);
    // ...and hands it back in a tool result: Candor redacts it before the agent sees it.
    const raw = await gw.client.callTool({
      name: 'fs_read_text_file',
      arguments: { path: leakFile },
    });
    const e = envelopeSchema.parse(raw.structuredContent);
    expect(e).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'none' });
    expect(JSON.stringify(e.data)).toContain('REDACTED');
    expect(JSON.stringify(raw)).not.toContain(CANARY);
    await gw.close();
    open = [];
    expect(gw.stderr()).not.toContain(CANARY);
    expect(readFileSync(join(dir, 'ledger.db')).includes(Buffer.from(CANARY))).toBe(false);
  });
});

describe('classification from evidence', () => {
  it('killed before the upstream read the request: outcome_unknown, the disk shows nothing, the lookup says absent; a respawn that fails is local_failure, not sent', async () => {
    const dir = tempDir('candor-up-before-');
    const refuse = join(dir, 'refuse');
    const gw = await serve(
      dir,
      fsConfig(dir, dir, {
        CANDOR_KILL_TOOL: 'write_file',
        CANDOR_KILL_ONCE: join(dir, 'killed'),
        CANDOR_KILL_MODE: 'before',
        CANDOR_REFUSE_FILE: refuse,
      }),
    );
    const path = join(dir, 'never.txt');
    const e = await call(gw, 'fs_write_file', { path, content: 'x' });
    expect(e).toMatchObject({
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      remote_effect: 'unknown',
    });
    expect(existsSync(path)).toBe(false);
    // The upstream cannot be started again: nothing can have been sent.
    writeFileSync(refuse, '');
    const other = join(dir, 'other.txt');
    const f = await call(gw, 'fs_write_file', { path: other, content: 'y' });
    expect(f).toMatchObject({ category: 'local_failure', remote_effect: 'none', retry: 'allowed' });
    expect(existsSync(other)).toBe(false);
    // It starts again: the lookup finds no such file, and without an idempotency key a person decides.
    rmSync(refuse);
    const r = await call(gw, 'reconcile_operation', { operation_id: e.operation_id });
    expect(r).toMatchObject({ category: 'outcome_unknown', retry: 'escalate' });
    expect(existsSync(path)).toBe(false);
  });

  it('upstream_error_text_is_dropped: an isError write is outcome_unknown (never confirmed_failure with unknown); a denied read is a failed read whose access-denied text reaches data.upstream_error and the text', async () => {
    const dir = tempDir('candor-up-iserror-');
    const root = join(dir, 'root');
    mkdirSync(root);
    const gw = await serve(dir, fsConfig(dir, root, {}));
    // Outside the allowed directory: the upstream refuses with isError.
    const w = await call(gw, 'fs_write_file', { path: join(dir, 'outside.txt'), content: 'x' });
    expect(w).toMatchObject({
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      retry: 'reconcile_first',
    });
    expect((w.data as { upstream_error: string }).upstream_error).toContain('Access denied');
    expect(existsSync(join(dir, 'outside.txt'))).toBe(false);
    const raw = await gw.client.callTool({
      name: 'fs_read_text_file',
      arguments: { path: join(dir, 'outside.txt') },
    });
    const rd = envelopeSchema.parse(raw.structuredContent);
    expect(rd).toMatchObject({ category: 'confirmed_failure', remote_effect: 'none' });
    const said = (rd.data as { upstream_error: string }).upstream_error;
    expect(said).toMatch(/Access denied - path outside allowed directories/);
    // reads_phrased_as_writes: a read says it failed, never "applied".
    expect(rd.message).toMatch(/^The read fs\/read_text_file failed/);
    expect(rd.message).not.toContain('applied');
    const text = (raw.content as Array<{ text: string }>)[0]!.text;
    expect(text.split('\n')[0]).toMatch(/^NOT DONE — confirmed_failure/);
    expect(text).toContain('Access denied - path outside allowed directories');
    // A read that answers says "Found", not "Done: … applied".
    const inside = join(root, 'present.txt');
    writeFileSync(inside, 'here');
    const found = await call(gw, 'fs_read_text_file', { path: inside });
    expect(found).toMatchObject({ ok: true, remote_effect: 'none' });
    expect(found.message).toBe('Found: fs/read_text_file answered; its answer is in data.');
  });
});

describe('server-memory behind Candor', () => {
  it('create_entities with the answer dropped, then the same call again: the duplicate guard answers reconcile_first, the memory file holds one entity', async () => {
    const dir = tempDir('candor-up-memory-');
    const memory = join(dir, 'memory.jsonl');
    const log = join(dir, 'calls.log');
    const gw = await serve(
      dir,
      `upstreams:
  mem:
    command: ${q(NODE)}
    args: [${q(KILL)}, ${q(NODE)}, ${q(MEMORY_SERVER)}]
    env:
      MEMORY_FILE_PATH: ${q(memory)}
      CANDOR_KILL_TOOL: create_entities
      CANDOR_KILL_ONCE: ${q(join(dir, 'killed'))}
      CANDOR_CALL_LOG: ${q(log)}
    tools:
      create_entities:
        lookup:
          tool: open_nodes
          arguments: { names: ['{{input.entities.0.name}}'] }
          match: { kind: count, array: entities, where: { name: '{{input.entities.0.name}}' }, ref: name }
`,
    );
    const args = {
      entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote notes'] }],
    };
    const first = await call(gw, 'mem_create_entities', args);
    expect(first).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    const again = await call(gw, 'mem_create_entities', args);
    expect(again).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      operation_id: first.operation_id,
    });
    expect(calls(log)).toEqual(['create_entities']);
    const entities = readFileSync(memory, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; name: string })
      .filter((x) => x.type === 'entity' && x.name === 'Ada');
    expect(entities).toHaveLength(1);
    const r = await call(gw, 'reconcile_operation', { operation_id: first.operation_id });
    expect(r).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
    expect(calls(log)).toEqual(['create_entities', 'open_nodes']);
  });
});

describe('candor probe mcp', () => {
  it('reports create_entities of server-memory retry-safe, and the memory file agrees (one entity after the repeat); probe_reports_reads_records_effects_refuses_rerun: read tools are reported as reads, every call is an operation in the ledger, the effects are listed, a second run is refused as not fresh', async () => {
    const dir = tempDir('candor-up-probe-');
    const memory = join(dir, 'memory.jsonl');
    const config = writeConfig(
      dir,
      `ledger: sqlite:probe-ledger.db
upstreams:
  mem:
    command: ${q(NODE)}
    args: [${q(MEMORY_SERVER)}]
    env: { MEMORY_FILE_PATH: ${q(memory)} }
    tools:
      create_entities:
        lookup:
          tool: open_nodes
          arguments: { names: ['{{input.entities.0.name}}'] }
          match: { kind: count, array: entities, where: { name: '{{input.entities.0.name}}' }, ref: name }
        probe:
          arguments: { entities: [{ name: Probe, entityType: thing, observations: [] }] }
      open_nodes:
        probe:
          arguments: { names: [Nobody] }
`,
    );
    const json = join(dir, 'probe.json');
    const probe = (...extra: string[]) =>
      spawnSync(
        NODE,
        [
          join(ROOT, 'bin', 'candor.js'),
          'probe',
          'mcp',
          '--config',
          config,
          '--json',
          json,
          ...extra,
        ],
        { cwd: dir, encoding: 'utf8' },
      );
    const r = probe();
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(
      '| mem | create_entities (mem_create_entities) | create | retry-safe |',
    );
    type Report = {
      tools: Array<{
        tool: string;
        action_class: string;
        verdict: string;
        reason: string;
        steps: Array<{ step: string; effects?: number }>;
        effects: Array<{ operation_id: string; step: string; refs: string[] }>;
      }>;
    };
    const report = JSON.parse(readFileSync(json, 'utf8')) as Report;
    const create = report.tools.find((t) => t.tool === 'create_entities')!;
    expect(create.verdict).toBe('retry-safe');
    expect(create.steps.map((s) => s.step)).toEqual([
      'lookup_before',
      'first_call',
      'lookup_after_first',
      'repeat_call',
      'lookup_after_repeat',
    ]);
    // Ground truth: the repeat did not add a second entity.
    const probes = readFileSync(memory, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; name: string })
      .filter((x) => x.type === 'entity' && x.name === 'Probe');
    expect(probes).toHaveLength(1);
    // Tools without a lookup are not guessed at.
    expect(report.tools.find((t) => t.tool === 'create_relations')).toMatchObject({
      verdict: 'not determinable',
      reason: 'no lookup',
    });
    // Reads are reported, checked as reads.
    expect(report.tools.find((t) => t.tool === 'open_nodes')).toMatchObject({
      action_class: 'read',
      verdict: 'read',
      reason: 'answered (found)',
    });
    expect(report.tools.find((t) => t.tool === 'read_graph')).toMatchObject({ verdict: 'read' });
    // The effects it left: both calls, each an operation in the ledger, with the reference seen.
    expect(create.effects.map((e) => e.step)).toEqual(['first_call', 'repeat_call']);
    expect(create.effects[0]!.refs).toContain('Probe#0');
    expect(r.stdout).toContain('## Effects the probe left');
    expect(r.stdout).toContain(create.effects[0]!.operation_id);
    const ledger = await openLedger(`sqlite:${join(dir, 'probe-ledger.db')}`);
    if (!ledger.ok) throw new Error(ledger.failure.message);
    try {
      for (const e of create.effects) {
        const evs = await ledger.value.query({ operation_id: e.operation_id });
        expect(evs.map((x) => x.kind)).toContain('attempt_finished');
      }
    } finally {
      await ledger.value.close();
    }
    // A second run on the same upstream is refused: the ledger shows the earlier probe's effects.
    const again = probe();
    expect(again.status).toBe(1);
    expect(again.stderr).toContain('mem/create_entities not probed: the ledger already holds 2');
    const second = JSON.parse(readFileSync(json, 'utf8')) as Report;
    expect(second.tools.find((t) => t.tool === 'create_entities')).toMatchObject({
      verdict: 'not fresh',
      effects: [],
    });
    // Told to rerun, the lookup still sees the first run's entity: not fresh, nothing written.
    const rerun = probe('--allow-rerun', '--tool', 'create_entities');
    expect(rerun.status).toBe(1);
    const third = JSON.parse(readFileSync(json, 'utf8')) as Report;
    expect(third.tools).toHaveLength(1);
    expect(third.tools[0]).toMatchObject({ verdict: 'not fresh' });
    expect(third.tools[0]!.reason).toContain('the lookup already sees 1 effect');
    expect(
      readFileSync(memory, 'utf8')
        .split('\n')
        .filter((l) => l.includes('"name":"Probe"') && l.includes('"type":"entity"')),
    ).toHaveLength(1);
  });
});
