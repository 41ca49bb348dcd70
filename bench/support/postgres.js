// A throwaway PostgreSQL server for tests and benchmarks: initdb + pg_ctl in a temp directory,
// listening on a free TCP port of 127.0.0.1 (and a unix socket inside the temp directory). Plain
// ESM JavaScript so the benchmarks can use it without a build step; test/support/postgres.ts
// wraps it with the skip/CI policy. PostgreSQL refuses to run as root, so under root the server
// runs as the `postgres` user (or `nobody`), which owns the temp directory.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';

const TOOLS = ['initdb', 'pg_ctl', 'postgres'];

/** Finds a directory holding initdb, pg_ctl and postgres: the newest /usr/lib/postgresql/N/bin, then PATH. */
export function findPostgresBin() {
  const candidates = [];
  const base = '/usr/lib/postgresql';
  if (existsSync(base)) {
    const versions = readdirSync(base)
      .filter((v) => /^\d+(\.\d+)?$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(join(base, v, 'bin'));
  }
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const initdb = join(dir, 'initdb');
    if (existsSync(initdb)) candidates.push(dirname(realpathSync(initdb)));
  }
  const bin = candidates.find((dir) => TOOLS.every((t) => existsSync(join(dir, t))));
  return bin
    ? { ok: true, bin }
    : { ok: false, reason: 'PostgreSQL server binaries (initdb, pg_ctl, postgres) not found' };
}

/** The user to run the server as: ourselves unless root, then `postgres` or `nobody`. */
function serverUser() {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return null;
  for (const name of ['postgres', 'nobody']) {
    try {
      const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
      return { uid, gid };
    } catch {
      // try the next candidate
    }
  }
  throw new Error('running as root and neither a "postgres" nor a "nobody" user exists');
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

function run(cmd, args, user, env) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', (err) => resolve({ code: -1, output: output + String(err) }));
    child.on('close', (code) => resolve({ code: code ?? -1, output }));
  });
}

/** Copies a fresh cluster to `kept` under another name, then renames it there: all or nothing. */
async function keepCluster(data, kept, env) {
  const partial = `${kept}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  const copy = await run('cp', ['-a', data, partial], null, env);
  try {
    if (copy.code === 0) renameSync(partial, kept);
  } catch {
    // Another server kept its cluster first: theirs serves as well.
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
}

/**
 * Starts a server; resolves to `{ url, port, dir, stop }`. `fsync: false` trades crash safety for
 * speed (tests); benchmarks keep the default `true` so durability numbers mean something.
 * `template`: a directory shared by the servers of one test run. The first server to find it empty
 * leaves a copy of its freshly initialised cluster there; later servers start from a copy of that
 * (`cp -a`, owners kept) instead of running initdb again, which costs about 1.5 s of CPU each time
 * on the 2-core machine. Every server still gets a cluster of its own that nothing has used.
 */
export async function startThrowawayPostgres(options = {}) {
  const found = findPostgresBin();
  if (!found.ok) throw new Error(found.reason);
  const user = serverUser();
  const dir = mkdtempSync(join(tmpdir(), 'candor-pg-'));
  const data = join(dir, 'data');
  if (user) chownSync(dir, user.uid, user.gid);
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C', HOME: dir };
  const tool = (name) => join(found.bin, name);
  let stopped = false;
  const stopSync = () => {
    if (stopped) return;
    stopped = true;
    spawnSync(tool('pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], {
      stdio: 'ignore',
      env,
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', stopSync);
  try {
    const kept = options.template ? join(options.template, 'data') : null;
    if (kept && existsSync(join(kept, 'PG_VERSION'))) {
      const copy = await run('cp', ['-a', kept, data], null, env);
      if (copy.code !== 0)
        throw new Error(`copying the initialised cluster failed: ${copy.output}`);
    } else {
      const init = await run(
        tool('initdb'),
        ['-D', data, '-U', 'candor', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
        user,
        env,
      );
      if (init.code !== 0)
        throw new Error(`initdb failed (${init.code}): ${init.output.slice(-2000)}`);
      if (kept) await keepCluster(data, kept, env);
    }
    const settings = [
      `-c listen_addresses=127.0.0.1`,
      `-c unix_socket_directories='${dir}'`,
      `-c max_connections=40`,
      `-c shared_buffers=64MB`,
      ...(options.fsync === false ? ['-c fsync=off', '-c full_page_writes=off'] : []),
    ];
    let lastOutput = '';
    for (let tries = 0; tries < 5; tries++) {
      const port = await freePort();
      const start = await run(
        tool('pg_ctl'),
        [
          '-D',
          data,
          '-l',
          join(dir, 'server.log'),
          '-w',
          '-t',
          '60',
          '-o',
          `-p ${port} ${settings.join(' ')}`,
          'start',
        ],
        user,
        env,
      );
      if (start.code === 0) {
        return {
          url: `postgres://candor@127.0.0.1:${port}/postgres`,
          port,
          dir,
          stop: async () => {
            process.removeListener('exit', stopSync);
            if (stopped) return;
            await run(tool('pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], user, env);
            stopped = true;
            rmSync(dir, { recursive: true, force: true });
          },
        };
      }
      lastOutput = start.output;
    }
    throw new Error(`pg_ctl start failed: ${lastOutput.slice(-2000)}`);
  } catch (err) {
    process.removeListener('exit', stopSync);
    stopSync();
    throw err;
  }
}
