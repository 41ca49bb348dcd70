// The SSH fixture (DESIGN.md §4, published with the fakes as `candor/testing`): a real OpenSSH
// server on loopback with a private config, generated host and user keys, and a foreground process
// owned by its caller; plus a TCP relay that can cut or hold its connections. Outside CI a missing
// sshd skips the SSH suites and matrix rows with a printed reason; under CI=true it is an error.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { hostKeyFingerprint, type HostEntry } from '../ssh/inventory.js';

/** The OpenSSH server binary; `CANDOR_SSHD` points elsewhere (another install, or a missing one). */
export const SSHD_PATH = process.env.CANDOR_SSHD ?? '/usr/sbin/sshd';
const KEYGEN = 'ssh-keygen';

export interface SshdFixture {
  host: string;
  port: number;
  user: string;
  /** OpenSSH-format private key accepted by the server. */
  privateKey: Buffer;
  hostKeyFingerprint: string;
  /** Private temp directory (config, keys, logs); tests may put their work files under it. */
  dir: string;
  /** An inventory entry for this server; the key is referenced as `file:<path>`. */
  entry: (overrides?: Partial<HostEntry>) => HostEntry;
  /** Resolves the entry's `file:` key ref (the only ref these tests use). */
  resolveKey: (ref: string) => Promise<Buffer>;
  /**
   * A freshly generated key the server does not accept, as a `file:` key ref that `resolveKey`
   * resolves (for "authentication rejected").
   */
  strangerKeyRef: (name: string) => string;
  /** sshd's own log so far (stderr, `-e`). */
  log: () => string;
  stop: () => Promise<void>;
}

/** Undefined when sshd can run here; otherwise why not (never throws). */
export function sshdUnavailableReason(): string | undefined {
  return !existsSync(SSHD_PATH)
    ? `${SSHD_PATH} not found (apt-get install openssh-server openssh-client)`
    : spawnSync(KEYGEN, ['-?']).error
      ? `${KEYGEN} not found (apt-get install openssh-client)`
      : undefined;
}

/**
 * For test suites: undefined when sshd can run here; otherwise why not. Under CI=true a missing
 * server throws, so a CI run can never silently skip the suites.
 */
