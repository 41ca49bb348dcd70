// Candor in front of real third-party MCP servers from npm (@modelcontextprotocol/server-filesystem
// and server-memory), driven by a real MCP client over stdio through `candor serve`. The upstream
// is killed deterministically after the request was written (test/fixtures/upstream/
// kill-on-call.mjs); the ground truth is the upstream's own state (the disk, the memory file).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { envelopeSchema, type Envelope } from '../src/core/envelope.js';
import { openLedger } from '../src/ledger/open.js';
import { createKeyFile, initVault } from '../src/vault/index.js';
import { connectStdio, ROOT, tempDir, writeConfig, type StdioGateway } from './fixtures/mcp/stdio.js';

const KILL = join(ROOT, 'test', 'fixtures', 'upstream', 'kill-on-call.mjs');
const FS_SERVER = join(ROOT, 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');
const MEMORY_SERVER = join(ROOT, 'node_modules', '@modelcontextprotocol', 'server-memory', 'dist', 'index.js');
const NODE = process.execPath;

let open: StdioGateway[] = [];
afterEach(async () => {
  for (const gw of open) await gw.close();
  open = [];
});

async function serve(dir: string, yaml: string): Promise<StdioGateway> {
  const config = writeConfig(dir, yaml);
  const gw = await connectStdio(['--config', config, '--ledger', `sqlite:${join(dir, 'ledger.db')}`], {}, dir);
  open.push(gw);
  return gw;
}

async function call(gw: StdioGateway, name: string, args: Record<string, unknown>): Promise<Envelope> {
  const r = await gw.client.callTool({ name, arguments: args });
  return envelopeSchema.parse(r.structuredContent);
}

const q = (s: string): string => JSON.stringify(s);

function fsConfig(
  dir: string,
  root: string,
  kill: Record<string, string>,
  extra = '',
): string {
  return `${extra}upstreams:
  fs:
    command: ${q(NODE)}
    args: [${q(KILL)}, ${q(NODE)}, ${q(FS_SERVER)}, ${q(root)}]
    env:${Object.keys(kill).length === 0 ? ' {}' : ''}
${Object.entries(kill).map(([k, v]) => `      ${k}: ${q(v)}`).join('\n')}
    deadline_ms: 20000
    tools:
      write_file:
        class: create
        lookup:
          tool: read_text_file
          arguments: { path: '{{input.path}}' }
          match: { kind: text_equals, value: '{{input.content}}' }
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
      }),
    );
    const path = join(dir, 'report.txt');
    const e = await call(gw, 'fs_write_file', { path, content: 'quarterly' });
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
    await gw.close();
    open = [];
    const ledger = await openLedger(`sqlite:${join(dir, 'ledger.db')}`);
    if (!ledger.ok) throw new Error('ledger');
    const events = await ledger.value.query({ operation_id: e.operation_id! });
    await ledger.value.close();
    expect(events.map((ev) => ev.kind)).toEqual([
      'operation_opened',
      'attempt_started',
      'attempt_finished',
      'observation_recorded',
      'operation_resolved',
    ]);
    const finished = events[2]!;
    expect(finished.kind === 'attempt_finished' && finished.data.dispatch_state).toBe('sent_no_response');
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
      fsConfig(dir, dir, { CANDOR_CALL_LOG: log }, `approvals:\n  approver: console\n  dir: ${q(approvals)}\n`),
    );
    writeFileSync(join(approvals, 'LOCKED'), JSON.stringify({ by: 'test', at: Date.now() }));
    const path = join(dir, 'locked.txt');
    const e = await call(gw, 'fs_write_file', { path, content: 'x' });
    expect(e).toMatchObject({ ok: false, category: 'gate_locked', remote_effect: 'none', retry: 'never' });
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
    const raw = await gw.client.callTool({ name: 'fs_read_text_file', arguments: { path: leakFile } });
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
