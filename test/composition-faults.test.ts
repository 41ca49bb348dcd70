// The composition root (src/config/open.ts) under fault injection (issue 32): every command that
// opens things — `candor serve` (startGateway, also the library's), `candor recover`, `candor
// probe mcp` and `candor ui` — is started with a failure injected before each of its steps in
// turn, and once in full and then stopped. After each, nothing it opened is left: no ledger file
// handle, no upstream child process, no listener, no timer or socket beyond the baseline, and the
// vault's key material is forgotten (its continuation key no longer the one derived from the key).
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer, connect, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { compositionHooks } from '../src/config/open.js';
import { loadConfig, type LoadedConfig } from '../src/config/load.js';
import { openLedger } from '../src/ledger/open.js';
import { startGateway } from '../src/mcp/start.js';
import { run as recover } from '../src/cli/commands/recover.js';
import { run as probe } from '../src/cli/commands/probe.js';
import { run as ui } from '../src/cli/commands/ui.js';
import { createKeyFile, initVault, type Vault } from '../src/vault/index.js';
import { ROOT, tempDir, writeConfig } from './fixtures/mcp/stdio.js';

const PID_SERVER = join(ROOT, 'test', 'fixtures', 'upstream', 'pid-server.mjs');
const q = (s: string): string => JSON.stringify(s);

afterEach(() => {
  compositionHooks.step = null;
  compositionHooks.opened = null;
});

interface World {
  dir: string;
  config: string;
  ledgerUrl: string;
  ledgerFile: string;
  pidFile: string;
  port: number;
  otlp: { url: string; close: () => Promise<void> };
}

/** A free TCP port on loopback (listened on and released). */
async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** An OTLP/HTTP receiver that accepts everything. */
async function otlpReceiver(): Promise<World['otlp']> {
  const { createServer: createHttp } = await import('node:http');
  const server = createHttp((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A vault, an existing SQLite ledger, one stdio upstream, OTLP telemetry and a fleet sweep. */
async function world(prefix: string): Promise<World> {
  const dir = tempDir(prefix);
  const keyFile = join(dir, 'vault.key');
  const vaultPath = join(dir, 'vault.json');
  expect((await createKeyFile(keyFile)).ok).toBe(true);
  const v = await initVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
  if (!v.ok) throw new Error(v.failure.message);
  v.value.close();
  const ledgerFile = join(dir, 'ledger.db');
  const ledgerUrl = `sqlite:${ledgerFile}`;
  const made = await openLedger(ledgerUrl);
  if (!made.ok) throw new Error(made.failure.message);
  await made.value.close();
  const pidFile = join(dir, 'pids.txt');
  const otlp = await otlpReceiver();
  const config = writeConfig(
    dir,
    `ledger: ${q(ledgerUrl)}
vault:
  key_file: ${q(keyFile)}
  path: ${q(vaultPath)}
upstreams:
  rec:
    command: ${q(process.execPath)}
    args: [${q(PID_SERVER)}]
    env:
      CANDOR_PID_FILE: ${q(pidFile)}
fleet:
  lease_ms: 60000
  recover_on_start: false
  sweep_every_ms: 3600000
telemetry:
  otlp: ${q(otlp.url)}
  metrics_interval_ms: 3600000
`,
  );
  return { dir, config, ledgerUrl, ledgerFile, pidFile, port: await freePort(), otlp };
}

async function loaded(w: World): Promise<LoadedConfig> {
  const l = await loadConfig(w.config);
  if (!l.ok) throw new Error(JSON.stringify(l.failure));
  return l.value;
}

/** Open file descriptors of this process on the ledger (its file, -wal, -shm). */
function ledgerHandles(w: World): string[] {
  if (!existsSync('/proc/self/fd')) return [];
  const out: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(w.ledgerFile)) out.push(target);
    } catch {
      // closed between the listing and the read
    }
  }
  return out;
}

/** Pids of upstream children started so far that are still alive. */
function liveChildren(w: World): number[] {
  if (!existsSync(w.pidFile)) return [];
  return readFileSync(w.pidFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
}

/** Whether something accepts connections on 127.0.0.1:port. */
async function listening(port: number): Promise<boolean> {
  const socket = connect(port, '127.0.0.1');
  try {
    await Promise.race([once(socket, 'connect'), once(socket, 'error').then(() => false)]);
    return !socket.destroyed && socket.readyState === 'open';
  } catch {
    return false;
  } finally {
    const closed = once(socket, 'close');
    socket.destroy();
    await closed;
  }
}

/** Active resources by type (timers, sockets, servers, child processes, pipes, file handles). */
function resources(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) out[r] = (out[r] ?? 0) + 1;
  return out;
}

/** The step names of one clean start, then a start with a failure before each of them. */
interface Probe {
  /** Starts the command's composition; resolves once it stopped (failed or closed). */
  start(w: World): Promise<{ failed: boolean }>;
}

/** Records the vault a composition opened and the continuation key it had then. */
function watchVault(): { vault: Vault | null; keyAtOpen: string | null } {
  const seen: { vault: Vault | null; keyAtOpen: string | null } = { vault: null, keyAtOpen: null };
  compositionHooks.opened = (name, value) => {
    if (name !== 'vault' || !value) return;
    seen.vault = value as Vault;
    seen.keyAtOpen = Buffer.from(seen.vault.continuationKey()).toString('hex');
  };
  return seen;
}

