// SQLite LedgerStore (better-sqlite3, WAL). Appends are linearised by `BEGIN IMMEDIATE`: the head
// is read and the new records inserted under SQLite's single-writer lock, so any number of
// processes appending to one file extend one chain. The commit is small (schema 7, heads.ts): the
// events and one head row per touched operation (state and fold, which answer unresolved()). The
// listing, its counts, sessions and tags are projected after the commit (projector.ts): scheduled
// once the commit's promise has settled, never inside an append, and brought up to the head before
// a reader that must see every event (`fresh`, the default of a writable store).
//
// What one commit leaves behind (the chain head, the head rows it wrote) is remembered by the
// store and reused by its next append while `PRAGMA data_version` (read under the write lock) says
// no other connection has committed since; otherwise it is read again.
import { closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { GENESIS_HASH, type NewEvent, type StoredEvent } from '../events.js';
import { createGroupCommit } from '../group-commit.js';
import {
  createOwnerBook,
  ownerFrom,
  type LeaseRow,
  type OwnerBook,
  type OwnerLeases,
} from '../lease.js';
import { errorText, LedgerError, settle } from '../ledger-error.js';
import type {
  ListingFacets,
  ListingTrail,
  OperationsPage,
  OperationsQuery,
  ReadOptions,
} from '../listing.js';
import { listingFacetsSql, listOperationsSql, type SqlRunner } from '../listing-sql.js';
import { decodeSealed, parseRecord, sealRecord } from '../record.js';
import type { Durability, LedgerQuery, LedgerStore } from '../store.js';
import { sqliteHeadsWriter, type HeadRow, type SqliteHeadsWriter } from './heads.js';
import { sqliteProjector, type SqliteProjector } from './projector.js';
import { checkSqliteSchema, migrateSqlite } from './schema.js';

export interface SqliteLedgerOptions {
  /** Default `process`. See src/ledger/README.md. */
  durability?: Durability;
  /** How long an append waits for another process's write lock. Default 10 s. */
  busyTimeoutMs?: number;
  /** Fail with NOT_FOUND instead of creating a new ledger file. */
  mustExist?: boolean;
  /**
   * Open for reading only (readers such as `ops` and `audit verify`): nothing is created,
   * migrated or written, so a read-only ledger file (or directory) works. Implies `mustExist`.
   */
  readOnly?: boolean;
  /**
   * Called with each commit's projection lag (ms from the commit to the projector's commit that
   * covered it): what `bench/ledger-append.js` reports. Commits of other processes are not timed.
   */
  onProjected?: (lagMs: number) => void;
}

interface BytesRow {
  bytes: Buffer;
}

/** A stored record with the hash its writer computed when sealing it (not computed again). */
interface HashedRow extends BytesRow {
  hash: string;
}

interface Head {
  seq: number;
  hash: string;
}

/** Head rows this connection read or wrote (undefined: the operation has none). */
type KnownRows = Map<string, HeadRow | undefined>;

/** What the last commit of this connection left: valid while `version` is the data_version. */
interface Known {
  version: number;
  head: Head;
  rows: KnownRows;
}

/** Head rows remembered between appends (the most recently used operations). */
const KNOWN_ROWS = 2048;

// A ledger on read-only media (a read-only directory or mount) is read through an `immutable=1`
// URI, which needs URI filenames; better-sqlite3 reads this setting once, when it first opens a
// database. With URIs on, a plain path that starts with "file:" is kept a plain path (fileName).
process.env['SQLITE_USE_URI'] ??= '1';

/** The name SQLite is given for a path: never mistaken for a URI. */
function fileName(path: string): string {
  return path.startsWith('file:') ? `./${path}` : path;
}

const busyTimeout = (options: SqliteLedgerOptions): number =>
  Math.max(0, Math.floor(options.busyTimeoutMs ?? 10_000));

/** Bytes in a ledger's `-wal` file (0 when there is none). */
function walBytes(path: string): number {
  try {
    return statSync(`${path}-wal`).size;
  } catch {
    return 0;
  }
}

/**
 * Opens a WAL ledger whose directory SQLite cannot write (no `-shm` index can be created there):
 * as an immutable file, which is exact when every event is in the main file. Events still in a
 * `-wal` file would be missed, so then the answer is a clear refusal.
 */
function openImmutable(path: string): Database.Database {
  const refuse = (why: string): LedgerError =>
    new LedgerError(
      'OPEN_FAILED',
      `cannot read SQLite ledger at ${path}: its directory is read-only and ${why} (make the directory writable, or copy the ledger's files somewhere writable)`,
    );
  if (walBytes(path) > 0) {
    throw refuse(`${basename(path)}-wal holds events not yet in the main file`);
  }
  try {
    const db = new Database(`${pathToFileURL(resolve(path)).href}?immutable=1`, {
      readonly: true,
      fileMustExist: true,
    });
    checkSqliteSchema(db);
    return db;
  } catch (err) {
    if (err instanceof LedgerError) throw err;
    throw refuse(`SQLite could not read it without creating ${basename(path)}-shm there`);
  }
}

export function openSqliteLedger(path: string, options: SqliteLedgerOptions = {}): LedgerStore {
  const durability = options.durability ?? 'process';
  const readOnly = options.readOnly === true;
  const mustExist = options.mustExist === true || readOnly;
  if (path !== ':memory:' && !mustExist) {
    mkdirSync(dirname(path), { recursive: true });
    // The ledger holds intents and diagnostics: created owner-only (0600) before SQLite opens it
    // (SQLite gives its -wal and -shm files the database file's mode). An existing file keeps its mode.
    closeSync(openSync(path, 'a', 0o600));
  }
  let db: Database.Database;
  try {
    db = new Database(path === ':memory:' ? path : fileName(path), {
      fileMustExist: mustExist,
      readonly: readOnly,
    });
  } catch (err) {
    const code = mustExist ? 'NOT_FOUND' : 'OPEN_FAILED';
    throw new LedgerError(code, `cannot open SQLite ledger at ${path}: ${errorText(err)}`, {
      cause: err,
    });
  }
  try {
    db.pragma(`busy_timeout = ${busyTimeout(options)}`);
    if (readOnly) {
      try {
        checkSqliteSchema(db);
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code !== 'SQLITE_READONLY_DIRECTORY' && code !== 'SQLITE_CANTOPEN') throw err;
        // A WAL ledger is read through its `-shm` index, which SQLite cannot create here
        // (READONLY_DIRECTORY; CANTOPEN when a `-wal` file is there but no `-shm`).
        db.close();
        return new SqliteLedgerStore(openImmutable(path), options);
      }
      return new SqliteLedgerStore(db, options);
    }
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL: a commit is in the OS before append() resolves (survives kill -9 of the
    // process); FULL: the WAL is fsynced at every commit (survives power loss).
    db.pragma(`synchronous = ${durability === 'power' ? 'FULL' : 'NORMAL'}`);
    // A commit and a projector batch write the same hot pages again and again (events, heads,
    // listing and their indexes): checkpointing every 4,000 WAL pages (16 MB) instead of SQLite's
    // 1,000 copies each hot page back to the file a quarter as often (measured: bench/README.md).
    db.pragma('wal_autocheckpoint = 4000');
    migrateSqlite(db);
  } catch (err) {
    db.close();
    if (err instanceof LedgerError) throw err;
    throw new LedgerError(
      'OPEN_FAILED',
      `cannot prepare SQLite ledger at ${path}: ${errorText(err)}`,
      {
        cause: err,
      },
    );
  }
  const store = new SqliteLedgerStore(db, options);
  // A writer that died between a commit and its projection left the listing behind: resumed here.
  store.project();
  return store;
}

/** How long the projector waits before trying again when another process holds the write lock. */
const PROJECT_RETRY_MS = 5;
/**
 * How long after a commit the projector runs: the commits of that interval share one projection
 * transaction, so the listing's hot pages are written once per batch instead of once per commit
 * (run at once, the projector would follow each commit of a sequential writer and save nothing).
 * The lag bound (100 ms, bench/ledger-append.js) is this plus one batch.
 */
const PROJECT_DELAY_MS = 20;

class SqliteLedgerStore implements LedgerStore {
  readonly #db: Database.Database;
  readonly #stmt;
  readonly #writeBatches: (batches: readonly (readonly NewEvent[])[]) => (StoredEvent[] | Error)[];
  readonly #group;
  readonly #heads: SqliteHeadsWriter;
  readonly #projector: SqliteProjector;
  readonly #sql: SqlRunner;
  readonly #onProjected: ((lagMs: number) => void) | undefined;
  readonly leases: OwnerLeases;
  /** What the last successful commit left (null after a failure: everything is read again). */
  #known: Known | null = null;
  /** The last seq this store committed: its projector runs until the cursor reaches it. */
  #committed = 0;
  /** Commits not yet projected, with their time, for `onProjected`. */
  readonly #unprojected: { seq: number; at: number }[] = [];
  #scheduled: NodeJS.Immediate | NodeJS.Timeout | null = null;
  #closed = false;

  constructor(db: Database.Database, options: SqliteLedgerOptions = {}) {
    this.#db = db;
    this.#heads = sqliteHeadsWriter(db);
    this.#projector = sqliteProjector(db);
    this.#onProjected = options.onProjected;
    const cache = new Map<string, Database.Statement>();
    this.#sql = {
      placeholder: () => '?',
      run: (sql, params) =>
        settle(() => {
          this.#live();
          let stmt = cache.get(sql);
          if (!stmt) {
            stmt = db.prepare(sql);
            if (cache.size > 200) cache.clear();
            cache.set(sql, stmt);
          }
          return stmt.all(...params) as Record<string, unknown>[];
        }),
    };
    this.#stmt = {
      head: db.prepare('SELECT seq, hash FROM ledger_events ORDER BY seq DESC LIMIT 1'),
      insert: db.prepare(
        `INSERT INTO ledger_events (seq, hash, bytes, kind, operation_id, session_id, correlation_id)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
      // Changes when another connection commits (never for this connection's own commits).
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
      read: db.prepare('SELECT bytes FROM ledger_events WHERE seq >= ? ORDER BY seq LIMIT ?'),
      byOperation: db.prepare(
        'SELECT seq, bytes, operation_id FROM ledger_events WHERE operation_id = ? ORDER BY seq',
      ),
      // Admission's read: only the events that name an owner, decoded with their stored hash.
      ownership: db.prepare(
        `SELECT hash, bytes FROM ledger_events WHERE operation_id = ?
           AND kind IN ('operation_opened', 'owner_changed') ORDER BY seq`,
      ),
      // The projector's batches run without waiting for another process's lock (see #step).
      busyNone: db.prepare('PRAGMA busy_timeout = 0'),
      busyBack: db.prepare(`PRAGMA busy_timeout = ${busyTimeout(options)}`),
      // Operations carrying the tag, whole, plus the matching non-operation events. An
      // operation's first session is its listing row's (schema 4 writes no `s:` tag for it).
      // Events past the projection's cursor have no tags or rows yet: their own columns answer
      // (the seq range from the cursor is short), so a query never waits for the projector.
      bySession: db.prepare(
        `SELECT seq, bytes FROM ledger_events WHERE operation_id IN
           (SELECT operation_id FROM ledger_tags WHERE tag = 's:' || @id
            UNION SELECT operation_id FROM ledger_operations WHERE session_id = @id
            UNION SELECT operation_id FROM ledger_events
              WHERE seq > (SELECT seq FROM ledger_projection) AND session_id = @id
                AND operation_id IS NOT NULL)
         UNION ALL
         SELECT seq, bytes FROM ledger_events WHERE operation_id IS NULL AND session_id = @id
         ORDER BY seq`,
      ),
      byCorrelation: db.prepare(
        `SELECT seq, bytes FROM ledger_events WHERE operation_id IN
           (SELECT operation_id FROM ledger_tags WHERE tag = 'c:' || @id
            UNION SELECT operation_id FROM ledger_events
              WHERE seq > (SELECT seq FROM ledger_projection) AND correlation_id = @id
                AND operation_id IS NOT NULL)
         UNION ALL
         SELECT seq, bytes FROM ledger_events WHERE operation_id IS NULL AND correlation_id = @id
         ORDER BY seq`,
      ),
      byIdempotencyKey: db.prepare(
        `SELECT seq, bytes, operation_id FROM ledger_events WHERE operation_id IN
           (SELECT operation_id FROM ledger_tags WHERE tag = 'k:' || ?)
         ORDER BY seq`,
      ),
      // A key is not a column: the unprojected openings are read and matched (few, and recent).
      pendingOpenings: db.prepare(
        `SELECT bytes FROM ledger_events
         WHERE seq > (SELECT seq FROM ledger_projection) AND kind = 'operation_opened'`,
      ),
      // The heads hold each operation's state, written in the commit; the partial index holds
      // exactly the unresolved ones, in id order.
      unresolved: db
        .prepare(
          `SELECT operation_id FROM ledger_heads INDEXED BY ledger_heads_unresolved
           WHERE state IN ('open', 'unknown') ORDER BY operation_id`,
        )
        .pluck(),
      lease: db.prepare(
        'SELECT owner, expires_at, heartbeat_at FROM ledger_leases WHERE owner = ?',
      ),
      heartbeat: db.prepare(
        `INSERT INTO ledger_leases (owner, expires_at, heartbeat_at) VALUES (?, ?, ?)
         ON CONFLICT (owner) DO UPDATE SET expires_at = excluded.expires_at,
           heartbeat_at = excluded.heartbeat_at`,
      ),
      release: db.prepare(
        'UPDATE ledger_leases SET expires_at = min(expires_at, ?) WHERE owner = ?',
      ),
    };
    const st = this.#stmt;
    this.leases = {
      heartbeat: (owner, at, expiresAt) =>
        settle(() => {
          this.#live();
          st.heartbeat.run(owner, expiresAt, at);
        }),
      release: (owner, at) =>
        settle(() => {
          this.#live();
          st.release.run(at, owner);
        }),
      leases: (owners) =>
        settle(() => {
          this.#live();
          return owners.flatMap((o) => {
            const row = st.lease.get(o) as LeaseRow | undefined;
            return row ? [row] : [];
          });
        }),
    };
    // One IMMEDIATE transaction for all batches. With several batches (group commit) each gets a
    // savepoint, so a batch that fails rolls back alone and the others still commit together.
    const writeOne = db.transaction(
      (events: readonly NewEvent[], head: Head, book: OwnerBook, rows: KnownRows) =>
        this.#insert(events, head, book, rows),
    );
    const writeAll = db.transaction((batches: readonly (readonly NewEvent[])[]) => {
      // Under the write lock: reuse what the last commit left unless another connection wrote.
      const version = this.#stmt.dataVersion.get() as number;
      const known = this.#known?.version === version ? this.#known : null;
      this.#known = null;
      let head: Head;
      if (known) head = { ...known.head };
      else {
        const row = this.#stmt.head.get() as Head | undefined;
        head = { seq: row?.seq ?? 0, hash: row?.hash ?? GENESIS_HASH };
      }
      const rows: KnownRows = known?.rows ?? new Map<string, HeadRow | undefined>();
      // Takeovers are admitted under the write lock (src/ledger/lease.ts).
      const book = createOwnerBook(
        (id) =>
          ownerFrom(
            (this.#stmt.ownership.all(id) as HashedRow[]).map((r) => decodeSealed(r.bytes, r.hash)),
          ),
        (owner) => this.#stmt.lease.get(owner) as LeaseRow | undefined,
      );
      const result =
        batches.length === 1
          ? [this.#insert(batches[0]!, head, book, rows)]
          : batches.map((events): StoredEvent[] | Error => {
              const before = { ...head };
              try {
                return writeOne(events, head, book, rows);
              } catch (err) {
                Object.assign(head, before);
                return err instanceof Error ? err : new Error(String(err));
              }
            });
      return { result, next: { version, head, rows } };
    });
    this.#writeBatches = (batches) => {
      const { result, next } = writeAll.immediate(batches);
      // Committed: the next append may start from here.
      while (next.rows.size > KNOWN_ROWS) next.rows.delete(next.rows.keys().next().value!);
      this.#known = next;
      if (next.head.seq > this.#committed) {
        this.#committed = next.head.seq;
        if (this.#onProjected)
          this.#unprojected.push({ seq: next.head.seq, at: performance.now() });
        this.#schedule(PROJECT_DELAY_MS);
      }
      return result;
    };
    this.#group = createGroupCommit((batches) => settle(() => this.#writeBatches(batches)));
  }

  /**
   * Inserts one batch after `head` (advanced in place). Runs inside the write transaction;
   * `known` holds head rows as committed or as written by earlier batches of this transaction,
   * and receives this batch's rows only once the whole batch is written.
   */
  #insert(
    events: readonly NewEvent[],
    head: Head,
    book: OwnerBook,
    known: KnownRows,
  ): StoredEvent[] {
    // Seal first: an unencodable event throws before anything of its batch is written.
    let prev = head.hash;
    const sealed = events.map((e, i) => {
      const s = sealRecord(e, head.seq + 1 + i, prev);
      prev = s.record.hash;
      return s;
    });
    const refused = book.admit(events);
    if (refused) throw refused;
    const st = this.#stmt;
    for (const { record, bytes } of sealed) {
      st.insert.run(
        record.seq,
        record.hash,
        bytes,
        record.kind,
        record.operation_id,
        record.session_id,
        record.correlation_id,
      );
    }
    const written = this.#heads.apply(
      sealed.map((s) => s.record),
      (id) => (known.has(id) ? known.get(id) : this.#heads.get(id)),
    );
    if (sealed.length > 0) {
      head.seq += sealed.length;
      head.hash = prev;
    }
    // Most recently used last (the oldest are dropped after the commit).
    for (const [id, h] of written) {
      known.delete(id);
      known.set(id, h);
    }
    // Returned records are decoded from the stored text (no aliasing of the caller's objects).
    return sealed.map(({ record, text }) => decodeSealed(text, record.hash));
  }

  #live(): void {
    if (this.#closed) throw new LedgerError('CLOSED', 'ledger: store is closed');
  }

  /**
   * Runs the projector later (coalesced; 0: in the next turn), never inside an append, so the
   * caller of append() (the engine, about to dispatch) runs first. A read-only store never does.
   */
  #schedule(delayMs: number): void {
    if (this.#scheduled !== null || this.#closed || this.#db.readonly) return;
    const step = (): void => {
      this.#scheduled = null;
      this.#step();
    };
    // Unreferenced: a pending projection never keeps a process alive (the next open resumes it).
    this.#scheduled = (delayMs > 0 ? setTimeout(step, delayMs) : setImmediate(step)).unref();
  }

  /** One projector batch, without waiting for another process's write lock (it retries). */
  #step(): void {
    if (this.#closed) return;
    let cursor: number;
    try {
      // Prepared once (db.pragma() compiles its statement on every call).
      this.#stmt.busyNone.get();
      try {
        cursor = this.#projector.batch().cursor;
      } finally {
        this.#stmt.busyBack.get();
      }
    } catch (err) {
      // Busy (another writer holds the lock): later. Anything else surfaces at the next fresh
      // read or at close, which run the same projection in the caller's path.
      if ((err as { code?: unknown }).code === 'SQLITE_BUSY') this.#schedule(PROJECT_RETRY_MS);
      return;
    }
    this.#projected(cursor);
    if (cursor < this.#committed) this.#schedule(0);
  }

  #projected(cursor: number): void {
    if (!this.#onProjected) return;
    const now = performance.now();
    while (this.#unprojected.length > 0 && this.#unprojected[0]!.seq <= cursor) {
      this.#onProjected(now - this.#unprojected.shift()!.at);
    }
  }

  /**
   * Projects every event stored when it is called (read your own writes, and other processes'
   * too). Synchronous: the caller's answer waits for it. A read-only store cannot and does not.
   */
  project(): void {
    this.#live();
    this.#projectAll();
  }

  /** Projects up to `until` (default: the head as it is now). */
  #projectAll(until?: number): void {
    if (this.#db.readonly) return;
    const { cursor: from, head: now } = this.#projector.position();
    const head = Math.min(until ?? now, now);
    if (from >= head) return;
    for (;;) {
      const { cursor, projected } = this.#projector.batch(head);
      this.#projected(cursor);
      if (projected === 0 || cursor >= head) return;
    }
  }

  /** How far the listing is behind the events (undefined: not at all). */
  #trails(): ListingTrail | undefined {
    const { cursor, head } = this.#projector.position();
    if (cursor >= head) return undefined;
    const at = this.#projector.oldestPendingAt();
    return { events: head - cursor, ms: at === null ? 0 : Math.max(0, Date.now() - at) };
  }

  /**
   * Brings the listing up to date when asked to and able to, and says how far it still trails.
   * Not fresh: only this store's own commits are projected first (it reads its own writes, and
   * never waits for another process's lock because of another process's events).
   */
  #prepareRead(options: ReadOptions | undefined): ListingTrail | undefined {
    this.#live();
    this.#projectAll(options?.fresh === false ? this.#committed : undefined);
    return this.#trails();
  }

  append(events: readonly NewEvent[]): Promise<StoredEvent[]> {
    if (this.#closed || events.length === 0) {
      return settle(() => {
        this.#live();
        if (events.length === 0) return [];
        const [result] = this.#writeBatches([events]);
        if (result instanceof Error) throw result;
        return result ?? [];
      });
    }
    // Concurrent appends (those issued in one turn of the event loop) share one transaction: one
    // commit, and in `power` mode one fsync of the WAL. Each resolves only after that commit.
    return this.#group.submit(events);
  }

  read(from = 1, limit = -1): Promise<StoredEvent[]> {
    return this.#rows(() => this.#stmt.read.all(from, limit < 0 ? -1 : limit));
  }

  query(q: LedgerQuery): Promise<StoredEvent[]> {
    return this.#rows(() => {
      if ('operation_id' in q) return this.#stmt.byOperation.all(q.operation_id);
      if ('session_id' in q) return this.#stmt.bySession.all({ id: q.session_id });
      if ('correlation_id' in q) return this.#stmt.byCorrelation.all({ id: q.correlation_id });
      return this.#byIdempotencyKey(q.idempotency_key);
    });
  }

  /** Tagged operations plus those opened with the key past the cursor, in one read snapshot. */
  #byIdempotencyKey(key: string): BytesRow[] {
    return this.#db.transaction(() => {
      const rows = this.#stmt.byIdempotencyKey.all(key) as (BytesRow & {
        seq: number;
        operation_id: string;
      })[];
      const have = new Set(rows.map((r) => r.operation_id));
      const more = new Set<string>();
      for (const r of this.#stmt.pendingOpenings.all() as BytesRow[]) {
        const e = parseRecord(r.bytes);
        if (e.kind !== 'operation_opened' || e.data.idempotency_key !== key) continue;
        if (e.operation_id !== null && !have.has(e.operation_id)) more.add(e.operation_id);
      }
      if (more.size === 0) return rows;
      for (const id of more) rows.push(...(this.#stmt.byOperation.all(id) as typeof rows));
      return rows.sort((a, b) => a.seq - b.seq);
    })();
  }

  unresolved(): Promise<string[]> {
    return settle(() => {
      this.#live();
      return this.#stmt.unresolved.all() as string[];
    });
  }

  async operations(q: OperationsQuery): Promise<OperationsPage> {
    const trails = await settle(() => this.#prepareRead(q));
    const page = await listOperationsSql(this.#sql, q, {
      prefixUpper: '\u{10ffff}',
      binary: '',
      partialIndexes: {
        attention: 'ledger_operations_attention',
        rare: 'ledger_operations_rare',
      },
    });
    return trails ? { ...page, trails } : page;
  }

  async facets(sessions = 200, options?: ReadOptions): Promise<ListingFacets> {
    const trails = await settle(() => this.#prepareRead(options));
    const facets = await listingFacetsSql(this.#sql, sessions);
    return trails ? { ...facets, trails } : facets;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#group.drain();
    if (this.#scheduled !== null) {
      clearTimeout(this.#scheduled as NodeJS.Timeout);
      clearImmediate(this.#scheduled as NodeJS.Immediate);
      this.#scheduled = null;
    }
    try {
      // What was committed is projected before the store goes (the next open would otherwise).
      this.#projectAll();
    } catch {
      // The next writable open resumes from the cursor.
    }
    this.#db.close();
  }

  #rows(run: () => unknown[]): Promise<StoredEvent[]> {
    return settle(() => {
      this.#live();
      return (run() as BytesRow[]).map((r) => parseRecord(r.bytes));
    });
  }
}
