// SQLite schema and forward migrations. `ledger_events.bytes` holds the canonical record bytes;
// every other column and table is derived from them and can be rebuilt. Versions only move forward.
// Indexes are chosen for append cost (every index and table a commit touches is at least one more
// page in the WAL): an operation event touches the events table, its operation index and the
// listing; tags are written once per new (tag, operation) pair, and an operation's first session
// is not a tag but its listing row's `session_id` (schema 4); session/correlation indexes on
// events cover non-operation events only. unresolved() reads the listing's state (schema 4), and
// from schema 7 the heads, written in the commit while the listing is projected after it.
import type BetterSqlite3 from 'better-sqlite3';
import { LedgerError } from '../ledger-error.js';
import { backfillSqliteHeads, SQLITE_HEADS_SCHEMA } from './heads.js';
import {
  addSqliteFoldColumn,
  backfillSqliteListing,
  SQLITE_LISTING_INDEXES_5,
  SQLITE_LISTING_SCHEMA,
} from './listing.js';

export interface Migration {
  version: number;
  sql: string;
  /** Derives the new tables from the events already stored (same transaction). */
  backfill?: (db: BetterSqlite3.Database) => void;
}

export const SQLITE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE ledger_events (
        seq INTEGER PRIMARY KEY,
        hash TEXT NOT NULL,
        bytes BLOB NOT NULL,
        kind TEXT NOT NULL,
        operation_id TEXT,
        session_id TEXT,
        correlation_id TEXT
      );
      CREATE INDEX ledger_events_operation ON ledger_events (operation_id)
        WHERE operation_id IS NOT NULL;
      CREATE INDEX ledger_events_session ON ledger_events (session_id)
        WHERE operation_id IS NULL AND session_id IS NOT NULL;
      CREATE INDEX ledger_events_correlation ON ledger_events (correlation_id)
        WHERE operation_id IS NULL AND correlation_id IS NOT NULL;
      CREATE TABLE ledger_tags (
        tag TEXT NOT NULL,
        operation_id TEXT NOT NULL,
        PRIMARY KEY (tag, operation_id)
      ) WITHOUT ROWID;
      CREATE TABLE unresolved_operations (
        operation_id TEXT PRIMARY KEY,
        state TEXT NOT NULL
      ) WITHOUT ROWID;
    `,
  },
  {
    // The operations listing of `candor ui` (src/ledger/listing.ts), derived from the events.
    version: 2,
    sql: SQLITE_LISTING_SCHEMA,
    backfill: backfillSqliteListing,
  },
  {
    // Ownership leases (src/ledger/lease.ts): mutable heartbeats, never part of the chain.
    version: 3,
    sql: `
      CREATE TABLE ledger_leases (
        owner TEXT PRIMARY KEY,
        expires_at INTEGER NOT NULL,
        heartbeat_at INTEGER NOT NULL
      ) WITHOUT ROWID;
    `,
  },
  {
    // Fewer pages and statements per commit: unresolved() reads a partial index of the listing's
    // `state` (the same projection, kept in the same transaction, ordered by operation id), and a
    // session that is its operation's listing `session_id` is found through the listing. `s:`
    // tags already written stay (queries take both).
    version: 4,
    sql: `
      DROP TABLE IF EXISTS unresolved_operations;
      CREATE INDEX ledger_operations_unresolved ON ledger_operations (operation_id, state)
        WHERE state IN ('open', 'unknown');
    `,
  },
  {
    // Listing indexes whose entries stay where they were put (schema 5): every index of schema 2
    // led with or held `priority` (and one `state`), so each state change moved five entries, a
    // page each. Now the key of a full index is (column, opened_at), fixed once an operation is
    // opened, plus `state` where a state change rewrites the entry in place (same page). Priority
    // lives only in two partial indexes: the rows needing attention (priority 0 and 1: unresolved
    // operations and duplicates; it also answers unresolved(), which sorts its ids) and resolved
    // operations in a state other than `succeeded` (an ordinary success never enters either
    // index). The queries that can use a partial index spell its WHERE terms (listing-sql.ts).
    version: 5,
    sql: `
      DROP INDEX IF EXISTS ledger_operations_triage;
      DROP INDEX IF EXISTS ledger_operations_state;
      DROP INDEX IF EXISTS ledger_operations_action;
      DROP INDEX IF EXISTS ledger_operations_class;
      DROP INDEX IF EXISTS ledger_operations_session;
      DROP INDEX IF EXISTS ledger_operations_unresolved;
      ${SQLITE_LISTING_INDEXES_5}
    `,
  },
  {
    // The operation fold (core/fold.ts) beside each listing row, so that every store folds an
    // operation's knowledge from all its attempts, not from its last state alone.
    version: 6,
    sql: '',
    backfill: addSqliteFoldColumn,
  },
  {
    // The small commit (heads.ts): an append writes the events and the operations' heads only;
    // the listing is projected after it from a cursor (projector.ts). A Candor that predates it
    // would write the listing itself and skip the heads, so it must be refused: a new version.
    version: 7,
    sql: SQLITE_HEADS_SCHEMA,
    backfill: backfillSqliteHeads,
  },
];

export const SQLITE_SCHEMA_VERSION = SQLITE_MIGRATIONS.at(-1)!.version;

/** Applies pending migrations in one IMMEDIATE transaction (safe when processes race to open). */
export function migrateSqlite(db: BetterSqlite3.Database): void {
  db.transaction(() => {
    db.exec(
      'CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
    );
    const row = db.prepare('SELECT max(version) AS v FROM schema_version').get() as {
      v: number | null;
    };
    const current = row.v ?? 0;
    if (current > SQLITE_SCHEMA_VERSION) {
      throw new LedgerError(
        'SCHEMA_TOO_NEW',
        `ledger schema version ${current} is newer than this Candor knows (${SQLITE_SCHEMA_VERSION})`,
      );
    }
    const record = db.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, ?)');
    for (const m of SQLITE_MIGRATIONS) {
      if (m.version <= current) continue;
      db.exec(m.sql);
      m.backfill?.(db);
      record.run(m.version, Date.now());
    }
  }).immediate();
}

/**
 * For a read-only open: the file must hold a ledger at the schema version this Candor reads (a
 * reader never migrates). A file that is not a SQLite database, or not a ledger, is OPEN_FAILED.
 */
export function checkSqliteSchema(db: BetterSqlite3.Database): void {
  const table = db
    .prepare("SELECT 1 AS ok FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'")
    .get();
  if (table === undefined) throw new LedgerError('OPEN_FAILED', 'the file holds no Candor ledger');
  const row = db.prepare('SELECT max(version) AS v FROM schema_version').get() as {
    v: number | null;
  };
  const current = row.v ?? 0;
  if (current > SQLITE_SCHEMA_VERSION) {
    throw new LedgerError(
      'SCHEMA_TOO_NEW',
      `ledger schema version ${current} is newer than this Candor knows (${SQLITE_SCHEMA_VERSION})`,
    );
  }
  if (current < SQLITE_SCHEMA_VERSION) {
    throw new LedgerError(
      'OPEN_FAILED',
      `ledger schema version ${current} needs a migration; open it once with write access`,
    );
  }
}
