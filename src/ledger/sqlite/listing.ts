// The operations listing's tables in SQLite, written in the append transaction (and by the v2
// migration's backfill). An update rewrites only the indexes whose columns move; from schema 5 a
// state change rewrites entries in place (the same page), and an ordinary operation enters the
// `attention` partial index when opened and leaves it when it succeeds.
import type BetterSqlite3 from 'better-sqlite3';
import type { StoredEvent } from '../events.js';
import { foldListing, type OperationRow } from '../listing.js';
import { ROW_COLUMNS, rowFromSql, rowValues, type SqlRow } from '../listing-sql.js';
import { parseRecord } from '../record.js';
import { encodeFold, foldAll } from '../../core/fold.js';

/** The listing as schema 2 created it (schema 5 replaced its indexes). */
export const SQLITE_LISTING_SCHEMA = `
  CREATE TABLE ledger_operations (
    first_seq INTEGER PRIMARY KEY,
    operation_id TEXT NOT NULL UNIQUE,
    last_seq INTEGER NOT NULL,
    opened_at INTEGER NOT NULL,
    last_at INTEGER NOT NULL,
    state TEXT,
    priority INTEGER NOT NULL,
    action TEXT,
    action_class TEXT,
    session_id TEXT,
    correlation_id TEXT,
    attempts INTEGER NOT NULL,
    delivered INTEGER NOT NULL,
    remote_refs TEXT NOT NULL,
    duplicate INTEGER NOT NULL,
    fold TEXT
  );
  CREATE INDEX ledger_operations_triage ON ledger_operations (priority, opened_at);
  CREATE INDEX ledger_operations_state ON ledger_operations (state, priority, opened_at);
  CREATE INDEX ledger_operations_action ON ledger_operations (action, priority, opened_at);
  CREATE INDEX ledger_operations_class ON ledger_operations (action_class, priority, opened_at);
  CREATE INDEX ledger_operations_session ON ledger_operations (session_id, priority, opened_at);
  CREATE TABLE ledger_op_counts (
    action TEXT NOT NULL,
    action_class TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (action, action_class, session_id, state)
  ) WITHOUT ROWID;
  CREATE INDEX ledger_op_counts_class ON ledger_op_counts (action_class);
  CREATE INDEX ledger_op_counts_session ON ledger_op_counts (session_id);
  CREATE TABLE ledger_sessions (
    session_id TEXT PRIMARY KEY,
    first_seq INTEGER NOT NULL,
    first_at INTEGER NOT NULL,
    agent TEXT,
    operations INTEGER NOT NULL
  );
  CREATE INDEX ledger_sessions_recent ON ledger_sessions (first_seq);
`;

/** The listing's indexes from schema 5 on (see the migration in schema.ts). */
export const SQLITE_LISTING_INDEXES_5 = `
  CREATE INDEX ledger_operations_opened ON ledger_operations (opened_at, first_seq, state);
  CREATE INDEX ledger_operations_action ON ledger_operations (action, opened_at);
  CREATE INDEX ledger_operations_class ON ledger_operations (action_class, opened_at);
  CREATE INDEX ledger_operations_session ON ledger_operations (session_id, opened_at);
  CREATE INDEX ledger_operations_attention ON ledger_operations
    (priority, opened_at, first_seq, state, operation_id, action, action_class, session_id)
    WHERE priority < 2;
  CREATE INDEX ledger_operations_rare ON ledger_operations (state, opened_at)
    WHERE priority = 2 AND state <> 'succeeded';
`;

export interface SqliteListingWriter {
  /** The stored row (before the current batch). */
  get(operationId: string): OperationRow | undefined;
  /**
   * Writes the listing changes of `records`; `lookup` defaults to `get`. Returns the rows as
   * written (fresh objects, one per operation the records touch).
   */
  apply(
    records: readonly StoredEvent[],
    lookup?: (id: string) => OperationRow | undefined,
  ): readonly OperationRow[];
}

