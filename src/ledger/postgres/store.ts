// PostgreSQL LedgerStore (pg). Appends are linearised by a transaction-scoped advisory lock per
// ledger schema: every client, on any host, reads the head and inserts after it while holding the
// lock, so the chain never forks (and the seq primary key would refuse a fork anyway). Appends
// queued in one process are group-committed. A write takes three round trips: (operation locks,
// listing rows, owners), (one `candor_append` call that takes the append lock and seals in the
// server, commit) and a WAL flush wait outside the lock; a lone writer seals in the client and
// sends everything in one message (#speculate).
import pg from 'pg';
import { sha256Hex } from '../../core/fingerprint.js';
import { GENESIS_HASH, type NewEvent, type StoredEvent } from '../events.js';
import { createGroupCommit } from '../group-commit.js';
import {
  createOwnerBook,
  ownerChangesIn,
  ownerFrom,
  type LeaseRow,
  type OwnerBook,
  type OwnerLeases,
} from '../lease.js';
import { errorText, LedgerError, settle } from '../ledger-error.js';
import type { ListingFacets, OperationRow, OperationsPage, OperationsQuery } from '../listing.js';
import {
  listingFacetsSql,
  listOperationsSql,
  type SqlRow,
  type SqlRunner,
} from '../listing-sql.js';
import { foldStates, operationTags, UNRESOLVED_STATES } from '../projection.js';
import { decodeSealed, parseRecord, sealRecord, type SealedRecord } from '../record.js';
import type { Durability, LedgerQuery, LedgerStore } from '../store.js';
import {
  absoluteSeq,
  relativeRecords,
  serverAppendSql,
  storedRecords,
  templateOf,
  type Template,
} from './append.js';
import { listingRows, listingRowsSql, listingWrites } from './listing.js';
import { migratePostgres, validSchemaName } from './schema.js';

export interface PostgresLedgerOptions {
  /**
   * Both modes commit with `synchronous_commit = on` (the server's WAL is flushed before COMMIT
   * returns); `power` is accepted for symmetry with SQLite.
   */
  durability?: Durability;
  /** PostgreSQL schema holding the ledger tables. Default `public`. */
  schema?: string;
  /** Connections for reads (writes use one at a time). Default 4. */
  poolSize?: number;
  /** Fail with NOT_FOUND instead of creating the tables. */
  mustExist?: boolean;
  /** Overrides of POSTGRES_TIMEOUTS (tests use short ones). */
  timeouts?: Partial<PostgresTimeouts>;
}

export interface PostgresTimeouts {
  /** TCP connect plus the startup exchange, and waiting for a pooled connection. */
  connect_ms: number;
  /** Server-side limit on one statement (includes waiting for the append lock). */
  statement_ms: number;
  /** Client-side limit on one query's answer: catches a server that stops answering at all. */
  query_ms: number;
  /** The server ends a session left idle inside a transaction (a writer that died mid-append). */
  idle_in_transaction_ms: number;
}

/**
 * No wait on the database is unbounded: a server that accepts TCP and never answers fails the open
 * within `connect_ms` (the CLI then exits 3), and one that stops answering mid-session fails the
 * query within `query_ms`. The append lock is held for one round trip, so 30 s of statement time is
 * far beyond any healthy wait.
 */
export const POSTGRES_TIMEOUTS: PostgresTimeouts = {
  connect_ms: 5_000,
  statement_ms: 30_000,
  query_ms: 35_000,
  idle_in_transaction_ms: 60_000,
};

export async function openPostgresLedger(
  url: string,
  options: PostgresLedgerOptions = {},
): Promise<LedgerStore> {
  const schema = options.schema ?? 'public';
  if (!validSchemaName(schema)) {
    throw new LedgerError('BAD_URL', `invalid PostgreSQL schema name: ${schema}`);
  }
  const t = { ...POSTGRES_TIMEOUTS, ...options.timeouts };
  const pool = new pg.Pool({
    connectionString: url,
    max: Math.max(1, options.poolSize ?? 4),
    options: `-c search_path=${schema} -c synchronous_commit=on`,
    connectionTimeoutMillis: t.connect_ms,
    statement_timeout: t.statement_ms,
    query_timeout: t.query_ms,
    idle_in_transaction_session_timeout: t.idle_in_transaction_ms,
    keepAlive: true,
  });
  // An idle connection dropped by the server must not crash the process; the next query fails.
  pool.on('error', () => undefined);
  try {
    const client = await pool.connect();
    let failed: Error | undefined;
    try {
      await migratePostgres(client, schema, options.mustExist === true);
    } catch (err) {
      failed = err instanceof Error ? err : new Error(String(err));
      throw err;
    } finally {
      // A connection whose query failed (a timeout above all) is discarded, never reused.
      client.release(failed);
    }
  } catch (err) {
    await pool.end().catch(() => undefined);
    if (err instanceof LedgerError) throw err;
    throw new LedgerError('OPEN_FAILED', `cannot open PostgreSQL ledger: ${errorText(err)}`, {
      cause: err,
    });
  }
  return new PostgresLedgerStore(pool, schema, url);
}

