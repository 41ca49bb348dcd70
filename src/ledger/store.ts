// The LedgerStore port: append, read, query, close. No update, no delete.
import type { NewEvent, StoredEvent } from './events.js';
import type { OwnerLeases } from './lease.js';
import type { OperationListing } from './listing.js';

/**
 * `process`: an acknowledged append survives `kill -9` of the writer (SQLite WAL, synchronous=NORMAL;
 * PostgreSQL synchronous_commit=off is NOT used). `power`: each commit reaches the disk (fsync);
 * concurrent appends share an fsync (group commit).
 */
export type Durability = 'process' | 'power';

export type LedgerQuery =
  | { operation_id: string }
  | { session_id: string }
  | { correlation_id: string }
  | { idempotency_key: string };

/**
 * The listing (`operations`, `facets`: see listing.ts) is kept in the append (memory) or projected
 * just after it (SQLite schema 7, PostgreSQL schema 6; fresh reads wait for it).
 */
export interface LedgerStore extends OperationListing {
  /**
   * Appends events atomically and in order; returns them as stored. When the promise resolves the
   * events are durable per the store's durability mode — the engine relies on this to write
   * `attempt_started` before any request byte is dispatched.
   */
  append(events: readonly NewEvent[]): Promise<StoredEvent[]>;
  /** Stored events with `seq >= from` (1-based), in order, at most `limit`. */
  read(from?: number, limit?: number): Promise<StoredEvent[]>;
  /** Every event of the matching operations/sessions, in order. */
  query(q: LedgerQuery): Promise<StoredEvent[]>;
  /** Ids of operations whose projected state is `open` or `unknown` (indexed). */
  unresolved(): Promise<string[]>;
  /**
   * Ownership leases (src/ledger/lease.ts). A store that has them admits an `owner_changed` only
   * while its `from` is the owner and holds no live lease, and refuses an `attempt_started` by a
   * former owner (fencing); one without them refuses none.
   */
  readonly leases?: OwnerLeases;
  /**
   * Calls `onAppend` soon after any writer (in any process) committed new events, without polling
   * (PostgreSQL LISTEN/NOTIFY). Resolves to a function that stops watching. Stores that cannot
   * tell do not offer it; readers then poll `read(from)`.
   */
  watch?(onAppend: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}