export function sqliteListingWriter(db: BetterSqlite3.Database): SqliteListingWriter {
  const st = {
    get: db.prepare(`SELECT ${ROW_COLUMNS} FROM ledger_operations WHERE operation_id = ?`),
    insert: db.prepare(
      `INSERT INTO ledger_operations (${ROW_COLUMNS}) VALUES (${ROW_COLUMNS.split(',')
        .map(() => '?')
        .join(', ')})`,
    ),
    // Four shapes, by which indexed columns move (schema 5): `state` is in the opened index
    // (rewritten in place) and, with `priority`, in the two partial indexes, which an ordinary
    // operation leaves when it succeeds; `opened_at`, `action` and `action_class` change only
    // when an operation's first event was not its `operation_opened`.
    full: db.prepare(
      `UPDATE ledger_operations SET last_seq = ?, last_at = ?, attempts = ?, delivered = ?,
         remote_refs = ?, duplicate = ?, fold = ?, state = ?, priority = ?, opened_at = ?, action = ?,
         action_class = ? WHERE operation_id = ?`,
    ),
    state: db.prepare(
      `UPDATE ledger_operations SET last_seq = ?, last_at = ?, attempts = ?, delivered = ?,
         remote_refs = ?, duplicate = ?, fold = ?, state = ?, priority = ? WHERE operation_id = ?`,
    ),
    stateOnly: db.prepare(
      `UPDATE ledger_operations SET last_seq = ?, last_at = ?, attempts = ?, delivered = ?,
         remote_refs = ?, duplicate = ?, fold = ?, state = ? WHERE operation_id = ?`,
    ),
    cold: db.prepare(
      `UPDATE ledger_operations SET last_seq = ?, last_at = ?, attempts = ?, delivered = ?,
         remote_refs = ?, duplicate = ?, fold = ? WHERE operation_id = ?`,
    ),
    count: db.prepare(
      `INSERT INTO ledger_op_counts (action, action_class, session_id, state, n) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (action, action_class, session_id, state) DO UPDATE SET n = n + excluded.n`,
    ),
    // A state change is two deltas (old state -1, new state +1): one statement.
    count2: db.prepare(
      `INSERT INTO ledger_op_counts (action, action_class, session_id, state, n)
       VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)
       ON CONFLICT (action, action_class, session_id, state) DO UPDATE SET n = n + excluded.n`,
    ),
    session: db.prepare(
      `INSERT INTO ledger_sessions (session_id, first_seq, first_at, agent, operations)
       VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET operations = operations + excluded.operations,
         agent = coalesce(excluded.agent, agent)`,
    ),
    tag: db.prepare('INSERT OR IGNORE INTO ledger_tags (tag, operation_id) VALUES (?, ?)'),
  };
  const get = (id: string): OperationRow | undefined => {
    const r = st.get.get(id) as SqlRow | undefined;
    return r ? rowFromSql(r) : undefined;
  };
  return {
    get,
    apply(records, lookup = get) {
      const before = new Map<string, OperationRow | undefined>();
      const c = foldListing(records, (id) => {
        const r = lookup(id);
        before.set(id, r);
        return r;
      });
      for (const r of c.rows) {
        const old = before.get(r.operation_id);
        if (!old) {
          st.insert.run(...rowValues(r));
          continue;
        }
        const cold = [r.last_seq, r.last_at, r.attempts, r.delivered];
        const refs = [JSON.stringify(r.remote_refs), r.duplicate ? 1 : 0, encodeFold(r.fold)];
        if (
          old.opened_at !== r.opened_at ||
          old.action !== r.action ||
          old.action_class !== r.action_class
        ) {
          st.full.run(
            ...cold,
            ...refs,
            r.state,
            r.priority,
            r.opened_at,
            r.action,
            r.action_class,
            r.operation_id,
          );
        } else if (old.priority !== r.priority) {
          st.state.run(...cold, ...refs, r.state, r.priority, r.operation_id);
        } else if (old.state !== r.state) {
          st.stateOnly.run(...cold, ...refs, r.state, r.operation_id);
        } else st.cold.run(...cold, ...refs, r.operation_id);
      }
      const values = c.counts.map(({ key: k, delta }) => [
        k.action,
        k.action_class,
        k.session_id,
        k.state,
        delta,
      ]);
      for (let i = 0; i < values.length; i += 2) {
        const [a, b] = [values[i]!, values[i + 1]];
        if (b) st.count2.run(...a, ...b);
        else st.count.run(...a);
      }
      for (const s of c.sessions)
        st.session.run(s.session_id, s.first_seq, s.first_at, s.agent, s.operations);
      for (const { ref, operation_id } of c.refs) st.tag.run(`r:${ref}`, operation_id);
      return c.rows;
    },
  };
}

/** Folds every event already in the ledger into the listing (the v2 migration), in chunks. */
export function backfillSqliteListing(db: BetterSqlite3.Database): void {
  const writer = sqliteListingWriter(db);
  const read = db.prepare('SELECT bytes FROM ledger_events WHERE seq > ? ORDER BY seq LIMIT 5000');
  let from = 0;
  for (;;) {
    const chunk = (read.all(from) as { bytes: Buffer }[]).map((r) => parseRecord(r.bytes));
    if (chunk.length === 0) return;
    writer.apply(chunk);
    from = chunk.at(-1)!.seq;
  }
}

/**
 * Schema 6: the listing keeps each operation's fold (core/fold.ts). A ledger created before has
 * the column added, and its unresolved operations get their fold from their events (settled rows
 * keep a null fold, read back as the cautious fold of their state).
 */
export function addSqliteFoldColumn(db: BetterSqlite3.Database): void {
  const columns = db.prepare('PRAGMA table_info(ledger_operations)').all() as { name: string }[];
  if (!columns.some((c) => c.name === 'fold'))
    db.exec('ALTER TABLE ledger_operations ADD COLUMN fold TEXT');
  const open = db
    .prepare(
      "SELECT operation_id FROM ledger_operations WHERE state IN ('open', 'unknown') AND fold IS NULL",
    )
    .all() as { operation_id: string }[];
  const events = db.prepare('SELECT bytes FROM ledger_events WHERE operation_id = ? ORDER BY seq');
  const update = db.prepare('UPDATE ledger_operations SET fold = ? WHERE operation_id = ?');
  for (const { operation_id } of open) {
    const fold = foldAll(
      (events.all(operation_id) as { bytes: Buffer }[]).map((r) => parseRecord(r.bytes)),
    );
    update.run(encodeFold(fold), operation_id);
  }
}
