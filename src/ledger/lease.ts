// Ownership leases (fleets of gateways on one ledger). Each operation has one owner: the process
// allowed to start its attempts. A gateway proves it is alive by renewing a lease (a heartbeat in
// a small mutable table beside the append-only events); when its lease runs out, another gateway
// may take its operations over with an `owner_changed` event.
//
// The guarantee lives in the store, not in the engine: every store admits an `owner_changed`
// inside its append transaction (under the PostgreSQL operation's row lock, SQLite's write lock,
// or the memory store's single thread) only when its `from` is still the operation's owner and `from`
// holds no live lease at the event's time. Of two gateways racing for one operation, the first
// append wins and the second is refused with OWNER_CONFLICT; a live owner is never displaced.
//
// Fencing: an owner that stalled past its lease (a paused process, a GC pause, a partition) may
// wake up after another gateway took its operation over. The same transaction refuses its next
// `attempt_started` (the one event that licenses a dispatch) with OWNER_CONFLICT when its `worker`
// is a former owner of the operation, so the stalled gateway never sends. Every other write that
// speaks for the operation's outcome — `attempt_finished` and `operation_resolved`, which carry
// their `writer` — is fenced the same way: what a former owner learns late (a late 201, a late 429)
// is recorded as an observation, which can only add knowledge (core/fold.ts), never as a
// resolution. A delegated worker (a name that never owned the operation) is not fenced here: its
// owner's word is all it has.
//
// Lease times come from the gateways' clocks (the event's `at` is compared with the lease's
// `expires_at`): keep the hosts' clocks in sync (NTP) and the lease far longer than their skew.
import type { NewEvent, StoredEvent } from './events.js';
import { LedgerError } from './ledger-error.js';

/** Default lease length; the heartbeat renews it every third of that. */
export const DEFAULT_LEASE_MS = 30_000;

export interface LeaseRow {
  owner: string;
  /** Milliseconds since the epoch; the lease is live while `at < expires_at`. */
  expires_at: number;
  heartbeat_at: number;
}

/** What a store offers for leases (PostgreSQL, SQLite and memory all do). */
export interface OwnerLeases {
  /** Renews (or takes) `owner`'s lease until `expiresAt`; `at` is the heartbeat's own time. */
  heartbeat(owner: string, at: number, expiresAt: number): Promise<void>;
  /**
   * Ends `owner`'s lease at `at` (a clean shutdown: its operations may be taken over at once).
   * Stores with `watchReleases` tell the other gateways when it commits.
   */
  release(owner: string, at: number): Promise<void>;
  /**
   * Calls `onRelease` with the owner soon after any gateway (in any process) ended its lease, so
   * a fleet's sweep takes its operations over at once instead of at its next timer (PostgreSQL
   * LISTEN/NOTIFY). Resolves to a function that stops watching. Stores that cannot tell lack it.
   */
  watchReleases?(onRelease: (owner: string) => void): Promise<() => Promise<void>>;
  /** The owners' leases (missing owners have none). */
  leases(owners: readonly string[]): Promise<LeaseRow[]>;
}

/** Whether `lease` is live at `at`. */
export function leaseLive(lease: { expires_at: number } | undefined, at: number): boolean {
  return lease !== undefined && at < lease.expires_at;
}

/**
 * Owners as a write transaction sees them: the current owner of each operation an `owner_changed`
 * speaks about, and the leases of the owners being displaced. `admit` checks one batch and, when
 * it is admitted, remembers the owners it sets, so later batches of the same transaction see them.
 */
export interface OwnerBook {
  admit(events: readonly NewEvent[]): LedgerError | null;
}

/**
 * What a store must look up (inside its write transaction) before admitting a batch: the owners of
 * operations taken over or attempted (unless the batches open them), and the leases of the owners
 * being displaced. Most first attempts are written with their opening and need no lookup.
 */
