// PostgreSQL LedgerStore (pg). Appends are linearised by a transaction-scoped advisory lock per
// ledger schema: every client, on any host, reads the head and inserts after it while holding the
// lock, so the chain never forks (and the seq primary key would refuse a fork anyway). Appends
// queued in one process are group-committed. The append lock covers server work only: the client
// encodes records around their seq and previous hash and folds the listing under per-operation
// locks, and one `candor_append` call (append.ts) seals and writes under the append lock. A write
// takes one message (operation locks, a guard on what this store remembers, the call, COMMIT and
// a WAL flush wait outside the locks) or, when it must read first, two.
import pg from 'pg';
import { sha256Hex } from '../../core/fingerprint.js';
import type { NewEvent, StoredEvent } from '../events.js';
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
import { parseRecord } from '../record.js';
import type { Durability, LedgerQuery, LedgerStore } from '../store.js';
import {
  absoluteSeq,
  relativeRecords,
  serverAppendSql,
  STALE_FOLD,
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

/**
 * What this store knows of an operation from its own commits: its listing row as written, and its
 * owner while no takeover has been seen since its opening (null: not known).
 */
interface Known {
  row: OperationRow;
  owner: string | null;
}

/** Operations remembered between appends (the most recently used). */
const KNOWN_ROWS = 2048;

/** What the server-sealed write of a flush returned. */
interface Written {
  results: (StoredEvent[] | Error)[];
  stored: number;
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
   * Set by commits, cleared by any failure: lets the next append fold before reading (one round
   * trip), checked by a guard under the operations' locks (#guess).
   */
  #known = new Map<string, Known>();
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
      const guessed = await this.#guess(client, batches, touched);
      let done = guessed !== 'refused' ? guessed : null;
      let rollback = guessed === 'refused';
      for (let tries = 1; !done; tries++) {
        try {
          done = await this.#readThenWrite(client, batches, touched, rollback);
        } catch (err) {
          // A fold `candor_append` found stale: only a writer that takes no operation locks (an
          // older Candor on the same ledger) can cause it. Read again, a few times at most.
          if ((err as { code?: unknown }).code !== STALE_FOLD || tries >= 3) throw err;
          rollback = true;
        }
      }
      // A write that stored records ended its message with the flush wait (FLUSH_WAIT).
      return done.results;
    } catch (err) {
      this.#known.clear();
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
   * or remembers of them is still true when it writes.
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
   * One round trip (the flush wait included) when this store knows every touched operation from its
   * own commits, or the batch opens it: the listing is folded from what it remembers and sent with
   * the locks, a guard and the write in one message. The guard (under the operations' locks) fails
   * the transaction unless each remembered operation's row still ends at the seq this store wrote
   * and no operation taken for new has a row; then 'refused' is returned, the transaction left
   * aborted for the read's message to roll back (the caller reads first, as it does on null).
   * Takeovers always read first (fencing needs the leases).
   */
  async #guess(
    client: pg.PoolClient,
    batches: readonly (readonly NewEvent[])[],
    touched: readonly string[],
  ): Promise<Written | 'refused' | null> {
    const { operations, owners } = ownerChangesIn(batches);
    if (owners.length > 0) return null;
    const firstKind = new Map<string, string>();
    for (const b of batches)
      for (const e of b)
        if (e.operation_id !== null && !firstKind.has(e.operation_id))
          firstKind.set(e.operation_id, e.kind);
    const known = new Map<string, OperationRow | undefined>();
    const conditions: string[] = [];
    const assumedNew: string[] = [];
    for (const id of touched) {
      const k = this.#known.get(id);
      if (k) {
        // An attempt of an operation the batch does not open is admitted on a known owner only.
        if (k.owner === null && operations.includes(id)) return null;
        known.set(id, k.row);
        conditions.push(
          `(SELECT last_seq FROM ledger_operations WHERE operation_id = ${lit(id)}) = ${k.row.last_seq}`,
        );
      } else if (firstKind.get(id) === 'operation_opened') {
        known.set(id, undefined);
        assumedNew.push(id);
      } else {
        return null;
      }
    }
    if (assumedNew.length > 0) {
      conditions.push(
        `NOT EXISTS (SELECT 1 FROM ledger_operations WHERE operation_id IN (${assumedNew.map(lit).join(', ')}))`,
      );
    }
    const book = createOwnerBook(
      (id) => ({ owner: this.#known.get(id)?.owner ?? null, former: [] }),
      () => undefined,
    );
    const prefix = [
      'BEGIN',
      'SET LOCAL synchronous_commit = off',
      ...(touched.length > 0 ? [this.#operationLocks(touched)] : []),
      ...(conditions.length > 0
        ? [`SELECT 1 / (CASE WHEN ${conditions.join(' AND ')} THEN 1 ELSE 0 END)`]
        : []),
    ];
    try {
      return await this.#write(client, batches, known, book, `${prefix.join('; ')}; `);
    } catch (err) {
      // division_by_zero: the guard refused (another writer appended); anything else is real.
      const code = (err as { code?: unknown }).code;
      if (code !== '22012' && code !== STALE_FOLD) throw err;
      // The failed transaction is rolled back at the start of the read's message.
      return 'refused';
    }
  }

  /**
   * Round trip 1 takes the touched operations' locks and reads their listing rows (and owners and
   * leases, for fencing), after rolling back a refused guess; round trip 2 writes (#write).
   */
  async #readThenWrite(
    client: pg.PoolClient,
    batches: readonly (readonly NewEvent[])[],
    touched: readonly string[],
    rollback: boolean,
  ): Promise<Written> {
    // What it remembers of these operations may be stale (an owner above all): read afresh.
    for (const id of touched) this.#known.delete(id);
    const { operations, owners } = ownerChangesIn(batches);
    const sql = [...(rollback ? ['ROLLBACK'] : []), 'BEGIN', 'SET LOCAL synchronous_commit = off'];
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
    const at = sql.length - (operations.length > 0 ? 3 : 1);
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
    return this.#write(client, batches, known, book, '');
  }

  /**
   * Admits the batches, encodes their records around seq and previous hash, folds the listing with
   * relative seqs, and sends `prefix`, one `candor_append` call (append.ts) and COMMIT in one
   * message: the server takes the append lock, assigns the seqs, hashes, inserts and writes the
   * listing, so the lock covers server work only.
   */
  async #write(
    client: pg.PoolClient,
    batches: readonly (readonly NewEvent[])[],
    known: ReadonlyMap<string, OperationRow | undefined>,
    book: OwnerBook | null,
    prefix: string,
  ): Promise<Written> {
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
      // Every batch was refused: nothing to write.
      await client.query(`${prefix}COMMIT`);
      return { results: results.map((r) => (typeof r === 'number' ? [] : r)), stored: 0 };
    }
    const present = new Map<string, OperationRow>();
    for (const [id, r] of known) if (r) present.set(id, r);
    const written: OperationRow[] = [];
    const writes = derivedWrites(relativeRecords(templates), present, written);
    const replies = (await client.query(
      `${prefix}${serverAppendSql(
        this.#lockKey,
        templates,
        writes,
        this.#channel,
        new Map([...known].map(([id, r]) => [id, r?.last_seq])),
      )}; COMMIT; ${FLUSH_WAIT}`,
    )) as unknown as pg.QueryResult<{ head_seq: string; head_hash: string; hashes: string[] }>[];
    const reply = replies.at(-3)!.rows[0]!;
    const before = { seq: Number(reply.head_seq), hash: reply.head_hash };
    const records = storedRecords(templates, before, reply.hashes);
    this.#remember(records, written, before.seq);
    let next = 0;
    return {
      results: results.map((r) => (typeof r === 'number' ? records.slice(next, (next += r)) : r)),
      stored: records.length,
    };
  }

  /** Remembers the rows a commit wrote, and the owners it set (a takeover forgets the owner). */
  #remember(records: readonly StoredEvent[], written: readonly OperationRow[], head: number): void {
    const owner = new Map<string, string | null>();
    for (const e of records) {
      if (e.operation_id === null) continue;
      if (e.kind === 'operation_opened') owner.set(e.operation_id, e.data.owner);
      else if (e.kind === 'owner_changed') owner.set(e.operation_id, null);
    }
    for (const r of written) {
      const id = r.operation_id;
      const was = this.#known.get(id);
      this.#known.delete(id);
      this.#known.set(id, {
        row: {
          ...r,
          first_seq: absoluteSeq(r.first_seq, head),
          last_seq: absoluteSeq(r.last_seq, head),
        },
        owner: owner.has(id) ? owner.get(id)! : (was?.owner ?? null),
      });
    }
    while (this.#known.size > KNOWN_ROWS) this.#known.delete(this.#known.keys().next().value!);
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
 * Durability before acknowledging, in the write's own message after its COMMIT: the statement runs
 * in an implicit transaction of its own, with the session's `synchronous_commit = on`; it takes a
 * transaction id and writes one WAL record (a transactional logical message, ignored by physical
 * replication), so its commit waits until the WAL is flushed up to its commit record, which lies
 * after ours, and the server answers the message only then. A transaction that writes no WAL of its
 * own before its commit record (`SELECT txid_current()` alone) commits asynchronously whatever
 * `synchronous_commit` says, and waited for nothing. The append's transaction commits with
 * `synchronous_commit = off`, so the wait falls after the locks are released: concurrent writers
 * share WAL flushes (the server's group commit) instead of holding the append lock across every
 * fsync. If anything before it fails, the server skips the rest of the message, so an append that
 * failed is never waited on. A record lost in a server crash before this flush was never
 * acknowledged, and neither was anything chained after it (the WAL is sequential).
 */
const FLUSH_WAIT = "SELECT pg_logical_emit_message(true, 'candor-flush', '')";

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
  const changes = foldStates(records, (id) => known.get(id)?.fold);
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
