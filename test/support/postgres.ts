// Throwaway PostgreSQL for tests: the server logic lives in bench/support/postgres.js (shared with
// the benchmarks); this adds the test policy — outside CI a missing server skips with a printed
// reason, under CI=true it is a failure.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  findPostgresBin,
  startThrowawayPostgres,
  type ThrowawayPostgres,
} from '../../bench/support/postgres.js';

export type { ThrowawayPostgres };

/** The reason PostgreSQL tests must skip, or `undefined` when they can run. Throws under CI. */
export function postgresSkipReason(): string | undefined {
  const found = findPostgresBin();
  if (found.ok) return undefined;
  if (process.env.CI === 'true') {
    throw new Error(`CI=true but PostgreSQL cannot run here: ${found.reason}`);
  }
  const reason = `skipping PostgreSQL tests: ${found.reason} (apt-get install postgresql)`;
  console.warn(reason);
  return reason;
}

/**
 * Starts a fresh server (fsync off: these tests check ordering, not power loss). Its cluster is a
 * copy of one initialised earlier in the same run when there is one (test/global-setup.ts names
 * the folder): a cluster nothing has used, without paying initdb once per file.
 */
export function startPostgres(): Promise<ThrowawayPostgres> {
  return startThrowawayPostgres({ fsync: false, template: process.env.CANDOR_TEST_PG_TEMPLATE });
}

/**
 * The server's URL over its unix socket when it has one (Linux, macOS), else over TCP. A local
 * socket spares both sides the loopback TCP stack on every query: for query-heavy campaigns that
 * is CPU the tests themselves can use. What the server does is the same either way.
 */
export function socketUrl(server: ThrowawayPostgres): string {
  const socket = join(server.dir, `.s.PGSQL.${server.port}`);
  if (!existsSync(socket)) return server.url;
  return `postgres://candor@localhost:${server.port}/postgres?host=${encodeURIComponent(server.dir)}`;
}

/**
 * CPU time the server's processes have used so far (ms): the postmaster, its children that
 * exited and those still running. Linux only (read from /proc); null elsewhere or when unreadable.
 */
export function postgresCpuMs(server: ThrowawayPostgres): number | null {
  try {
    const pid = Number(
      readFileSync(join(server.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0],
    );
    // utime, stime, cutime, cstime (fields 14–17 of /proc/PID/stat), after the parenthesised name.
    const times = (stat: string): { ppid: number; own: number; children: number } => {
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return {
        ppid: Number(f[1]),
        own: Number(f[11]) + Number(f[12]),
        children: Number(f[13]) + Number(f[14]),
      };
    };
    const postmaster = times(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    let ticks = postmaster.own + postmaster.children;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue; // exited meanwhile (its time is in the postmaster's children now)
      }
      const t = times(stat);
      if (t.ppid === pid) ticks += t.own;
    }
    return ticks * (1000 / CLOCK_TICKS_PER_SECOND);
  } catch {
    return null;
  }
}

/** USER_HZ: 100 on every Linux that Node supports. */
const CLOCK_TICKS_PER_SECOND = 100;
