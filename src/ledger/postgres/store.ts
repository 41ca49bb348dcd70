// PostgreSQL LedgerStore (pg). Appends are linearised by a transaction-scoped advisory lock per
// ledger schema: every client, on any host, reads the head and inserts after it while holding the
// lock, so the chain never forks (and the seq primary key would refuse a fork anyway). Appends
// queued in one process are group-committed. The append lock covers server work only: the client
// encodes records around their seq and previous hash and folds the listing under per-operation
// locks, and one `candor_append` call (append.ts) seals and writes under the append lock. A write
// takes one message (operation locks, a guard on what this store remembers, the call, COMMIT and
// a WAL flush wait outside the locks) or, when it must read first, two. The commit holds the
// events and one head per touched operation (schema 6); the listing, counts, sessions and tags are
// projected after it (projector.ts), on a connection of their own, never inside an append.
import pg from 'pg';
import { decodeFold, encodeFold } from '../../core/fold.js';
import type { OperationState } from '../../core/vocabulary.js';
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
import { foldHeads, type HeadRow } from '../heads.js';
import type {
  ListingFacets,
  ListingTrail,
  OperationsPage,
  OperationsQuery,
  ReadOptions,
} from '../listing.js';
import {
  listingFacetsSql,
  listOperationsSql,
  type SqlRow,
  type SqlRunner,
} from '../listing-sql.js';
import { parseRecord } from '../record.js';
import type { Durability, LedgerQuery, LedgerStore } from '../store.js';
import {
  absoluteSeq,
  ledgerLockKey,
  relativeRecords,
  serverAppendSql,
  STALE_FOLD,
  storedRecords,
  templateOf,
  type HeadWrite,
  type Template,
} from './append.js';
import { RELATIVE_SEQ } from './listing.js';
import { projectBatch, projectionTrail } from './projector.js';
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
  /**
   * Default true: this store projects the listing (after its commits, at open, before fresh
   * reads). False: a reader that must not write (`ops`, `audit`): it answers from the listing as
   * it stands and says how far it trails.
   */
  projects?: boolean;
  /**
   * Called with each commit's projection lag (ms from the commit to the end of the projector batch
   * of this store that found it projected; an upper bound when another gateway projected it).
   */
  onProjected?: (lagMs: number) => void;
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
  const poolOf = (max: number): pg.Pool => {
    const p = new pg.Pool({
      connectionString: url,
      max,
      options: `-c search_path=${schema} -c synchronous_commit=on`,
      connectionTimeoutMillis: t.connect_ms,
      statement_timeout: t.statement_ms,
      query_timeout: t.query_ms,
      idle_in_transaction_session_timeout: t.idle_in_transaction_ms,
      keepAlive: true,
    });
    // An idle connection dropped by the server must not crash the process; the next query fails.
    p.on('error', () => undefined);
    return p;
  };
  const pool = poolOf(Math.max(1, options.poolSize ?? 4));
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
  // The projector's own connection (made when first used): an append never waits for it.
  const store = new PostgresLedgerStore(pool, poolOf(1), schema, url, {
    projects: options.projects !== false,
    onProjected: options.onProjected,
  });
  // A writer that died between a commit and its projection left the listing behind: resumed here
  // (unless another gateway is projecting, which projects those events too).
  await store.resume();
  return store;
}

interface BytesRow {
  bytes: Buffer;
}

/**
 * What this store knows of an operation from its own commits: its head as written, and its owner
 * while no takeover has been seen since its opening (null: not known).
 */
interface Known {
  head: HeadRow;
  owner: string | null;
}

/**
 * How long after a commit the projector runs: the commits of that interval share one batch (run
 * at once, it would follow each commit of a sequential writer and save nothing). Also the wait
 * before trying again while another gateway projects.
 */
const PROJECT_DELAY_MS = 20;

/** How long a view's read waits for another gateway's projector batch before it answers as is. */
const VIEW_WAIT_MS = 250;

/** Operations remembered between appends (the most recently used). */
const KNOWN_ROWS = 2048;

/** What the server-sealed write of a flush returned. */
interface Written {
  results: (StoredEvent[] | Error)[];
  stored: number;
}

class PostgresLedgerStore implements LedgerStore {
  readonly #pool: pg.Pool;
  readonly #projectorPool: pg.Pool;
  /** False: never projects (see PostgresLedgerOptions.projects). */
  readonly #projects: boolean;
  readonly #onProjected: ((lagMs: number) => void) | undefined;
  /** Commits not yet seen projected, with their time, for `onProjected`. */
  readonly #unprojected: { seq: number; at: number }[] = [];
  readonly #group;
  /** Transaction-scoped advisory lock key: one projector batch at a time on this ledger. */
  readonly #projectLockKey: string;
  /** The last seq this store committed: its projector runs until the cursor reaches it. */
  #committed = 0;
  #scheduled: NodeJS.Timeout | null = null;
  /** The projection running in this store (one at a time), if any. */
  #projecting: Promise<void> = Promise.resolve();
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