interface BytesRow {
  bytes: Buffer;
}

interface Head {
  seq: number;
  hash: string;
}

/** What this store's last commit left: the head it wrote and listing rows it read or wrote. */
interface LastCommit {
  head: Head;
  /** Listing rows by operation (undefined: no row when it was read). */
  known: Map<string, OperationRow | undefined>;
  /**
   * No other writer appended between this store's previous commit and this one: only then does
   * the next append speculate (with several busy writers a guess would mostly cost a round trip).
   */
  alone: boolean;
}

/** Listing rows remembered between appends (the most recently used operations). */
const KNOWN_ROWS = 2048;

/** Batches sealed after a head, with the SQL writing them. */
interface Sealed {
  results: (StoredEvent[] | Error)[];
  head: Head;
  stored: number;
  sql: string;
  written: OperationRow[];
}

class PostgresLedgerStore implements LedgerStore {
  readonly #pool: pg.Pool;
  readonly #group;
  /** Transaction-scoped advisory lock key serialising appends to this schema's ledger. */
  readonly #lockKey: string;
  /** LISTEN/NOTIFY channel of this schema's ledger (schema names are checked identifiers). */
  readonly #channel: string;
  /** Channel on which a released lease is announced (payload: the owner). */
  readonly #leaseChannel: string;
  readonly #url: string;
  readonly #schema: string;
  readonly #watchers = new Set<pg.Client>();
  /**
   * Set after a commit, cleared by any failure: lets the next append seal before reading (one
   * round trip), checked by a guard under the lock (#speculate).
   */
  #last: LastCommit | null = null;
  #closed = false;

