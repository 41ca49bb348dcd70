// In-memory LedgerStore: same contract as the SQL adapters (records sealed to the same bytes, the
// same tag and unresolved indexes), for tests and short-lived tools. Nothing survives the process.
import type { OperationState } from '../../core/vocabulary.js';
import { GENESIS_HASH, type NewEvent, type StoredEvent } from '../events.js';
import { createOwnerBook, type LeaseRow, type Ownership } from '../lease.js';
import { LedgerError, settle } from '../ledger-error.js';
import { memoryListing } from '../listing.js';
import { foldStates, operationTags, UNRESOLVED_STATES } from '../projection.js';
import { decodeSealed, parseRecord, sealRecord } from '../record.js';
import type { LedgerQuery, LedgerStore } from '../store.js';

interface Row {
  seq: number;
  hash: string;
  bytes: Buffer;
  operation_id: string | null;
  session_id: string | null;
  correlation_id: string | null;
}

export function openMemoryLedger(): LedgerStore {
  const rows: Row[] = [];
  /** tag -> operation ids (see operationTags). */
  const tags = new Map<string, Set<string>>();
  /** Only operations whose state is open or unknown. */
  const unresolved = new Map<string, OperationState>();
  const listing = memoryListing();
  const leases = new Map<string, LeaseRow>();
  /** Who owns each operation and who owned it before (what ownerFrom would read from its events). */
  const ownership = new Map<string, Ownership>();
  const NOBODY: Ownership = { owner: null, former: [] };
  let closed = false;

  const live = (): void => {
    if (closed) throw new LedgerError('CLOSED', 'ledger: store is closed');
  };
  const decode = (list: readonly Row[]): StoredEvent[] => list.map((r) => parseRecord(r.bytes));
  /** Every event of the tagged operations, plus non-operation events matching `extra`. */
  const byTag = (tag: string, extra: (r: Row) => boolean): StoredEvent[] => {
    const ops = tags.get(tag) ?? new Set<string>();
    return decode(
      rows.filter((r) => (r.operation_id !== null ? ops.has(r.operation_id) : extra(r))),
    );
  };

  return {
    append: (events: readonly NewEvent[]) =>
      settle(() => {
        live();
        // Takeovers are admitted against the owners as stored (src/ledger/lease.ts).
        const refused = createOwnerBook(
          (id) => ownership.get(id) ?? NOBODY,
          (owner) => leases.get(owner),
        ).admit(events);
        if (refused) throw refused;
        const head = rows.at(-1);
        let seq = head?.seq ?? 0;
        let prev = head?.hash ?? GENESIS_HASH;
        // Seal everything first so that a bad event leaves the store untouched (atomic batch).
        const sealed = events.map((e) => {
          const s = sealRecord(e, ++seq, prev);
          prev = s.record.hash;
          return s;
        });
        for (const { record, bytes } of sealed) {
          const { operation_id, session_id, correlation_id } = record;
          rows.push({
            seq: record.seq,
            hash: record.hash,
            bytes,
            operation_id,
            session_id,
            correlation_id,
          });
          if (record.kind === 'operation_opened')
            ownership.set(operation_id!, { owner: record.data.owner, former: [] });
          else if (record.kind === 'owner_changed') {
            const was = ownership.get(operation_id!) ?? NOBODY;
            ownership.set(operation_id!, {
              owner: record.data.to,
              former: [...was.former, record.data.from],
            });
          }
          for (const tag of operationTags(record)) {
            const set = tags.get(tag) ?? new Set<string>();
            set.add(operation_id!);
            tags.set(tag, set);
          }
        }
        for (const c of foldStates(events, (id) => listing.fold(id))) {
          if (UNRESOLVED_STATES.has(c.state)) unresolved.set(c.operation_id, c.state);
          else unresolved.delete(c.operation_id);
        }
        listing.apply(sealed.map((s) => s.record));
        // Returned records are parsed from the stored bytes: no aliasing of the caller's objects.
        return sealed.map((s) => decodeSealed(s.text, s.record.hash));
      }),
    read: (from = 1, limit = Number.MAX_SAFE_INTEGER) =>
      settle(() => {
        live();
        const start = Math.max(0, from - 1);
        return decode(rows.slice(start, start + Math.max(0, limit)));
      }),
    query: (q: LedgerQuery) =>
      settle(() => {
        live();
        if ('operation_id' in q)
          return decode(rows.filter((r) => r.operation_id === q.operation_id));
        if ('session_id' in q)
          return byTag(`s:${q.session_id}`, (r) => r.session_id === q.session_id);
        if ('correlation_id' in q) {
          return byTag(`c:${q.correlation_id}`, (r) => r.correlation_id === q.correlation_id);
        }
        return byTag(`k:${q.idempotency_key}`, () => false);
      }),
    unresolved: () =>
      settle(() => {
        live();
        return [...unresolved.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      }),
    leases: {
      heartbeat: (owner, at, expiresAt) =>
        settle(() => {
          live();
          leases.set(owner, { owner, heartbeat_at: at, expires_at: expiresAt });
        }),
      release: (owner, at) =>
        settle(() => {
          live();
          const l = leases.get(owner);
          if (l) leases.set(owner, { ...l, expires_at: Math.min(l.expires_at, at) });
        }),
      leases: (owners) =>
        settle(() => {
          live();
          return owners.flatMap((o) => {
            const l = leases.get(o);
            return l ? [{ ...l }] : [];
          });
        }),
    },
    operations: (q) => settle(live).then(() => listing.operations(q)),
    facets: (sessions) => settle(live).then(() => listing.facets(sessions)),
    close() {
      closed = true;
      return Promise.resolve();
    },
  };
}
