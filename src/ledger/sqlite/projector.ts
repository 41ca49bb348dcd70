// The listing projector (schema 7): listing rows, counts, sessions and tags are derived from the
// events past `ledger_projection.seq`, a batch per IMMEDIATE transaction that also advances that
// cursor. A crash at any point leaves the listing at a batch boundary with the cursor naming it;
// the next projection resumes there. The projector never runs inside an append: the store runs it
// after its commits (coalesced) and before a reader that must see every event (`fresh`).
import type BetterSqlite3 from 'better-sqlite3';
import type { OperationRow } from '../listing.js';
import { operationTags } from '../projection.js';
import { decodeSealed } from '../record.js';
import { sqliteListingWriter } from './listing.js';

/** A stored record and the hash its writer computed when it sealed it. */
interface Stored {
  hash: string;
  bytes: Buffer;
}

/** One batch: at most this many events, and no more events once this much time has passed. */
export const PROJECT_BATCH_EVENTS = 1000;
export const PROJECT_BATCH_MS = 20;

export interface ProjectorPosition {
  /** The last projected seq. */
  cursor: number;
  /** The last stored seq. */
  head: number;
}

export interface SqliteProjector {
  position(): ProjectorPosition;
  /** `at` of the first event not yet projected (null when the listing is up to date). */
  oldestPendingAt(): number | null;
  /**
   * Projects one batch (up to `until` when given) in its own transaction. Returns the seq the
   * cursor now names and the number of events projected (0: nothing was pending).
   */
  batch(until?: number): { cursor: number; projected: number };
}

export function sqliteProjector(
  db: BetterSqlite3.Database,
  now: () => number = () => performance.now(),
): SqliteProjector {
  const listing = sqliteListingWriter(db);
  const st = {
    cursor: db.prepare('SELECT seq FROM ledger_projection WHERE id = 1').pluck(),
    head: db.prepare('SELECT coalesce(max(seq), 0) FROM ledger_events').pluck(),
    // With the hash the writer computed when it sealed each record: not computed again here.
    pending: db.prepare(
      'SELECT hash, bytes FROM ledger_events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?',
    ),
    firstPending: db.prepare(
      'SELECT hash, bytes FROM ledger_events WHERE seq > ? ORDER BY seq LIMIT 1',
    ),
    advance: db.prepare('UPDATE ledger_projection SET seq = ? WHERE id = 1'),
    tag: db.prepare('INSERT OR IGNORE INTO ledger_tags (tag, operation_id) VALUES (?, ?)'),
  };
  const cursorNow = (): number => (st.cursor.get() as number | undefined) ?? 0;

  const run = db.transaction((until: number | undefined) => {
    const cursor = cursorNow();
    const limit = until === undefined ? Number.MAX_SAFE_INTEGER : until;
    const rows = st.pending.all(cursor, limit, PROJECT_BATCH_EVENTS) as Stored[];
    if (rows.length === 0) return { cursor, projected: 0 };
    const started = now();
    const records = [];
    for (const r of rows) {
      records.push(decodeSealed(r.bytes, r.hash));
      if (now() - started > PROJECT_BATCH_MS) break;
    }
    // The same tagging rules as schema 5's append: an operation's own first session and its
    // first correlation id are answered by its listing row, not by a tag.
    const before = new Map<string, OperationRow | undefined>();
    const lookup = (id: string): OperationRow | undefined => {
      if (before.has(id)) return before.get(id);
      const row = listing.get(id);
      before.set(id, row);
      return row;
    };
    const firstSession = new Map<string, string | null>();
    for (const record of records) {
      const id = record.operation_id;
      if (id === null) continue;
      const stored = lookup(id);
      if (!stored && !firstSession.has(id)) firstSession.set(id, record.session_id);
      const session = stored ? stored.session_id : firstSession.get(id);
      for (const tag of operationTags(record)) {
        if (tag === `s:${session}`) continue;
        if (stored && tag === `c:${stored.correlation_id}`) continue;
        st.tag.run(tag, id);
      }
    }
    listing.apply(records, lookup);
    const last = records.at(-1)!.seq;
    st.advance.run(last);
    return { cursor: last, projected: records.length };
  });

  return {
    position: () => {
      // One read transaction, so that the cursor is never past the head it is compared with.
      return db.transaction(() => ({
        cursor: cursorNow(),
        head: st.head.get() as number,
      }))();
    },
    oldestPendingAt() {
      const row = st.firstPending.get(cursorNow()) as Stored | undefined;
      return row ? decodeSealed(row.bytes, row.hash).at : null;
    },
    batch: (until) => run.immediate(until),
  };
}