  constructor(pool: pg.Pool, schema: string, url: string) {
    this.#pool = pool;
    this.#url = url;
    this.#schema = schema;
    this.#channel = `candor_ledger_${schema}`;
    this.#leaseChannel = `candor_leases_${schema}`;
    this.#lockKey = BigInt.asIntN(
      64,
      BigInt(`0x${sha256Hex(`candor-ledger-append:${schema}`).slice(0, 16)}`),
    ).toString();
    this.#group = createGroupCommit((batches) => this.#flush(batches));
  }

  async #flush(batches: readonly (readonly NewEvent[])[]): Promise<(StoredEvent[] | Error)[]> {
    const touched = [
      ...new Set(
        batches.flatMap((b) => b.flatMap((e) => (e.operation_id === null ? [] : [e.operation_id]))),
      ),
    ];
    const client = await this.#pool.connect();
    let failed: Error | undefined;
    try {
      const last = this.#last;
      this.#last = null;
      let done: Sealed | null = null;
      if (last?.alone && ownerChangesIn(batches).operations.length === 0) {
        done = await this.#speculate(client, batches, touched, last);
        if (done) {
          this.#last = {
            head: done.head,
            known: mergeKnown(last.known, done.written),
            alone: true,
          };
        }
      }
      done ??= await this.#sealInServer(client, batches, touched, last);
      if (done.stored > 0) {
        // Durability before acknowledging: a synchronous commit that takes a transaction id flushes
        // the WAL up to its own commit record, which lies after ours. Waiting here, after the lock
        // is released, lets concurrent writers share WAL flushes (the server's group commit) instead
        // of holding the append lock across every fsync. A record lost in a server crash before
        // this flush was never acknowledged, and neither was anything chained after it (the WAL is
        // sequential).
        await client.query('SELECT txid_current()');
      }
      return done.results;
    } catch (err) {
      this.#last = null;
      failed = err instanceof Error ? err : new Error(String(err));
      throw err;
    } finally {
      // A connection whose query failed is discarded, never reused: the server rolls back the
      // transaction when it goes, and a ROLLBACK on a connection that stopped answering would only
      // wait out another query timeout.
      client.release(failed);
    }
  }

  /**
   * Operation locks, taken before the append lock by every append (in one statement, in key
   * order, so two appends never wait on each other in a cycle): while an append holds an
   * operation's lock, nobody else writes that operation's events or listing row, so what it read
   * of them before the append lock (listing row, owners) is still true when it writes.
   */
  #operationLocks(touched: readonly string[]): string {
    const keys = [
      ...new Set(
        touched.map((id) =>
          BigInt.asIntN(
            64,
            BigInt(`0x${sha256Hex(`candor-ledger-operation:${this.#schema}:${id}`).slice(0, 16)}`),
          ),
        ),
      ),
    ].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return `SELECT ${keys.map((k) => `pg_advisory_xact_lock(${k})`).join(', ')}`;
  }

  /**
   * The append with the lock held for server work only. Round trip 1 takes the touched operations'
   * locks and reads their listing rows (and owners, for fencing); the client then admits the
   * batches, encodes the records around their seq and previous hash, and folds the listing with
   * relative seqs. Round trip 2 is one `candor_append` call (append.ts) and COMMIT: the server
   * takes the append lock, assigns seqs, hashes, inserts and writes the listing.
   */
  async #sealInServer(
    client: pg.PoolClient,
    batches: readonly (readonly NewEvent[])[],
    touched: readonly string[],
    last: LastCommit | null,
  ): Promise<Sealed> {
    const { operations, owners } = ownerChangesIn(batches);
    const sql = ['BEGIN', 'SET LOCAL synchronous_commit = off'];
    if (touched.length > 0) sql.push(this.#operationLocks(touched));
    sql.push(listingRowsSql(touched));
    if (operations.length > 0) {
      sql.push(
        `SELECT operation_id, bytes FROM ledger_events WHERE operation_id IN (${operations.map(lit).join(', ')})
           AND kind IN ('operation_opened', 'owner_changed') ORDER BY seq`,
        `SELECT owner, expires_at::float8 AS expires_at, heartbeat_at::float8 AS heartbeat_at
           FROM ledger_leases WHERE owner IN (${owners.length > 0 ? owners.map(lit).join(', ') : 'NULL'})`,
      );
    }
    const replies = (await client.query(sql.join('; '))) as unknown as pg.QueryResult[];
    const at = touched.length > 0 ? 3 : 2;
    const rows = listingRows((replies[at] as pg.QueryResult<SqlRow>).rows);
    const known = new Map<string, OperationRow | undefined>(
      touched.map((id) => [id, rows.get(id)]),
    );
    const book =
      operations.length > 0
        ? ownerBookOf(
            (replies[at + 1] as pg.QueryResult<{ operation_id: string; bytes: Buffer }>).rows,
            (replies[at + 2] as pg.QueryResult<LeaseRow>).rows,
          )
        : null;

    const results: (StoredEvent[] | Error | number)[] = [];
    const templates: Template[] = [];
    for (const events of batches) {
      // A takeover whose `from` is no longer the owner, or still holds a live lease, is refused
      // here, under the operations' locks: of two racing gateways exactly one is written.
      const refused = book?.admit(events);
      if (refused) {
        results.push(refused);
        continue;
      }
      // Encoding is pure: a batch that cannot be encoded is dropped before anything is written.
      try {
        const own = events.map(templateOf);
        results.push(own.length);
        templates.push(...own);
      } catch (err) {
        results.push(err instanceof Error ? err : new Error(String(err)));
      }
    }
    if (templates.length === 0) {
      // Every batch was refused: nothing to write, and nothing learned for a speculation.
      await client.query('COMMIT');
      const out = results.map((r) => (typeof r === 'number' ? [] : r));
      return {
        results: out,
        head: { seq: 0, hash: GENESIS_HASH },
        stored: 0,
        sql: '',
        written: [],
      };
    }
    const present = new Map<string, OperationRow>();
    for (const [id, r] of known) if (r) present.set(id, r);
    const written: OperationRow[] = [];
    const writes = derivedWrites(relativeRecords(templates), present, written);
    const [call] = (await client.query(
      `${serverAppendSql(this.#lockKey, templates, writes, this.#channel)}; COMMIT`,
    )) as unknown as [pg.QueryResult<{ head_seq: string; head_hash: string; hashes: string[] }>];
    const reply = call.rows[0]!;
    const before = { seq: Number(reply.head_seq), hash: reply.head_hash };
    const records = storedRecords(templates, before, reply.hashes);
    const head = { seq: records.at(-1)!.seq, hash: records.at(-1)!.hash };
    let next = 0;
    const out = results.map((r) => (typeof r === 'number' ? records.slice(next, (next += r)) : r));
    // Nobody else appended since this store's last commit: the next append may speculate.
    const alone = last !== null && last.head.seq === before.seq && last.head.hash === before.hash;
    const base = alone ? last.known : new Map<string, OperationRow | undefined>();
    for (const [id, r] of known) base.set(id, r);
    this.#last = {
      head,
      known: mergeKnown(
        base,
        written.map((r) => ({
          ...r,
          first_seq: absoluteSeq(r.first_seq, before.seq),
          last_seq: absoluteSeq(r.last_seq, before.seq),
        })),
      ),
      alone,
    };
    return { results: out, head, stored: records.length, sql: '', written: [] };
  }

  /**
   * One round trip instead of two while this store is the ledger's only writer: the batches are
   * sealed after the head and listing rows its last commit left, and sent with the locks, a guard
   * and COMMIT in one message. The guard (under the lock) fails the transaction unless the head
   * is still that commit's and no operation assumed new has a listing row; then the transaction
   * is rolled back and null returned (the caller seals in the server).
   */
  async #speculate(
    client: pg.PoolClient,
    batches: readonly (readonly NewEvent[])[],
    touched: readonly string[],
    last: LastCommit,
  ): Promise<Sealed | null> {
    const assumedNew = touched.filter((id) => last.known.get(id) === undefined);
    const done = this.#seal(batches, last.head, last.known);
    const guard =
      `SELECT 1 / (CASE WHEN (SELECT seq FROM ledger_events ORDER BY seq DESC LIMIT 1) ` +
      `${last.head.seq === 0 ? 'IS NULL' : `= ${last.head.seq}`}` +
      (last.head.seq === 0
        ? ''
        : ` AND (SELECT hash FROM ledger_events WHERE seq = ${last.head.seq}) = ${lit(last.head.hash)}`) +
      (assumedNew.length > 0
        ? ` AND NOT EXISTS (SELECT 1 FROM ledger_operations WHERE operation_id IN (${assumedNew.map(lit).join(', ')}))`
        : '') +
      ' THEN 1 ELSE 0 END)';
    const locks = touched.length > 0 ? `${this.#operationLocks(touched)}; ` : '';
    try {
      await client.query(
        `BEGIN; SET LOCAL synchronous_commit = off; ${locks}SELECT pg_advisory_xact_lock(${this.#lockKey}); ${guard}; ${done.sql}COMMIT`,
      );
      return done;
    } catch (err) {
      // division_by_zero: the guard refused (another writer appended); anything else is real.
      if ((err as { code?: unknown }).code !== '22012') throw err;
      await client.query('ROLLBACK');
      return null;
    }
  }

  /** Seals the batches after `head` in the client and builds the SQL writing them (no COMMIT). */
  #seal(
    batches: readonly (readonly NewEvent[])[],
    head: Head,
    known: ReadonlyMap<string, OperationRow | undefined>,
  ): Sealed {
    let seq = head.seq;
    let prev = head.hash;
    const results: (StoredEvent[] | Error)[] = [];
    const rows: SealedRecord[] = [];
    for (const events of batches) {
      // Sealing is pure: a batch that cannot be encoded is dropped before anything is written.
      try {
        let s = seq;
        let p = prev;
        const sealed = events.map((e) => {
          const r = sealRecord(e, ++s, p);
          p = r.record.hash;
          return r;
        });
        seq = s;
        prev = p;
        rows.push(...sealed);
        results.push(sealed.map((r) => decodeSealed(r.text, r.record.hash)));
      } catch (err) {
        results.push(err instanceof Error ? err : new Error(String(err)));
      }
    }
    const present = new Map<string, OperationRow>();
    for (const [id, r] of known) if (r) present.set(id, r);
    // The write and COMMIT travel in one simple-query message: the lock is held for one round trip.
    // Watchers (LISTEN) hear of the new head when, and only if, the transaction commits.
    const notify =
      rows.length > 0 ? `SELECT pg_notify('${this.#channel}', '${rows.at(-1)!.record.seq}'); ` : '';
    const written: OperationRow[] = [];
    const sql =
      rows.length > 0
        ? `${eventsInsertSql(rows)} ${derivedWrites(
            rows.map((r) => r.record),
            present,
            written,
          ).join(' ')} `
        : '';
    return {
      results,
      head: { seq, hash: prev },
      stored: rows.length,
      sql: `${sql}${notify}`,
      written,
    };
  }

  readonly leases: OwnerLeases = {
    heartbeat: async (owner, at, expiresAt) => {
      this.#live();
      await this.#pool.query(
        `INSERT INTO ledger_leases (owner, expires_at, heartbeat_at) VALUES ($1, $2, $3)
         ON CONFLICT (owner) DO UPDATE SET expires_at = excluded.expires_at,
           heartbeat_at = excluded.heartbeat_at`,
        [owner, expiresAt, at],
      );
    },
    release: async (owner, at) => {
      this.#live();
      // Other gateways' sweeps (watchReleases) hear of it when, and only if, it commits.
      await this.#pool.query(
        `WITH released AS (
           UPDATE ledger_leases SET expires_at = least(expires_at, $1) WHERE owner = $2 RETURNING owner
         ) SELECT pg_notify($3, owner) FROM released`,
        [at, owner, this.#leaseChannel],
      );
    },
    watchReleases: (onRelease) => this.#listen(this.#leaseChannel, (payload) => onRelease(payload)),
    leases: async (owners) => {
      this.#live();
      const res = await this.#pool.query<LeaseRow>(
        `SELECT owner, expires_at::float8 AS expires_at, heartbeat_at::float8 AS heartbeat_at
           FROM ledger_leases WHERE owner = ANY($1)`,
        [[...owners]],
      );
      return res.rows;
    },
  };

  #live(): void {
    if (this.#closed) throw new LedgerError('CLOSED', 'ledger: store is closed');
  }

  watch(onAppend: () => void): Promise<() => Promise<void>> {
    return this.#listen(this.#channel, () => onAppend());
  }

  async #listen(channel: string, on: (payload: string) => void): Promise<() => Promise<void>> {
    this.#live();
    // A connection of its own (a pooled one would be handed to other queries).
    const client = new pg.Client({ connectionString: this.#url });
    client.on('error', () => undefined);
    client.on('notification', (n) => {
      if (n.channel === channel) on(n.payload ?? '');
    });
    await client.connect();
    await client.query(`LISTEN ${channel}`);
    this.#watchers.add(client);
    return async () => {
      if (!this.#watchers.delete(client)) return;
      await client.end().catch(() => undefined);
    };
  }

  append(events: readonly NewEvent[]): Promise<StoredEvent[]> {
    if (this.#closed || events.length === 0) {
      return settle(() => {
        this.#live();
        return [];
      });
    }
    return this.#group.submit(events);
  }

  read(from = 1, limit?: number): Promise<StoredEvent[]> {
    return this.#rows('SELECT bytes FROM ledger_events WHERE seq >= $1 ORDER BY seq LIMIT $2', [
      from,
      limit === undefined ? null : Math.max(0, limit),
    ]);
  }

  query(q: LedgerQuery): Promise<StoredEvent[]> {
    if ('operation_id' in q) {
      return this.#rows('SELECT bytes FROM ledger_events WHERE operation_id = $1 ORDER BY seq', [
        q.operation_id,
      ]);
    }
    // Operations carrying the tag, whole, plus the matching non-operation events.
    const [tag, column] =
      'session_id' in q
        ? [`s:${q.session_id}`, 'session_id']
        : 'correlation_id' in q
          ? [`c:${q.correlation_id}`, 'correlation_id']
          : [`k:${q.idempotency_key}`, null];
    const value =
      'session_id' in q ? q.session_id : 'correlation_id' in q ? q.correlation_id : null;
    return this.#rows(
      `SELECT seq, bytes FROM ledger_events WHERE operation_id IN
         (SELECT operation_id FROM ledger_tags WHERE tag = $1)
       ${column ? `UNION ALL SELECT seq, bytes FROM ledger_events WHERE operation_id IS NULL AND ${column} = $2` : ''}
       ORDER BY seq`,
      column ? [tag, value] : [tag],
    );
  }

  async unresolved(): Promise<string[]> {
    this.#live();
    const res = await this.#pool.query<{ operation_id: string }>(
      'SELECT operation_id FROM unresolved_operations ORDER BY operation_id COLLATE "C"',
    );
    return res.rows.map((r) => r.operation_id);
  }

  readonly #sql: SqlRunner = {
    placeholder: (n) => `$${n}`,
    run: async (sql, params) => {
      this.#live();
      return (await this.#pool.query<SqlRow>(sql, [...params])).rows;
    },
  };

  operations(q: OperationsQuery): Promise<OperationsPage> {
    return listOperationsSql(this.#sql, q, { prefixUpper: '\u{10ffff}', binary: ' COLLATE "C"' });
  }

  facets(sessions = 200): Promise<ListingFacets> {
    return listingFacetsSql(this.#sql, sessions);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#group.drain();
    for (const w of this.#watchers) await w.end().catch(() => undefined);
    this.#watchers.clear();
    await this.#pool.end();
  }

  async #rows(sql: string, params: unknown[]): Promise<StoredEvent[]> {
    this.#live();
    const res = await this.#pool.query<BytesRow>(sql, params);
    return res.rows.map((r) => parseRecord(r.bytes));
  }
}

const lit = (v: string | null): string => (v === null ? 'NULL' : pg.escapeLiteral(v));

/**
 * SQL inserting the records, for the client-sealed path. Values are inlined as literals (strings
 * through `escapeLiteral`, bytes as hex, seq numbers we generated) so that it can share one message
 * with COMMIT; nothing here comes from an unescaped caller string.
 */
function eventsInsertSql(rows: readonly { record: StoredEvent; bytes: Buffer }[]): string {
  const values = rows.map(
    ({ record: r, bytes }) =>
      `(${r.seq}, '${r.hash}', '\\x${bytes.toString('hex')}'::bytea, ${lit(r.kind)}, ${lit(
        r.operation_id,
      )}, ${lit(r.session_id)}, ${lit(r.correlation_id)})`,
  );
  return `INSERT INTO ledger_events (seq, hash, bytes, kind, operation_id, session_id, correlation_id) VALUES ${values.join(', ')};`;
}

/**
 * Statements writing what the records change beside the events (tags, unresolved states, the
 * listing); seqs at or above RELATIVE_SEQ are written as `$1 + k` (see listing.ts).
 */
function derivedWrites(
  records: readonly StoredEvent[],
  known: ReadonlyMap<string, OperationRow>,
  written: OperationRow[],
): string[] {
  const parts: string[] = [];
  const tags = new Set(
    records.flatMap((record) =>
      operationTags(record).map((t) => `(${lit(t)}, ${lit(record.operation_id)})`),
    ),
  );
  if (tags.size > 0) {
    parts.push(
      `INSERT INTO ledger_tags (tag, operation_id) VALUES ${[...tags].join(', ')} ON CONFLICT DO NOTHING;`,
    );
  }
  const changes = foldStates(records, (id) => known.get(id)?.state ?? undefined);
  const open = changes.filter((c) => UNRESOLVED_STATES.has(c.state));
  const settled = changes.filter((c) => !UNRESOLVED_STATES.has(c.state));
  if (open.length > 0) {
    parts.push(
      `INSERT INTO unresolved_operations (operation_id, state) VALUES ${open
        .map((c) => `(${lit(c.operation_id)}, ${lit(c.state)})`)
        .join(', ')} ON CONFLICT (operation_id) DO UPDATE SET state = excluded.state;`,
    );
  }
  if (settled.length > 0) {
    parts.push(
      `DELETE FROM unresolved_operations WHERE operation_id IN (${settled.map((c) => lit(c.operation_id)).join(', ')});`,
    );
  }
  parts.push(...listingWrites(records, known, written));
  return parts;
}

/** Fencing's owners from the owner events and leases read under the operations' locks. */
function ownerBookOf(
  events: readonly { operation_id: string; bytes: Buffer }[],
  leases: readonly LeaseRow[],
): OwnerBook {
  const byOp = new Map<string, StoredEvent[]>();
  for (const r of events) {
    const list = byOp.get(r.operation_id) ?? [];
    list.push(parseRecord(r.bytes));
    byOp.set(r.operation_id, list);
  }
  const leaseBy = new Map(leases.map((l) => [l.owner, l]));
  return createOwnerBook(
    (id) => ownerFrom(byOp.get(id) ?? []),
    (owner) => leaseBy.get(owner),
  );
}

/** `known` with the rows a commit wrote, most recent last, at most KNOWN_ROWS of them. */
function mergeKnown(
  known: Map<string, OperationRow | undefined>,
  written: readonly OperationRow[],
): Map<string, OperationRow | undefined> {
  for (const r of written) {
    known.delete(r.operation_id);
    known.set(r.operation_id, r);
  }
  while (known.size > KNOWN_ROWS) known.delete(known.keys().next().value!);
  return known;
}
