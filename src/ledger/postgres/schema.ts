// PostgreSQL schema and forward migrations, applied under a transaction-scoped advisory lock so
// gateways starting together never race. `ledger_events.bytes` holds the canonical record bytes;
// the other columns and tables are derived from them (same layout as the SQLite schema).
import type { PoolClient } from 'pg';
import { LedgerError } from '../ledger-error.js';
import { ledgerLockKey, SERVER_APPEND_HEADS_SQL, SERVER_APPEND_SQL } from './append.js';
import { backfillPostgresListing, POSTGRES_LISTING_SCHEMA } from './listing.js';

export interface Migration {
  version: number;
  sql: string;
  /** Derives the new tables from the events already stored (same transaction). */
  backfill?: (client: PoolClient) => Promise<void>;
}

export const POSTGRES_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE ledger_events (
        seq bigint PRIMARY KEY,
        hash text NOT NULL,
        bytes bytea NOT NULL,
        kind text NOT NULL,
        operation_id text,
        session_id text,
        correlation_id text
      );
      CREATE INDEX ledger_events_operation ON ledger_events (operation_id, seq)
        WHERE operation_id IS NOT NULL;
      CREATE INDEX ledger_events_session ON ledger_events (session_id)
        WHERE operation_id IS NULL AND session_id IS NOT NULL;
      CREATE INDEX ledger_events_correlation ON ledger_events (correlation_id)
        WHERE operation_id IS NULL AND correlation_id IS NOT NULL;
      CREATE TABLE ledger_tags (
        tag text NOT NULL,
        operation_id text NOT NULL,
        PRIMARY KEY (tag, operation_id)
      );
      CREATE TABLE unresolved_operations (
        operation_id text PRIMARY KEY,
        state text NOT NULL
      );
    `,
  },
  {
    // The operations listing of `candor ui` (src/ledger/listing.ts), derived from the events.
    version: 2,
    sql: POSTGRES_LISTING_SCHEMA,
    backfill: backfillPostgresListing,
  },
  {
    // Ownership leases (src/ledger/lease.ts): mutable heartbeats, never part of the chain.
    version: 3,
    sql: `
      CREATE TABLE ledger_leases (
        owner text PRIMARY KEY,
        expires_at bigint NOT NULL,
        heartbeat_at bigint NOT NULL
      );
    `,
  },
  {
    // Sealing under the append lock in the server (append.ts): nothing stored changes.
    version: 4,
    sql: SERVER_APPEND_SQL,
  },
  {
    // The operation fold (core/fold.ts) beside each listing row (rows written before keep a null
    // fold, read back as the cautious fold of their state).
    version: 5,
    sql: 'ALTER TABLE ledger_operations ADD COLUMN IF NOT EXISTS fold text',
  },
  {
    // The small commit (as SQLite's schema 7): an append writes the events and one head per
    // touched operation (state, fold, last seq), which admission, the fold check and
    // `unresolved()` read; the listing, counts, sessions and tags are projected after the commit
    // from the events past `ledger_projection.seq` (projector.ts). The heads come from the
    // listing rows, exact until now, and the cursor starts at the last event. A Candor that
    // predates it would still write the listing itself: the version number keeps it out.
    version: 6,
    sql: `
      CREATE TABLE ledger_heads (
        operation_id text PRIMARY KEY,
        state text,
        last_seq bigint NOT NULL,
        fold text
      );
      CREATE INDEX ledger_heads_unresolved ON ledger_heads (operation_id COLLATE "C")
        WHERE state IN ('open', 'unknown');
      INSERT INTO ledger_heads (operation_id, state, last_seq, fold)
        SELECT operation_id, state, last_seq, fold FROM ledger_operations;
      DROP TABLE IF EXISTS unresolved_operations;
      CREATE TABLE ledger_projection (
        id integer PRIMARY KEY CHECK (id = 1),
        seq bigint NOT NULL
      );
      INSERT INTO ledger_projection (id, seq) SELECT 1, coalesce(max(seq), 0) FROM ledger_events;
      ${SERVER_APPEND_HEADS_SQL}
    `,
  },
];

export const POSTGRES_SCHEMA_VERSION = POSTGRES_MIGRATIONS.at(-1)!.version;

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export function validSchemaName(name: string): boolean {
  return SCHEMA_NAME.test(name);
}

/** Creates the schema if needed and applies pending migrations; `mustExist` refuses a blank one. */
export async function migratePostgres(
  client: PoolClient,
  schema: string,
  mustExist: boolean,
): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`candor-ledger:${schema}`]);
    const exists = await client.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [
      `"${schema}".schema_version`,
    ]);
    if (exists.rows[0]?.t == null && mustExist) {
      throw new LedgerError('NOT_FOUND', `no Candor ledger in PostgreSQL schema "${schema}"`);
    }
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_version (version integer PRIMARY KEY, applied_at bigint NOT NULL)',
    );
    const res = await client.query<{ v: number | null }>(
      'SELECT max(version) AS v FROM schema_version',
    );
    const current = res.rows[0]?.v ?? 0;
    if (current > POSTGRES_SCHEMA_VERSION) {
      throw new LedgerError(
        'SCHEMA_TOO_NEW',
        `ledger schema version ${current} is newer than this Candor knows (${POSTGRES_SCHEMA_VERSION})`,
      );
    }
    if (current > 0 && current < POSTGRES_SCHEMA_VERSION) {
      // No append of an older Candor is half done while the tables it writes change (schema 6
      // copies the heads from the listing and starts the projection after the last event).
      await client.query(`SELECT pg_advisory_xact_lock(${ledgerLockKey('append', schema)})`);
    }
    for (const m of POSTGRES_MIGRATIONS) {
      if (m.version <= current) continue;
      await client.query(m.sql);
      await m.backfill?.(client);
      await client.query('INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)', [
        m.version,
        Date.now(),
      ]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