export function ownerChangesIn(batches: readonly (readonly NewEvent[])[]): {
  operations: string[];
  owners: string[];
} {
  const operations = new Set<string>();
  const opened = new Set<string>();
  const owners = new Set<string>();
  for (const b of batches)
    for (const e of b) {
      if (e.operation_id === null) continue;
      if (e.kind === 'operation_opened') opened.add(e.operation_id);
      else if (e.kind === 'owner_changed') {
        if (!opened.has(e.operation_id)) operations.add(e.operation_id);
        owners.add(e.data.from);
      } else if (
        (e.kind === 'attempt_started' || writerOf(e) !== null) &&
        !opened.has(e.operation_id)
      )
        operations.add(e.operation_id);
    }
  return { operations: [...operations], owners: [...owners] };
}

/** Who owns an operation, and who owned it before (every `from` of its takeovers). */
export interface Ownership {
  owner: string | null;
  former: readonly string[];
}

/** The ownership recorded by an operation's events (opened, then every takeover). */
export function ownerFrom(events: readonly StoredEvent[]): Ownership {
  let owner: string | null = null;
  const former: string[] = [];
  for (const e of events) {
    if (e.kind === 'operation_opened') owner = e.data.owner;
    else if (e.kind === 'owner_changed') {
      former.push(e.data.from);
      owner = e.data.to;
    }
  }
  return { owner, former };
}

export function createOwnerBook(
  ownerOf: (operationId: string) => Ownership,
  leaseOf: (owner: string) => LeaseRow | undefined,
): OwnerBook {
  const owners = new Map<string, Ownership>();
  const current = (id: string): Ownership => {
    let o = owners.get(id);
    if (!o) owners.set(id, (o = ownerOf(id)));
    return o;
  };
  return {
    admit(events) {
      const changes = new Map<string, Ownership>();
      for (const e of events) {
        if (e.operation_id === null) continue;
        if (e.kind === 'operation_opened') {
          changes.set(e.operation_id, { owner: e.data.owner, former: [] });
        } else if (e.kind === 'owner_changed') {
          const now = changes.get(e.operation_id) ?? current(e.operation_id);
          if (now.owner !== e.data.from) {
            return new LedgerError(
              'OWNER_CONFLICT',
              `operation ${e.operation_id} is owned by ${now.owner ?? 'nobody'}, not ${e.data.from}: another gateway took it over first`,
            );
          }
          const lease = leaseOf(e.data.from);
          if (leaseLive(lease, e.at)) {
            return new LedgerError(
              'OWNER_CONFLICT',
              `operation ${e.operation_id} is owned by ${e.data.from}, whose lease is live until ${new Date(lease!.expires_at).toISOString()}`,
            );
          }
          changes.set(e.operation_id, { owner: e.data.to, former: [...now.former, e.data.from] });
        } else if (writerOf(e) !== null) {
          const now = changes.get(e.operation_id) ?? current(e.operation_id);
          const writer = writerOf(e)!;
          if (writer !== now.owner && now.former.includes(writer)) {
            return new LedgerError(
              'OWNER_CONFLICT',
              `operation ${e.operation_id} was taken over by ${now.owner ?? 'nobody'}; ${writer} no longer owns it and may not write its ${e.kind}`,
            );
          }
        } else if (e.kind === 'attempt_started') {
          // Fencing: a former owner may no longer start attempts (see the top of this file).
          const now = changes.get(e.operation_id) ?? current(e.operation_id);
          const worker = e.data.worker;
          if (worker !== now.owner && now.former.includes(worker)) {
            return new LedgerError(
              'OWNER_CONFLICT',
              `operation ${e.operation_id} was taken over by ${now.owner ?? 'nobody'}; ${worker} no longer owns it and may not start an attempt`,
            );
          }
        }
      }
      for (const [id, o] of changes) owners.set(id, o);
      return null;
    },
  };
}

/** The gateway that wrote an outcome event (`attempt_finished`, `operation_resolved`), if recorded. */
export function writerOf(e: NewEvent): string | null {
  if (e.kind !== 'attempt_finished' && e.kind !== 'operation_resolved') return null;
  return typeof e.data.writer === 'string' ? e.data.writer : null;
}
