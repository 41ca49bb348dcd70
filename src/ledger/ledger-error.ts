// Environment and misuse failures of ledger stores, with stable codes (never match on messages).

export const LedgerErrorCode = {
  /** The ledger URL is not one of `sqlite:PATH`, `memory:`, `postgres://…`. */
  BAD_URL: 'BAD_URL',
  /** Opening with `mustExist` and there is no ledger there. */
  NOT_FOUND: 'NOT_FOUND',
  /** The database or its driver could not be opened or migrated. */
  OPEN_FAILED: 'OPEN_FAILED',
  /** The database was written by a newer Candor (schema version above the known migrations). */
  SCHEMA_TOO_NEW: 'SCHEMA_TOO_NEW',
  /** The store was used after close(). */
  CLOSED: 'CLOSED',
  /**
   * An `owner_changed` was refused: its `from` is no longer the owner (another gateway took the
   * operation over first) or still holds a live lease; or an `attempt_started` was refused because
   * its worker is a former owner of the operation (fencing, lease.ts). Not a fault of the ledger.
   */
  OWNER_CONFLICT: 'OWNER_CONFLICT',
} as const;
export type LedgerErrorCode = (typeof LedgerErrorCode)[keyof typeof LedgerErrorCode];

export class LedgerError extends Error {
  override readonly name = 'LedgerError';
  constructor(
    readonly code: LedgerErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Runs synchronous store work as a promise: a throw becomes a rejection with an Error. */
export function settle<T>(work: () => T): Promise<T> {
  try {
    return Promise.resolve(work());
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

/**
 * What went wrong, for one line of output: the message without the error's class name
 * (`SqliteError: …`, `TypeError: …` mean nothing to a user), and a code where the driver gives one.
 */
export function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const message = err.message.trim() === '' ? 'unknown error' : err.message;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]+$/.test(code) && !message.includes(code)
    ? `${message} (${code})`
    : message;
}

/**
 * Whether a failure came from the ledger's storage rather than from the caller or the engine: a
 * `LedgerError`, a SQLite driver error (`SQLITE_*` codes) or a PostgreSQL server error (a SQLSTATE
 * code with a severity). The gateway then says the ledger is broken instead of claiming that what
 * was dispatched is recorded.
 */
export function isLedgerFault(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; depth++) {
    if (e instanceof LedgerError) return e.code !== 'OWNER_CONFLICT';
    const { code, severity } = e as { code?: unknown; severity?: unknown };
    if (typeof code === 'string' && code.startsWith('SQLITE_')) return true;
    if (typeof severity === 'string' && typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
      return true;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