  constructor(
    pool: pg.Pool,
    projectorPool: pg.Pool,
    schema: string,
    url: string,
    projection: { projects: boolean; onProjected: ((lagMs: number) => void) | undefined },
  ) {
    this.#pool = pool;
    this.#projects = projection.projects;
    this.#onProjected = projection.onProjected;
    this.#projectorPool = projectorPool;
    this.#url = url;
    this.#schema = schema;
    this.#channel = `candor_ledger_${schema}`;
    this.#leaseChannel = `candor_leases_${schema}`;
    this.#lockKey = ledgerLockKey('append', schema);
    this.#projectLockKey = ledgerLockKey('project', schema);
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
   * operation's lock, nobody else writes that operation's events or head, so what it read
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
    const known = new Map<string, HeadRow | undefined>();
    const conditions: string[] = [];
    const assumedNew: string[] = [];
    for (const id of touched) {
      const k = this.#known.get(id);
      if (k) {
        // An attempt of an operation the batch does not open is admitted on a known owner only.
        if (k.owner === null && operations.includes(id)) return null;
        known.set(id, k.head);
        conditions.push(
          `(SELECT last_seq FROM ledger_heads WHERE operation_id = ${lit(id)}) = ${k.head.last_seq}`,
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
        `NOT EXISTS (SELECT 1 FROM ledger_heads WHERE operation_id IN (${assumedNew.map(lit).join(', ')}))`,
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
   * Round trip 1 takes the touched operations' locks and reads their heads (and owners and
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
    sql.push(headsSql(touched));
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
    const rows = headsOf((replies[at] as pg.QueryResult<StoredHead>).rows);
    const known = new Map<string, HeadRow | undefined>(touched.map((id) => [id, rows.get(id)]));
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
   * Admits the batches, encodes their records around seq and previous hash, folds the heads with
   * relative seqs, and sends `prefix`, one `candor_append` call (append.ts) and COMMIT in one
   * message: the server takes the append lock, assigns the seqs, hashes, inserts and writes the
   * heads, so the lock covers server work only.
   */
  async #write(
    client: pg.PoolClient,
    batches: readonly (readonly NewEvent[])[],
    known: ReadonlyMap<string, HeadRow | undefined>,
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
    const heads = foldHeads(relativeRecords(templates), (id) => known.get(id));
    const writes = headWrites(heads.heads);
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
    this.#remember(records, heads.heads, before.seq);
    this.#committed = Math.max(this.#committed, before.seq + records.length);
    if (this.#onProjected) this.#unprojected.push({ seq: this.#committed, at: performance.now() });
    this.#schedule(PROJECT_DELAY_MS);
    let next = 0;
    return {
      results: results.map((r) => (typeof r === 'number' ? records.slice(next, (next += r)) : r)),
      stored: records.length,
    };
  }

  /** Remembers the heads a commit wrote, and the owners it set (a takeover forgets the owner). */
  #remember(
    records: readonly StoredEvent[],
    written: ReadonlyMap<string, HeadRow>,
    head: number,
  ): void {
    const owner = new Map<string, string | null>();
    for (const e of records) {
      if (e.operation_id === null) continue;
      if (e.kind === 'operation_opened') owner.set(e.operation_id, e.data.owner);
      else if (e.kind === 'owner_changed') owner.set(e.operation_id, null);
    }
    for (const [id, h] of written) {
      const was = this.#known.get(id);
      this.#known.delete(id);
      this.#known.set(id, {
        head: { ...h, last_seq: absoluteSeq(h.last_seq, head) },
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
    // Operations carrying the tag, whole, plus the matching non-operation events. Events past the
    // projection's cursor have no tags yet: their own columns answer, in the same statement (so
    // in one snapshot), so a query never waits for the projector.
    if ('idempotency_key' in q) return this.#byKey(q.idempotency_key);
    const [tag, column, value] =
      'session_id' in q
        ? [`s:${q.session_id}`, 'session_id', q.session_id]
        : [`c:${q.correlation_id}`, 'correlation_id', q.correlation_id];
    return this.#rows(
      `SELECT seq, bytes FROM ledger_events WHERE operation_id IN
         (SELECT operation_id FROM ledger_tags WHERE tag = $1
          UNION SELECT operation_id FROM ledger_events
            WHERE seq > (SELECT seq FROM ledger_projection) AND operation_id IS NOT NULL
              AND ${column} = $2)
       UNION ALL SELECT seq, bytes FROM ledger_events WHERE operation_id IS NULL AND ${column} = $2
       ORDER BY seq`,
      [noNul(tag), value],
    );
  }

  /**
   * Operations opened with `key`, whole. A key is not a column: the openings past the cursor are
   * read and matched here (few, and recent; whatever their params hold), then the operations'
   * events read, both in one snapshot (a read-only REPEATABLE READ transaction).
   */
  async #byKey(key: string): Promise<StoredEvent[]> {
    this.#live();
    const client = await this.#pool.connect();
    let failed: Error | undefined;
    try {
      const replies = (await client.query(
        `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
         SELECT bytes FROM ledger_events
          WHERE seq > (SELECT seq FROM ledger_projection) AND kind = 'operation_opened'`,
      )) as unknown as pg.QueryResult<BytesRow>[];
      const pending = replies[1]!.rows.flatMap((r) => {
        const e = parseRecord(r.bytes);
        return e.kind === 'operation_opened' && e.data.idempotency_key === key && e.operation_id
          ? [e.operation_id]
          : [];
      });
      const res = await client.query<BytesRow>(
        `SELECT seq, bytes FROM ledger_events WHERE operation_id IN
           (SELECT operation_id FROM ledger_tags WHERE tag = $1 UNION SELECT unnest($2::text[]))
         ORDER BY seq`,
        [noNul(`k:${key}`), pending],
      );
      await client.query('COMMIT');
      return res.rows.map((r) => parseRecord(r.bytes));
    } catch (err) {
      failed = err instanceof Error ? err : new Error(String(err));
      throw err;
    } finally {
      client.release(failed);
    }
  }

  async unresolved(): Promise<string[]> {
    this.#live();
    const res = await this.#pool.query<{ operation_id: string }>(
      `SELECT operation_id FROM ledger_heads WHERE state IN ('open', 'unknown')
       ORDER BY operation_id COLLATE "C"`,
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

  async operations(q: OperationsQuery): Promise<OperationsPage> {
    const trails = await this.#prepareRead(q);
    const page = await listOperationsSql(this.#sql, q, {
      prefixUpper: '\u{10ffff}',
      binary: ' COLLATE "C"',
    });
    return trails ? { ...page, trails } : page;
  }

  async facets(sessions = 200, options?: ReadOptions): Promise<ListingFacets> {
    const trails = await this.#prepareRead(options);
    const facets = await listingFacetsSql(this.#sql, sessions);
    return trails ? { ...facets, trails } : facets;
  }

  /**
   * Fresh (the default): the listing is first brought up to every event stored at the call,
   * waiting for another gateway's batch if one runs, so that readers that decide something are
   * never answered from a stale listing. Not fresh (a view): the same, but waiting at most
   * VIEW_WAIT_MS for another gateway's batch, and a projection that fails is left to the others;
   * the answer then stands as it is. Either way, says how far the listing still trails.
   */
  async #prepareRead(options: ReadOptions | undefined): Promise<ListingTrail | undefined> {
    this.#live();
    if (this.#projects) {
      if (options?.fresh !== false) await this.project();
      else await this.#projectHead(VIEW_WAIT_MS).catch(() => undefined);
    }
    return projectionTrail((sql) => this.#pool.query(sql));
  }

  /**
   * Projects every event stored when it is called (this store's and every other writer's),
   * waiting for another gateway's batch if one runs.
   */
  async project(): Promise<void> {
    this.#live();
    await this.#projectHead(true);
  }

  async #projectHead(wait: boolean | number): Promise<void> {
    // One read when the listing is up to date (the usual case): no projector transaction.
    const res = await this.#pool.query<{ head: string; cursor: string }>(
      `SELECT coalesce(max(seq), 0) AS head, (SELECT seq FROM ledger_projection) AS cursor
       FROM ledger_events`,
    );
    const { head, cursor } = res.rows[0]!;
    if (Number(cursor) >= Number(head)) return;
    await this.#projectUpTo(Number(head), wait);
  }

  /**
   * At open: resumes what a writer that died left unprojected (up to the head at open, so that a
   * busy fleet's stream does not hold the open), unless another gateway projects.
   */
  async resume(): Promise<void> {
    if (!this.#projects) return;
    // On failure: resumed by the next commit, fresh read or close, here or in another gateway.
    await this.#projectHead(false).catch(() => undefined);
  }

  /**
   * Runs the projector later (coalesced), never inside an append, so the caller of append() (the
   * engine, about to dispatch) goes first. Unreferenced: a pending projection never keeps a
   * process alive (the next open, any fresh read or another gateway's projector does it).
   */
  #schedule(delayMs: number): void {
    if (this.#scheduled !== null || this.#closed) return;
    this.#scheduled = setTimeout(() => {
      this.#scheduled = null;
      if (this.#closed) return;
      this.#projectUpTo(this.#committed, false).then(
        (busy) => {
          // Another gateway is projecting: it covers our events, unless it ended just before
          // they were visible to it, so look again a little later.
          if (busy) this.#schedule(PROJECT_DELAY_MS);
        },
        // A failure surfaces at the next fresh read or at close, which project in the caller's
        // path; the next commit schedules again.
        () => undefined,
      );
    }, delayMs).unref();
  }

