// The operations listing's tables in PostgreSQL (same layout as SQLite's), written by the append
// transaction as literal SQL inside its single write message, and by the v2 migration's backfill.
import pg from 'pg';
import type { StoredEvent } from '../events.js';
import { foldListing, type OperationRow } from '../listing.js';
import { ROW_COLUMNS, rowFromSql, rowValues, type SqlRow } from '../listing-sql.js';
import { parseRecord } from '../record.js';

export const POSTGRES_LISTING_SCHEMA = `
  CREATE TABLE ledger_operations (
    operation_id text PRIMARY KEY,
    first_seq bigint NOT NULL UNIQUE,
    last_seq bigint NOT NULL,
    opened_at bigint NOT NULL,
    last_at bigint NOT NULL,
    state text,
    priority smallint NOT NULL,
    action text,
    action_class text,
    session_id text,
    correlation_id text,
    attempts integer NOT NULL,
    delivered integer NOT NULL,
    remote_refs text NOT NULL,
    duplicate smallint NOT NULL,
    fold text
  );
  CREATE INDEX ledger_operations_triage ON ledger_operations (priority, opened_at, first_seq);
  CREATE INDEX ledger_operations_state ON ledger_operations (state, priority, opened_at, first_seq);
  CREATE INDEX ledger_operations_action ON ledger_operations (action, priority, opened_at, first_seq);
  CREATE INDEX ledger_operations_class ON ledger_operations (action_class, priority, opened_at, first_seq);
  CREATE INDEX ledger_operations_session ON ledger_operations (session_id, priority, opened_at, first_seq);
  CREATE INDEX ledger_operations_prefix ON ledger_operations (operation_id COLLATE "C");
  CREATE TABLE ledger_op_counts (
    action text NOT NULL,
    action_class text NOT NULL,
    session_id text NOT NULL,
    state text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (action, action_class, session_id, state)
  );
  CREATE INDEX ledger_op_counts_class ON ledger_op_counts (action_class);
  CREATE INDEX ledger_op_counts_session ON ledger_op_counts (session_id);
  CREATE TABLE ledger_sessions (
    session_id text PRIMARY KEY,
    first_seq bigint NOT NULL,
    first_at bigint NOT NULL,
    agent text,
    operations bigint NOT NULL
  );
  CREATE INDEX ledger_sessions_recent ON ledger_sessions (first_seq);
`;

/**
 * Seqs at or above this are relative: a fold made before the append lock (append.ts) numbers its
 * k-th record `RELATIVE_SEQ + k`, and such a value is written as `$1 + k`, `$1` being the head the
 * server appends after. No ledger reaches 2^50 records, and no other listing number (times in ms,
 * counts) comes near it.
 */
export const RELATIVE_SEQ = 2 ** 50;

/**
 * A literal of the listing's SQL (relative seqs as `$1 + k`). PostgreSQL text cannot hold U+0000
 * (a message carrying it is refused whole): the listing, which is derived, shows U+FFFD there, so
 * that a record stored with one (a remote reference from a response, say) never stops the
 * projection. The record itself keeps its bytes.
 */
export const lit = (v: string | number | null): string =>
  v === null
    ? 'NULL'
    : typeof v === 'number'
      ? v > RELATIVE_SEQ
        ? `($1 + ${v - RELATIVE_SEQ})`
        : String(v)
      : pg.escapeLiteral(v.replaceAll('\u0000', '\ufffd'));

/** `SELECT` of the stored rows of these operations (their state feeds both projections). */
export function listingRowsSql(ids: readonly string[]): string {
  return `SELECT ${ROW_COLUMNS} FROM ledger_operations WHERE operation_id IN (${
    ids.length > 0 ? ids.map((id) => pg.escapeLiteral(id)).join(', ') : 'NULL'
  })`;
}

export const listingRows = (rows: readonly SqlRow[]): Map<string, OperationRow> =>
  new Map(rows.map((r) => [String(r.operation_id), rowFromSql(r)]));

const MUTABLE = ROW_COLUMNS.split(', ').filter((c) => c !== 'operation_id' && c !== 'first_seq');

/** Literal SQL writing the listing changes of `records` (empty when there are none). */
export function listingWriteSql(
  records: readonly StoredEvent[],
  known: ReadonlyMap<string, OperationRow>,
  /** Receives the rows as written. */
  written?: OperationRow[],
): string {
  return listingWrites(records, known, written).join(' ');
}

/** The statements of `listingWriteSql`, one by one (for `EXECUTE` in `candor_append`). */
export function listingWrites(
  records: readonly StoredEvent[],
  known: ReadonlyMap<string, OperationRow>,
  written?: OperationRow[],
): string[] {
  const c = foldListing(records, (id) => known.get(id));
  written?.push(...c.rows);
  const parts: string[] = [];
  if (c.rows.length > 0) {
    parts.push(
      `INSERT INTO ledger_operations (${ROW_COLUMNS}) VALUES ${c.rows
        .map((r) => `(${rowValues(r).map(lit).join(', ')})`)
        .join(', ')} ON CONFLICT (operation_id) DO UPDATE SET ${MUTABLE.map(
        (col) => `${col} = excluded.${col}`,
      ).join(', ')};`,
    );
  }
  if (c.counts.length > 0) {
    parts.push(
      `INSERT INTO ledger_op_counts (action, action_class, session_id, state, n) VALUES ${c.counts
        .map(
          ({ key: k, delta }) =>
            `(${[k.action, k.action_class, k.session_id, k.state, delta].map(lit).join(', ')})`,
        )
        .join(
          ', ',
        )} ON CONFLICT (action, action_class, session_id, state) DO UPDATE SET n = ledger_op_counts.n + excluded.n;`,
    );
  }
  if (c.sessions.length > 0) {
    parts.push(
      `INSERT INTO ledger_sessions (session_id, first_seq, first_at, agent, operations) VALUES ${c.sessions
        .map(
          (s) =>
            `(${[s.session_id, s.first_seq, s.first_at, s.agent, s.operations].map(lit).join(', ')})`,
        )
        .join(
          ', ',
        )} ON CONFLICT (session_id) DO UPDATE SET operations = ledger_sessions.operations + excluded.operations, agent = coalesce(excluded.agent, ledger_sessions.agent);`,
    );
  }
  const tags = new Set(c.refs.map((r) => `(${lit(`r:${r.ref}`)}, ${lit(r.operation_id)})`));
  if (tags.size > 0) {
    parts.push(
      `INSERT INTO ledger_tags (tag, operation_id) VALUES ${[...tags].join(', ')} ON CONFLICT DO NOTHING;`,
    );
  }
  return parts;
}

/** Folds every event already in the ledger into the listing (the v2 migration), in chunks. */
export async function backfillPostgresListing(client: pg.PoolClient): Promise<void> {
  let from = 0;
  for (;;) {
    const res = await client.query<{ bytes: Buffer }>(
      'SELECT bytes FROM ledger_events WHERE seq > $1 ORDER BY seq LIMIT 5000',
      [from],
    );
    if (res.rows.length === 0) return;
    const chunk = res.rows.map((r) => parseRecord(r.bytes));
    const ids = [
      ...new Set(chunk.flatMap((e) => (e.operation_id === null ? [] : [e.operation_id]))),
    ];
    const known = listingRows((await client.query(listingRowsSql(ids))).rows as SqlRow[]);
    const sql = listingWriteSql(chunk, known);
    if (sql) await client.query(sql);
    from = chunk.at(-1)!.seq;
  }
}