export function sshdSkipReason(): string | undefined {
  const missing = sshdUnavailableReason();
  if (missing === undefined) return undefined;
  if (process.env.CI === 'true')
    throw new Error(`CI=true but the sshd suites cannot run: ${missing}`);
  return missing;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** A loopback port nobody listens on (for "connection refused"). */
export const closedPort = freePort;

let openSsh98: boolean | undefined;
/**
 * Whether the sshd the fixture starts is OpenSSH 9.8 or later (asked once per process). Its own
 * `-V` answers (an sshd without `-V` still prints its version with the usage); the client's
 * version stands in only when the server names none.
 */
function atLeastOpenSsh98(): boolean {
  if (openSsh98 !== undefined) return openSsh98;
  const version = (cmd: string): RegExpExecArray | null => {
    const v = spawnSync(cmd, ['-V'], { encoding: 'utf8', timeout: 10_000 });
    return /OpenSSH_(\d+)\.(\d+)/.exec(`${v.stderr ?? ''}${v.stdout ?? ''}`);
  };
  const m = version(SSHD_PATH) ?? version('ssh');
  const major = Number(m?.[1] ?? 0);
  const minor = Number(m?.[2] ?? 0);
  openSsh98 = major > 9 || (major === 9 && minor >= 8);
  return openSsh98;
}

/** OpenSSH >= 9.8 penalises sources that fail auth or drop connections; the tests do both. */
const supportsPerSourcePenalties = atLeastOpenSsh98;

/**
 * Before 9.8 the listener re-executes the whole sshd binary for every connection (re-reading its
 * configuration and host keys); `-r` turns that off: about a third less sshd CPU per login (the
 * SSH kill campaign logs in hundreds of times: 20 s of sshd CPU before, 13.6 s after). 9.8 moved
 * the per-connection work into sshd-session and removed `-r`.
 */
const noReexec = (): string[] => (atLeastOpenSsh98() ? [] : ['-r']);

function keygen(path: string): void {
  const r = spawnSync(KEYGEN, ['-q', '-t', 'ed25519', '-N', '', '-C', 'candor-test', '-f', path]);
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr.toString()}`);
}

/** The public key blob of an OpenSSH `.pub` line (`type base64 comment`). */
function pubBlob(pubLine: string): Buffer {
  const b64 = pubLine.trim().split(/\s+/)[1];
  if (b64 === undefined) throw new Error('malformed public key file');
  return Buffer.from(b64, 'base64');
}

export interface SshdOptions {
  /** Extra sshd_config lines (e.g. `SetEnv PATH=…` to take tools away from sessions). */
  extraConfig?: string[];
  /**
   * Let the remote shell run the user's interactive start-up (`~/.bashrc`) for commands (default
   * false). bash runs it for commands arriving over SSH when SHLVL is unset; a person's set-up
   * (version managers, prompts) is no part of what a test checks and can cost seconds per command,
   * so sessions get `SHLVL=1` ("not the top-level shell") unless this is true.
   */
  userShellInit?: boolean;
}

/** sshd_config allows one `SetEnv` line (the first wins): SHLVL=1 joins the caller's, if any. */
function sessionEnvLines(options: SshdOptions): string[] {
  const extra = options.extraConfig ?? [];
  if (options.userShellInit === true) return extra;
  const at = extra.findIndex((l) => /^\s*SetEnv\s/i.test(l));
  if (at < 0) return [...extra, 'SetEnv SHLVL=1'];
  return extra.map((l, i) => (i === at ? `${l} SHLVL=1` : l));
}

export async function startSshd(options: SshdOptions = {}): Promise<SshdFixture> {
  const dir = mkdtempSync(join(tmpdir(), 'candor-sshd-'));
  const user = userInfo().username;
  keygen(join(dir, 'host_ed25519'));
  keygen(join(dir, 'user_ed25519'));
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'user_ed25519.pub')), {
    mode: 0o600,
  });
  const fingerprint = hostKeyFingerprint(
    pubBlob(readFileSync(join(dir, 'host_ed25519.pub'), 'utf8')),
  );
  // Privilege separation directory (root only; an unprivileged sshd does not use it).
  if (process.getuid?.() === 0 && !existsSync('/run/sshd'))
    mkdirSync('/run/sshd', { mode: 0o755, recursive: true });

  let lastLog = '';
  for (let tries = 0; tries < 3; tries++) {
    const port = await freePort();
    const config = [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(dir, 'host_ed25519')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'StrictModes no',
      'UsePAM no',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      'PrintMotd no',
      'UseDNS no',
      'MaxStartups 200',
      'MaxSessions 50',
      'LogLevel VERBOSE',
      ...(supportsPerSourcePenalties() ? ['PerSourcePenalties no'] : []),
      ...sessionEnvLines(options),
    ].join('\n');
    writeFileSync(join(dir, 'sshd_config'), `${config}\n`);
    const child = spawn(SSHD_PATH, ['-D', '-e', ...noReexec(), '-f', join(dir, 'sshd_config')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    child.stderr?.on('data', (d: Buffer) => {
      log += d.toString();
    });
    const ready = await waitListening(child, port, () => log);
    lastLog = log;
    if (!ready) continue;
    const keyPath = join(dir, 'user_ed25519');
    const fixture: SshdFixture = {
      host: '127.0.0.1',
      port,
      user,
      privateKey: readFileSync(keyPath),
      hostKeyFingerprint: fingerprint,
      dir,
      entry: (overrides = {}) => ({
        host: '127.0.0.1',
        port,
        user,
        key_ref: `file:${keyPath}`,
        host_key: { policy: 'pinned', fingerprint },
        marker_dir: join(dir, 'ops'),
        ...overrides,
      }),
      resolveKey: (ref) =>
        ref.startsWith('file:')
          ? Promise.resolve(readFileSync(ref.slice('file:'.length)))
          : Promise.reject(new Error('unknown key ref')),
      strangerKeyRef: (name) => {
        const path = join(dir, `stranger_${name.replace(/[^A-Za-z0-9_-]/g, '_')}`);
        if (!existsSync(path)) keygen(path);
        return `file:${path}`;
      },
      log: () => log,
      stop: () => stopChild(child).then(() => rmSync(dir, { recursive: true, force: true })),
    };
    return fixture;
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`sshd did not start:\n${lastLog}`);
}

/** True once sshd answers with an SSH banner; false if it exited (e.g. port taken). */
async function waitListening(
  child: ChildProcess,
  port: number,
  log: () => string,
): Promise<boolean> {
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    if (log().includes('Server listening') && (await banner(port))) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  await stopChild(child);
  return false;
}

function banner(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.once('data', (d: Buffer) => done(d.toString().startsWith('SSH-2.0-')));
    s.once('error', () => done(false));
    s.setTimeout(1000, () => done(false));
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/**
 * A loopback TCP relay in front of sshd whose live connections can be cut on demand: a real
 * transport loss (the client sees its socket close), not a local abort.
 */
export interface CutProxy {
  port: number;
  /** Destroys every relayed connection (both sides) and drops a pending `holdNext`. */
  cutAll(): void;
  /**
   * The next connection relays the client's bytes but holds the server's (its banner never reaches
   * the client, so the SSH handshake cannot finish). Resolves once the server's first bytes were
   * held; the connection stays open until the client gives up or `cutAll`.
   */
  holdNext(): Promise<void>;
  close(): Promise<void>;
}

export async function startCutProxy(targetPort: number): Promise<CutProxy> {
  const live = new Set<Socket>();
  let hold: (() => void) | null = null;
  const srv = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    live.add(client);
    live.add(upstream);
    client.pipe(upstream);
    const held = hold;
    hold = null;
    if (held) upstream.once('data', () => held());
    else upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      live.delete(client);
      live.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const addr = srv.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  return {
    port,
    cutAll: () => {
      hold = null;
      for (const s of [...live]) s.destroy();
      live.clear();
    },
    holdNext: () =>
      new Promise<void>((resolve) => {
        hold = resolve;
      }),
    close: () =>
      new Promise((resolve) => {
        for (const s of live) s.destroy();
        srv.close(() => resolve());
      }),
  };
}

/** A second local account for tests that need another user (created and removed by the test). */
export interface LocalUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
  /** Runs a `sh -c` command as this user; returns its exit status and output. */
  run: (command: string) => { status: number | null; stdout: string; stderr: string };
  remove: () => void;
}

/** Why a second local user cannot be created here (not root, no useradd), or undefined. */
export function localUserUnavailableReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'creating a second local user needs root';
  if (spawnSync('useradd', ['--help']).error) return 'useradd not found';
  if (spawnSync('runuser', ['--help']).error) return 'runuser not found';
  return undefined;
}

/** Like sshdSkipReason: a reason to skip outside CI; under CI=true a missing capability throws. */
export function localUserSkipReason(): string | undefined {
  const missing = sshdUnavailableReason() ?? localUserUnavailableReason();
  if (missing === undefined) return undefined;
  if (process.env.CI === 'true')
    throw new Error(`CI=true but the second-user suites cannot run: ${missing}`);
  return missing;
}

/**
 * Creates a local account that can log in to the fixture with the fixture's user key (the fixture
 * reads one authorized_keys file for every user): a home directory, the given login shell, and a
 * password field of `*` (no password login, but not a locked account, which sshd refuses).
 */
export function createLocalUser(shell = '/bin/sh'): LocalUser {
  const name = `candor${process.pid % 100000}${Math.floor(Math.random() * 1e4)}`;
  const add = spawnSync('useradd', ['-m', '-s', shell, '-p', '*', name], { encoding: 'utf8' });
  if (add.status !== 0) throw new Error(`useradd ${name} failed: ${add.stderr}`);
  const id = (flag: string) =>
    Number(spawnSync('id', [flag, name], { encoding: 'utf8' }).stdout.trim());
  const home = spawnSync('sh', ['-c', `getent passwd ${name} | cut -d: -f6`], {
    encoding: 'utf8',
  }).stdout.trim();
  return {
    name,
    uid: id('-u'),
    gid: id('-g'),
    home,
    run: (command) => {
      const r = spawnSync('runuser', ['-u', name, '--', 'sh', '-c', command], {
        encoding: 'utf8',
      });
      return { status: r.status, stdout: r.stdout, stderr: r.stderr };
    },
    remove: () => {
      spawnSync('userdel', ['-r', '-f', name]);
    },
  };
}