  /**
   * Projects batches until the cursor reaches `until` (undefined: nothing is left), one
   * projection at a time in this store. Resolves true when another gateway held the projector
   * lock, `wait` was false and the cursor had not reached `until` yet.
   */
  #projectUpTo(until: number | undefined, wait: boolean | number): Promise<boolean> {
    if (!this.#projects) return Promise.resolve(false);
    const run = this.#projecting.then(async () => {
      const client = await this.#projectorPool.connect();
      // A checked-out client has no pool listener: a connection that dies mid-batch (a server
      // restart, a terminated backend) must fail this projection, not the process.
      const ignore = (): void => undefined;
      client.on('error', ignore);
      let failed: Error | undefined;
      try {
        for (;;) {
          const r = await projectBatch(client, this.#projectLockKey, wait, until);
          if ('busy' in r) {
            this.#projected(r.busy);
            return until === undefined || r.busy < until;
          }
          this.#projected(r.cursor);
          if (r.projected === 0 || (until !== undefined && r.cursor >= until)) return false;
        }
      } catch (err) {
        failed = err instanceof Error ? err : new Error(String(err));
        throw err;
      } finally {
        client.off('error', ignore);
        client.release(failed);
      }
    });
    this.#projecting = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  #projected(cursor: number): void {
    if (!this.#onProjected) return;
    const now = performance.now();
    while (this.#unprojected.length > 0 && this.#unprojected[0]!.seq <= cursor) {
      this.#onProjected(now - this.#unprojected.shift()!.at);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#group.drain();
    if (this.#scheduled !== null) clearTimeout(this.#scheduled);
    this.#scheduled = null;
    // What this store committed is projected before it goes (the next open, a fresh read or
    // another gateway would otherwise); a failure here loses nothing, the events are stored.
    if (this.#committed > 0) await this.#projectUpTo(this.#committed, true).catch(() => undefined);
    await this.#projecting;
    for (const w of this.#watchers) await w.end().catch(() => undefined);
    this.#watchers.clear();
    await this.#pool.end();
    await this.#projectorPool.end();
  }

  async #rows(sql: string, params: unknown[]): Promise<StoredEvent[]> {
    this.#live();
    const res = await this.#pool.query<BytesRow>(sql, params);
    return res.rows.map((r) => parseRecord(r.bytes));
  }
}

const lit = (v: string | null): string => (v === null ? 'NULL' : pg.escapeLiteral(v));

/** A tag as the projector writes it (U+0000 shown as U+FFFD: see listing.ts `lit`). */
const noNul = (tag: string): string => tag.replaceAll('\u0000', '\ufffd');

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

interface StoredHead {
  operation_id: string;
  state: OperationState | null;
  last_seq: string;
  fold: string | null;
}

/** The heads of these operations, as `#readThenWrite` reads them under their locks. */
const headsSql = (ids: readonly string[]): string =>
  `SELECT operation_id, state, last_seq, fold FROM ledger_heads WHERE operation_id IN (${
    ids.length > 0 ? ids.map(lit).join(', ') : 'NULL'
  })`;

const headsOf = (rows: readonly StoredHead[]): Map<string, HeadRow> =>
  new Map(
    rows.map((r) => [
      r.operation_id,
      { state: r.state, last_seq: Number(r.last_seq), fold: decodeFold(r.fold, r.state) },
    ]),
  );

/** The heads a commit folded (with relative seqs), as `candor_append` writes them. */
const headWrites = (heads: ReadonlyMap<string, HeadRow>): HeadWrite[] =>
  [...heads].map(([id, h]) => ({
    operation_id: id,
    state: h.state,
    offset: h.last_seq - RELATIVE_SEQ,
    fold: encodeFold(h.fold),
  }));

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
