// Types for postgres.js (plain JS so benchmarks run without a build step).
export interface ThrowawayPostgres {
  /** `postgres://candor@127.0.0.1:PORT/postgres` (trust auth, loopback only). */
  url: string;
  port: number;
  /** Temp directory holding the data directory, log and unix socket. */
  dir: string;
  /** Stops the server immediately and removes the temp directory. */
  stop(): Promise<void>;
}

export function findPostgresBin(): { ok: true; bin: string } | { ok: false; reason: string };

export function startThrowawayPostgres(options?: {
  fsync?: boolean;
  /** A folder shared by the servers of one run: the first keeps its fresh cluster there, later ones copy it. */
  template?: string | undefined;
}): Promise<ThrowawayPostgres>;
