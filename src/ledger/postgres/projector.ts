// The listing projector of PostgreSQL (schema 6), as SQLite's (schema 7): listing rows, counts,
// sessions and tags are derived from the events past `ledger_projection.seq`, a batch per
// transaction that also advances that cursor, so a crash leaves the listing at a batch boundary
// with the cursor naming it. In a fleet one gateway projects at a time (a transaction-scoped
// advisory lock of its own, never the append lock: an append never waits for a projection).
//
// Why a cursor is enough: every append holds the append lock until its commit is visible, so
// events become visible in seq order, and a reader that sees seq n sees every seq below it.
import pg from 'pg';
import type { StoredEvent } from '../events.js';
import type { ListingTrail } from '../listing.js';
import { ROW_COLUMNS, type SqlRow } from '../listing-sql.js';
import { operationTags } from '../projection.js';
import { decodeSealed, parseRecord } from '../record.js';
import { listingRows, listingWrites, lit } from './listing.js';

/** One batch: at most this many events. */
export const POSTGRES_PROJECT_BATCH_EVENTS = 1000;

/**
 * And at most about this many bytes of records (at least one record): the reply fits the socket's
 * buffers, so a gateway paused while reading it is idle in its transaction, not stuck in the
 * server's send, and IDLE_MS ends it.
 */
export const POSTGRES_PROJECT_BATCH_BYTES = 128 * 1024;

/** A projector's session idle inside its batch this long is ended by the server (lock released). */
const IDLE_MS = 5_000;

export interface BatchResult {
  /** The seq the cursor names after the batch. */
  cursor: number;
  /** Events projected by this batch (0: nothing was pending up to `until`). */
  projected: number;
}

interface PendingRow {
  seq: string;
  hash: string;
  bytes: Buffer;
}

/**
 * Projects one batch (events after the cursor, up to `until` when given) in its own transaction
 * on `client`. `wait`: wait for another gateway's batch to end (a number: at most that many ms);
 * otherwise, or once that wait runs out, `{ busy: cursor }` is returned when one is running (it
 * projects every pending event, ours included).
 */
export async function projectBatch(
  client: pg.ClientBase,
  lockKey: string,
  wait: boolean | number,
  until?: number,
): Promise<BatchResult | { busy: number }> {
  const upTo = until === undefined ? '' : ` AND seq <= ${Math.floor(until)}`;
  const pending = `SELECT seq, hash, bytes, operation_id FROM (
      SELECT seq, hash, bytes, operation_id,
        sum(octet_length(bytes)) OVER (ORDER BY seq) - octet_length(bytes) AS before
      FROM (SELECT seq, hash, bytes, operation_id FROM ledger_events
        WHERE seq > (SELECT seq FROM ledger_projection)${upTo}
        ORDER BY seq LIMIT ${POSTGRES_PROJECT_BATCH_EVENTS}) w
    ) b WHERE before < ${POSTGRES_PROJECT_BATCH_BYTES} ORDER BY seq`;
  try {
    // The lock first, in a statement of its own: the cursor is read after it is held (each
    // statement of a READ COMMITTED transaction reads what is committed when it starts). A
    // projector paused mid-batch loses its session, and with it the lock, within IDLE_MS.
    const locked = (await client.query(
      `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${IDLE_MS}; ${
        typeof wait === 'number'
          ? `SET LOCAL lock_timeout = ${Math.max(1, Math.floor(wait))}; `
          : ''
      }${
        wait !== false
          ? `SELECT true AS ok, pg_advisory_xact_lock(${lockKey})`
          : `SELECT pg_try_advisory_xact_lock(${lockKey}) AS ok`
      }; SELECT seq FROM ledger_projection`,
    )) as unknown as pg.QueryResult[];
    const at = typeof wait === 'number' ? 1 : 0;
    if (!(locked[2 + at]!.rows[0] as { ok: boolean }).ok) {
      await client.query('ROLLBACK');
      // Where the other gateway's projection stood when it was found running.
      return { busy: Number((locked[3 + at]!.rows[0] as { seq: string } | undefined)?.seq ?? 0) };
    }
    // The pending events and the listing rows of their operations (the same window: later
    // commits only add events after it).
    const replies = (await client.query(
      `SELECT seq FROM ledger_projection; ${pending};
       SELECT ${ROW_COLUMNS} FROM ledger_operations WHERE operation_id IN
         (SELECT operation_id FROM (${pending}) p WHERE operation_id IS NOT NULL)`,
    )) as unknown as pg.QueryResult[];
    const cursor = Number((replies[0]!.rows[0] as { seq: string } | undefined)?.seq ?? 0);
    const rows = replies[1]!.rows as PendingRow[];
    if (rows.length === 0) {
      await client.query('COMMIT');
      return { cursor, projected: 0 };
    }
    // With the hash the writer computed when it sealed each record: not computed again here.
    const records: StoredEvent[] = rows.map((r) => decodeSealed(r.bytes, r.hash));
    const known = listingRows(replies[2]!.rows as SqlRow[]);
    const tags = new Set(
      records.flatMap((record) =>
        operationTags(record).map((t) => `(${lit(t)}, ${lit(record.operation_id)})`),
      ),
    );
    const last = records.at(-1)!.seq;
    const writes = [
      ...(tags.size > 0
        ? [
            `INSERT INTO ledger_tags (tag, operation_id) VALUES ${[...tags].join(', ')} ON CONFLICT DO NOTHING`,
          ]
        : []),
      ...listingWrites(records, known).map((w) => w.replace(/;$/, '')),
      `UPDATE ledger_projection SET seq = ${last}`,
      'COMMIT',
    ];
    await client.query(writes.join('; '));
    return { cursor: last, projected: records.length };
  } catch (err) {
    // The server answered with an error: the connection still works, end the transaction. A
    // connection that failed is not asked again (the caller discards it).
    if (err instanceof pg.DatabaseError) await client.query('ROLLBACK').catch(() => undefined);
    // lock_not_available: the bounded wait ran out while another gateway projects.
    if (err instanceof pg.DatabaseError && err.code === '55P03') return { busy: 0 };
    throw err;
  }
}

/** How far the listing is behind the events (undefined: not at all), in one snapshot. */
export async function projectionTrail(
  run: (sql: string) => Promise<pg.QueryResult>,
): Promise<ListingTrail | undefined> {
  const res = await run(
    `SELECT p.seq AS cursor, (SELECT coalesce(max(seq), 0) FROM ledger_events) AS head,
       (SELECT bytes FROM ledger_events e WHERE e.seq > p.seq ORDER BY e.seq LIMIT 1) AS first
     FROM ledger_projection p`,
  );
  const row = res.rows[0] as { cursor: string; head: string; first: Buffer | null } | undefined;
  if (!row) return undefined;
  const behind = Number(row.head) - Number(row.cursor);
  if (behind <= 0) return undefined;
  const at = row.first ? parseRecord(row.first).at : null;
  return { events: behind, ms: at === null ? 0 : Math.max(0, Date.now() - at) };
}