async function leftBehind(
  w: World,
  baseline: Record<string, number>,
  vault: { vault: Vault | null; keyAtOpen: string | null },
): Promise<Record<string, unknown>> {
  // Handles closed during the stop finish closing in the loop's close phase (a child process's
  // handle after its 'close' event): two loop turns, no timer.
  for (let turn = 0; turn < 2; turn++) await new Promise((r) => setImmediate(r));
  // Taken first: the checks below open (and close) a socket of their own.
  const now = resources();
  const grown = Object.fromEntries(Object.entries(now).filter(([k, n]) => n > (baseline[k] ?? 0)));
  return {
    ledgerHandles: ledgerHandles(w),
    children: liveChildren(w),
    listening: await listening(w.port),
    resources: grown,
    vaultKeyKept:
      vault.vault !== null &&
      Buffer.from(vault.vault.continuationKey()).toString('hex') === vault.keyAtOpen,
  };
}

const NOTHING = {
  ledgerHandles: [],
  children: [],
  listening: false,
  resources: {},
  vaultKeyKept: false,
};

const io = () => {
  const lines: string[] = [];
  return { lines, out: (s: string) => void lines.push(s), err: (s: string) => void lines.push(s) };
};

const COMMANDS: Record<string, Probe> = {
  // `candor serve --http` and the library's startGateway: one and the same composition.
  serve: {
    async start(w) {
      const started = await startGateway({
        loaded: await loaded(w),
        httpPort: w.port,
        version: '0.0.0-test',
        log: () => undefined,
      });
      if (!started.ok) return { failed: true };
      // Up for real: listening, its upstream child alive, its ledger open.
      expect(await listening(w.port)).toBe(true);
      expect(liveChildren(w)).toHaveLength(1);
      expect(ledgerHandles(w).length).toBeGreaterThan(0);
      await started.value.close();
      await started.value.closed;
      return { failed: false };
    },
  },
  recover: {
    async start(w) {
      const out = io();
      const code = await recover(['--config', w.config, '--ledger', w.ledgerUrl], out).catch(
        () => 3,
      );
      return { failed: code !== 0 };
    },
  },
  probe: {
    async start(w) {
      const out = io();
      const code = await probe(['mcp', '--config', w.config, '--ledger', w.ledgerUrl], out).catch(
        () => 3,
      );
      return { failed: code === 2 || code === 3 };
    },
  },
  ui: {
    async start(w) {
      let printed!: () => void;
      const up = new Promise<void>((r) => (printed = r));
      let stop!: () => void;
      const until = new Promise<void>((r) => (stop = r));
      const out = io();
      const running = ui(
        ['--ledger', w.ledgerUrl, '--port', String(w.port)],
        {
          out: (s) => {
            out.out(s);
            printed();
          },
          err: out.err,
        },
        until,
      ).catch(() => 3);
      const first = await Promise.race([up.then(() => null), running]);
      if (first !== null) return { failed: true };
      expect(await listening(w.port)).toBe(true);
      expect(ledgerHandles(w).length).toBeGreaterThan(0);
      stop();
      return { failed: (await running) !== 0 };
    },
  },
};

const STEPS: Record<string, string[]> = {
  serve: ['vault', 'ledger', 'upstreams', 'telemetry', 'runtime', 'sweep', 'listen'],
  recover: ['vault', 'ledger', 'upstreams', 'runtime'],
  probe: ['vault', 'ledger', 'upstreams', 'runtime'],
  ui: ['ledger', 'listen'],
};

describe('the composition root under fault injection', () => {
  for (const [command, probeOf] of Object.entries(COMMANDS)) {
    it(`${command}: a clean start and stop, and a failure before each step, leave nothing open`, async () => {
      const w = await world(`candor-compose-${command}-`);
      try {
        // Warm up module loading (dynamic imports, lazily created pools) outside the baseline.
        const steps: string[] = [];
        compositionHooks.step = (name) => void steps.push(name);
        expect(await probeOf.start(w)).toEqual({ failed: false });
        expect(steps).toEqual(STEPS[command]);

        const baseline = resources();
        const clean = watchVault();
        compositionHooks.step = null;
        expect(await probeOf.start(w)).toEqual({ failed: false });
        expect({ step: 'none', ...(await leftBehind(w, baseline, clean)) }).toEqual({
          step: 'none',
          ...NOTHING,
        });
        if (command !== 'ui') expect(clean.vault).not.toBeNull();

        for (const at of steps) {
          const vault = watchVault();
          compositionHooks.step = (name) => {
            if (name === at) throw new Error(`injected failure before ${name}`);
          };
          expect({ step: at, ...(await probeOf.start(w)) }).toEqual({ step: at, failed: true });
          compositionHooks.step = null;
          expect({ step: at, ...(await leftBehind(w, baseline, vault)) }).toEqual({
            step: at,
            ...NOTHING,
          });
        }
      } finally {
        await w.otlp.close();
      }
    });
  }
});
