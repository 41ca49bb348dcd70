// Schema 7: the small commit. An append writes only what the write-ahead rule and admission need:
// the events and one `ledger_heads` row per touched operation (its state and fold, the seq of its
// last event). `unresolved()` answers from the heads, so recovery never depends on the listing.
// Everything else (listing rows, counts, sessions, tags) is projected after the commit from the
// events past `ledger_projection.seq` (projector.ts), a batch at a time.
import type BetterSqlite3 from 'better-sqlite3';
import type { StoredEvent } from '../events.js';
import { decodeFold, encodeFold } from '../../core/fold.js';
import { foldHeads, type HeadRow } from '../heads.js';
import type { OperationState } from '../../core/vocabulary.js';

/**
 * The heads are keyed by operation id (time-ordered, so new rows land on the table's last page);
 * the partial index holds exactly the unresolved operations, which are few and also recent.
 * The projection's cursor starts at the head: the migration's listing is already exact. Both are
 * derived, so tables left by a file whose version rows were cut back are rebuilt, not trusted.
 */
export const SQLITE_HEADS_SCHEMA = `
  DROP TABLE IF EXISTS ledger_heads;
  DROP TABLE IF EXISTS ledger_projection;
  CREATE TABLE ledger_heads (
    operation_id TEXT PRIMARY KEY,
    state TEXT,
    last_seq INTEGER NOT NULL,
    fold TEXT
  ) WITHOUT ROWID;
  CREATE INDEX ledger_heads_unresolved ON ledger_heads (operation_id)
    WHERE state IN ('open', 'unknown');
  CREATE TABLE ledger_projection (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
  );
`;

export type { HeadRow } from '../heads.js';

/** The migration's backfill: heads from the listing rows, cursor at the last event. */
export function backfillSqliteHeads(db: BetterSqlite3.Database): void {
  db.exec(`INSERT INTO ledger_heads (operation_id, state, last_seq, fold)
    SELECT operation_id, state, last_seq, fold FROM ledger_operations`);
  db.exec(`INSERT INTO ledger_projection (id, seq)
    SELECT 1, coalesce(max(seq), 0) FROM ledger_events`);
}

export interface SqliteHeadsWriter {
  get(operationId: string): HeadRow | undefined;
  /**
   * Folds `records` into the heads of their operations and writes them; `lookup` gives a head as
   * stored before the records. Returns the heads as written.
   */
  apply(
    records: readonly StoredEvent[],
    lookup: (id: string) => HeadRow | undefined,
  ): Map<string, HeadRow>;
}

export function sqliteHeadsWriter(db: BetterSqlite3.Database): SqliteHeadsWriter {
  const st = {
    get: db.prepare('SELECT state, last_seq, fold FROM ledger_heads WHERE operation_id = ?'),
    insert: db.prepare(
      'INSERT INTO ledger_heads (operation_id, state, last_seq, fold) VALUES (?, ?, ?, ?)',
    ),
    update: db.prepare(
      'UPDATE ledger_heads SET state = ?, last_seq = ?, fold = ? WHERE operation_id = ?',
    ),
  };
  return {
    get(id) {
      const r = st.get.get(id) as
        { state: OperationState | null; last_seq: number; fold: string | null } | undefined;
      return r
        ? { state: r.state, last_seq: r.last_seq, fold: decodeFold(r.fold, r.state) }
        : undefined;
    },
    apply(records, lookup) {
      const { heads, existed } = foldHeads(records, lookup);
      for (const [id, h] of heads) {
        if (existed.has(id)) st.update.run(h.state, h.last_seq, encodeFold(h.fold), id);
        else st.insert.run(id, h.state, h.last_seq, encodeFold(h.fold));
      }
      return heads;
    },
  };
}
