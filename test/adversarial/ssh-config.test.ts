// Issue 22 items 4 and 7 through candor.yaml, on a real sshd: an SSH action declared in the
// configuration, its vault-held secret bound in secret_env. `candor serve` runs it as an MCP tool:
// the secret is on no command line on this machine and a command printing it leaves no trace in
// the ledger. A gateway SIGKILLed mid-command leaves an unknown operation that `candor recover`
// settles through the remote marker without a second run; an operation whose action the
// configuration no longer defines is reported for a person (exit 1).
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sshdSkipReason, startSshd, type SshdFixture } from '../../src/fakes/sshd.js';
import { projectOperation } from '../../src/ledger/projection.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/store.js';
import { shQuote } from '../../src/ssh/wrapper.js';
import { createKeyFile, initVault } from '../../src/vault/index.js';
import { serveCommand } from '../fixtures/mcp/stdio.js';
import { runCli } from './cli.js';
import { WAIT_GO, executions, until } from './ssh-support.js';

const skip = sshdSkipReason();
if (skip !== undefined) console.warn(`skipping the candor.yaml SSH suite: ${skip}`);

const TOKEN = 'vault-deploy-token-7f3c9a21e8b4';

describe.skipIf(skip !== undefined)('SSH actions from candor.yaml', { timeout: 240_000 }, () => {
  let sshd: SshdFixture;
  let dir: string;
  let root: string;
  let config: string;
  let otherConfig: string;
  let shortLeaseConfig: string;

  const markerDir = () => join(dir, 'ops');

  beforeAll(async () => {
    sshd = await startSshd();
    dir = mkdtempSync(join(tmpdir(), 'candor-ssh-config-'));
    root = join(dir, 'jobs');
    mkdirSync(root);
    const keyFile = join(dir, 'vault.key');
    const vaultPath = join(dir, 'vault.json');
    expect((await createKeyFile(keyFile)).ok).toBe(true);
    const made = await initVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
    if (!made.ok) throw new Error(made.failure.message);
    const bind = [{ kind: 'ssh' as const, host_ref: 'box' }];
    for (const c of [
      { name: 'box-key', type: 'ssh_key' as const, secret: sshd.privateKey.toString('utf8') },
      { name: 'deploy-token', type: 'ssh_secret' as const, secret: TOKEN },
    ]) {
      const set = await made.value.set({ ...c, bindings: bind });
      if (!set.ok) throw new Error(set.failure.message);
    }
    made.value.close();
    // The job counts its executions, holds while `hold` exists until `go`, then prints the
    // secret from its environment to a file and to stderr.
    const command = [
      `d=${shQuote(root)}/{{input.job}}`,
      'echo run >>"$d/count"',
      'touch "$d/started"',
      `if [ -f "$d/hold" ]; then ${WAIT_GO}; fi`,
      'printf %s "$API_TOKEN" >"$d/got"',
      // `pad` bytes first: the secret then straddles the 2048-character excerpt cut.
      "head -c {{input.pad}} /dev/zero | tr '\\0' x >&2",
      'echo "leaked: $API_TOKEN" >&2',
      'echo done >>"$d/log"',
    ].join('; ');
    const host = sshd.entry();
    const yaml = (action: string) => `ledger: sqlite:${join(dir, 'default.db')}
vault: { key_file: ${keyFile}, path: ${vaultPath} }
ssh:
  hosts:
    box:
      host: ${host.host}
      port: ${host.port}
      user: ${host.user}
      key_ref: vault:box-key
      host_key: { policy: pinned, fingerprint: '${sshd.hostKeyFingerprint}' }
      marker_dir: ${markerDir()}
  actions:
    - name: ${action}
      class: execute
      subject: the deployment
      description: Deploy with the vault-held token.
      host_ref: box
      command: ${JSON.stringify(command)}
      input:
        type: object
        properties: { job: { type: string, pattern: '^[a-z0-9-]{1,60}$' }, pad: { type: integer, minimum: 0 } }
        required: [job, pad]
        additionalProperties: false
      secret_env: { API_TOKEN: vault:deploy-token }
      deadline_ms: 120000
    - name: write_value
      class: execute
      subject: the value
      description: Write a value to a file.
      host_ref: box
      command: ${JSON.stringify(`printf %s {{input.value}} >${shQuote(root)}/{{input.file}}`)}
      input:
        type: object
        properties: { value: { type: string }, file: { type: string } }
        required: [value, file]
`;
    config = join(dir, 'candor.yaml');
    writeFileSync(config, yaml('deploy'));
    otherConfig = join(dir, 'other.yaml');
    writeFileSync(otherConfig, yaml('something_else'));
    // A gateway whose ownership lease lapses 1 s after its last heartbeat: every gateway holds one,
    // so another configuration's `recover` leaves a live (or just-killed) owner's operations alone
    // until it lapses.
    shortLeaseConfig = join(dir, 'short-lease.yaml');
    writeFileSync(
      shortLeaseConfig,
      `${yaml('deploy')}fleet: { lease_ms: 1000, recover_on_start: false, sweep_every_ms: 0 }\n`,
    );
  });
  afterAll(async () => {
    await sshd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const jobDir = (job: string, hold: boolean) => {
    const d = join(root, job);
    mkdirSync(d, { recursive: true });
    if (hold) writeFileSync(join(d, 'hold'), '');
    return d;
  };

  async function gateway(ledger: string, file = config) {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [...serveCommand(), '--config', file, '--ledger', `sqlite:${ledger}`],
      env: { PATH: process.env['PATH'] ?? '' },
      cwd: dir,
      stderr: 'pipe',
    });
    let err = '';
    transport.stderr?.on('data', (d: Buffer) => (err += d.toString('utf8')));
    const client = new Client({ name: 'candor-ssh-config-test', version: '1.0.0' });
    await client.connect(transport);
    return { client, transport, stderr: () => err };
  }

  const recoverOther = (ledgerPath: string) =>
    runCli(['recover', '--config', otherConfig, '--ledger', `sqlite:${ledgerPath}`]);

  /** Processes on this machine whose command line holds `secret`. */
  const argvHolding = (secret: string) =>
    readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`).includes(secret);
        } catch {
          return false;
        }
      });

  const doneMarkers = () =>
    existsSync(markerDir())
      ? readdirSync(markerDir()).filter((id) => existsSync(join(markerDir(), id, 'done')))
      : [];

  it('serve refuses a vault entry of the wrong type or binding, with FILE:LINE:COL (exit 2)', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(
      bad,
      readFileSync(config, 'utf8')
        .replace('key_ref: vault:box-key', 'key_ref: vault:deploy-token')
        .replace('API_TOKEN: vault:deploy-token', 'API_TOKEN: vault:nowhere'),
    );
    const run = await runCli(['serve', '--config', bad, '--ledger', 'memory:']);
    expect(run.err.trim().split('\n')).toEqual([
      `${bad}:9:16: ssh.hosts.box.key_ref: vault entry "deploy-token" is ssh_secret; this needs ssh_key`,
      `${bad}:24:32: ssh.actions[0].secret_env.API_TOKEN: the vault holds no credential named "nowhere" (candor vault list shows what it holds)`,
    ]);
    expect(run.code).toBe(2);
  });

  it('serve runs the action; the vault secret is on no command line and leaves no trace', async () => {
    const ledgerPath = join(dir, 'serve.db');
    const gw = await gateway(ledgerPath);
    const { tools } = await gw.client.listTools();
    expect(tools.map((t) => t.name)).toContain('deploy');
    const d = jobDir('cfg-secret', true);
    const pending = gw.client.callTool({
      name: 'deploy',
      arguments: { job: 'cfg-secret', pad: 2030 },
    });
    await until(() => existsSync(join(d, 'started')), 'the job to start');
    expect(argvHolding(TOKEN)).toEqual([]);
    writeFileSync(join(d, 'go'), '');
    const result = await pending;
    expect(result.structuredContent).toMatchObject({ ok: true, category: 'succeeded' });
    expect(readFileSync(join(d, 'got'), 'utf8')).toBe(TOKEN);
    await gw.client.close();
    expect(gw.stderr()).not.toContain(TOKEN);
    expect(JSON.stringify(result)).not.toContain(TOKEN);
    const ledger = openSqliteLedger(ledgerPath);
    try {
      const all = JSON.stringify(await ledger.read(0));
      // Redacted whole, then cut: the excerpt ends with the whole marker, never a prefix.
      expect(all).toContain(`${'x'.repeat(2030)}leaked: [REDACTED]`);
      expect(all).not.toContain(TOKEN.slice(0, 6));
    } finally {
      await ledger.close();
    }
    for (const f of [ledgerPath, `${ledgerPath}-wal`].filter((p) => existsSync(p)))
      expect(readFileSync(f).includes(TOKEN)).toBe(false);
    expect(executions(root, 'cfg-secret')).toBe(1);
  });

  it('arguments arrive byte for byte in the remote command; nothing in them runs', async () => {
    const gw = await gateway(join(dir, 'quote.db'));
    const canary = join(root, 'pwned');
    const value = `a'b"c; touch ${canary}; $(touch ${canary}) \`touch ${canary}\` * \\ \n$HOME ${'x'.repeat(1000)}`;
    const result = await gw.client.callTool({
      name: 'write_value',
      arguments: { value, file: "out '$(id)' ; * `id`" },
    });
    await gw.client.close();
    expect(result.structuredContent).toMatchObject({ ok: true, category: 'succeeded' });
    expect(readFileSync(join(root, "out '$(id)' ; * `id`"), 'utf8')).toBe(value);
    expect(existsSync(canary)).toBe(false);
  });

  it('a SIGKILLed gateway leaves an unknown operation; recover settles it through the marker, no second run', async () => {
    const ledgerPath = join(dir, 'kill.db');
    const gw = await gateway(ledgerPath);
    const d = jobDir('cfg-kill', true);
    const before = new Set(doneMarkers());
    const pending = gw.client
      .callTool({ name: 'deploy', arguments: { job: 'cfg-kill', pad: 0 } })
      .catch(() => 'gone');
    await until(() => existsSync(join(d, 'started')), 'the job to start');
    process.kill(gw.transport.pid!, 'SIGKILL');
    expect(await pending).toBe('gone');
    // The remote command runs on to its end, and the wrapper writes its done marker.
    writeFileSync(join(d, 'go'), '');
    await until(() => doneMarkers().some((id) => !before.has(id)), 'the done marker');
    await gw.client.close().catch(() => undefined);

    const run = await runCli(['recover', '--config', config, '--ledger', `sqlite:${ledgerPath}`]);
    expect(run.err).toBe('');
    expect(run.out).toMatch(/deploy {2}found by lookup: .*\[succeeded \/ never\]/);
    expect(run.out).toContain(
      '1 unresolved operation(s) worked through: 1 settled, 0 need a person',
    );
    expect(run.code).toBe(0);
    expect(executions(root, 'cfg-kill')).toBe(1);
    const ledger = openSqliteLedger(ledgerPath);
    try {
      const events = await ledger.read(0);
      const ids = [...new Set(events.map((e) => e.operation_id).filter((x) => x !== null))];
      expect(ids).toHaveLength(1);
      const view = projectOperation(await ledger.query({ operation_id: ids[0]! }))!;
      expect(view.state).toBe('succeeded');
      expect(view.observations.at(-1)?.source).toBe('marker');
      expect(view.attempts).toHaveLength(1);
      expect(JSON.stringify(events)).not.toContain(TOKEN);
    } finally {
      await ledger.close();
    }
    // A second recover finds nothing left to do and runs nothing.
    const again = await runCli(['recover', '--config', config, '--ledger', `sqlite:${ledgerPath}`]);
    expect(again.code).toBe(0);
    expect(executions(root, 'cfg-kill')).toBe(1);
  });

  it('an SSH operation whose action the configuration does not define needs a person (exit 1)', async () => {
    const ledgerPath = join(dir, 'orphan.db');
    const gw = await gateway(ledgerPath, shortLeaseConfig);
    const d = jobDir('cfg-orphan', true);
    const pending = gw.client
      .callTool({ name: 'deploy', arguments: { job: 'cfg-orphan', pad: 0 } })
      .catch(() => 'gone');
    await until(() => existsSync(join(d, 'started')), 'the job to start');
    process.kill(gw.transport.pid!, 'SIGKILL');
    expect(await pending).toBe('gone');
    await gw.client.close().catch(() => undefined);

    // While the killed gateway's lease is live, recovery from another configuration leaves the
    // operation to it and sends nothing; once it lapses, the operation is this run's, and with no
    // such action here a person decides.
    let run = await recoverOther(ledgerPath);
    // (Each run is a process start, about a second here: a few runs outlast the lease.)
    for (let runs = 1; run.out.includes('left to its owner'); runs++) {
      expect(run.out).toMatch(/deploy {2}left to its owner: .*lease is live until/);
      expect(executions(root, 'cfg-orphan')).toBe(1);
      expect(runs).toBeLessThan(30);
      run = await recoverOther(ledgerPath);
    }
    expect(run.out).toMatch(/deploy {2}needs a person: /);
    expect(run.out).toContain(
      '1 unresolved operation(s) worked through: 0 settled, 1 need a person',
    );
    expect(run.code).toBe(1);
    writeFileSync(join(d, 'go'), '');
    await until(() => existsSync(join(d, 'log')), 'the held job to finish');
    expect(executions(root, 'cfg-orphan')).toBe(1);
  });
});
