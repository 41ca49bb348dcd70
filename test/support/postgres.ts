// Throwaway PostgreSQL for tests: the server logic lives in bench/support/postgres.js (shared with
// the benchmarks); this adds the test policy — outside CI a missing server skips with a printed
// reason, under CI=true it is a failure.
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

/** Starts a fresh server (fsync off: these tests check ordering, not power loss). */
export function startPostgres(): Promise<ThrowawayPostgres> {
  return startThrowawayPostgres({ fsync: false });
}
