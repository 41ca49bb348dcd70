// SQLite LedgerStore (better-sqlite3, WAL). Appends are linearised by `BEGIN IMMEDIATE`: the head
// is read and the new records inserted under SQLite's single-writer lock, so any number of
// processes appending to one file extend one chain. The listing (which also answers unresolved())
// is written in the same transaction as the events it derives from.
//
// What one commit leaves behind (the head, the listing rows it wrote) is remembered by the store
// and reused by its next append while `PRAGMA data_version` (read under the write lock) says no
// other connection has committed since; otherwise it is read again.
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
import type { ListingFacets, OperationRow, OperationsPage, OperationsQuery } from '../listing.js';
import { listingFacetsSql, listOperationsSql, type SqlRunner } from '../listing-sql.js';
import { operationTags } from '../projection.js';
import { decodeSealed, parseRecord, sealRecord } from '../record.js';
import type { Durability, LedgerQuery, LedgerStore } from '../store.js';
import { sqliteListingWriter, type SqliteListingWriter } from './listing.js';
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
}

interface BytesRow {
  bytes: Buffer;
}

interface Head {
  seq: number;
  hash: string;
}

/** Listing rows this connection read or wrote (undefined: the operation has no row). */
type KnownRows = Map<string, OperationRow | undefined>;

/** What the last commit of this connection left: valid while `version` is the data_version. */
interface Known {
  version: number;
  head: Head;
  rows: KnownRows;
}

/** Listing rows remembered between appends (the most recently used operations). */
const KNOWN_ROWS = 2048;

// A ledger on read-only media (a read-only directory or mount) is read through an `immutable=1`
// URI, which needs URI filenames; better-sqlite3 reads this setting once, when it first opens a
// database. With URIs on, a plain path that starts with "file:" is kept a plain path (fileName).
process.env['SQLITE_USE_URI'] ??= '1';

/** The name SQLite is given for a path: never mistaken for a URI. */
function fileName(path: string): string {
  return path.startsWith('file:') ? `./${path}` : path;
}

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
    db.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 10_000))}`);
    if (readOnly) {
      try {
        checkSqliteSchema(db);
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code !== 'SQLITE_READONLY_DIRECTORY' && code !== 'SQLITE_CANTOPEN') throw err;
        // A WAL ledger is read through its `-shm` index, which SQLite cannot create here
        // (READONLY_DIRECTORY; CANTOPEN when a `-wal` file is there but no `-shm`).
        db.close();
        return new SqliteLedgerStore(openImmutable(path));
      }
      return new SqliteLedgerStore(db);
    }
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL: a commit is in the OS before append() resolves (survives kill -9 of the
    // process); FULL: the WAL is fsynced at every commit (survives power loss).
    db.pragma(`synchronous = ${durability === 'power' ? 'FULL' : 'NORMAL'}`);
    // A commit writes about a dozen pages (events, tags, listing and their indexes), mostly the
    // same hot pages again: checkpointing every 4,000 WAL pages (16 MB) instead of SQLite's 1,000
    // copies each hot page back to the file a quarter as often (measured: bench/README.md).
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
  return new SqliteLedgerStore(db);
}

class SqliteLedgerStore implements LedgerStore {
  readonly #db: Database.Database;
  readonly #stmt;
  readonly #writeBatches: (batches: readonly (readonly NewEvent[])[]) => (StoredEvent[] | Error)[];
  readonly #group;
  readonly #listing: SqliteListingWriter;
  readonly #sql: SqlRunner;
  readonly leases: OwnerLeases;
  /** What the last successful commit left (null after a failure: everything is read again). */
  #known: Known | null = null;
  #closed = false;

  constructor(db: Database.Database) {
    this.#db = db;
    this.#listing = sqliteListingWriter(db);
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
      tag: db.prepare('INSERT OR IGNORE INTO ledger_tags (tag, operation_id) VALUES (?, ?)'),
      read: db.prepare('SELECT bytes FROM ledger_events WHERE seq >= ? ORDER BY seq LIMIT ?'),
      byOperation: db.prepare(
        'SELECT bytes FROM ledger_events WHERE operation_id = ? ORDER BY seq',
      ),
      // Operations carrying the tag, whole, plus the matching non-operation events. An
      // operation's first session is its listing row's (schema 4 writes no `s:` tag for it).
      bySession: db.prepare(
        `SELECT seq, bytes FROM ledger_events WHERE operation_id IN
           (SELECT operation_id FROM ledger_tags WHERE tag = 's:' || @id
            UNION SELECT operation_id FROM ledger_operations WHERE session_id = @id)
         UNION ALL
         SELECT seq, bytes FROM ledger_events WHERE operation_id IS NULL AND session_id = @id
         ORDER BY seq`,
      ),
      byCorrelation: db.prepare(
        `SELECT seq, bytes FROM ledger_events WHERE operation_id IN
           (SELECT operation_id FROM ledger_tags WHERE tag = 'c:' || @id)
         UNION ALL
         SELECT seq, bytes FROM ledger_events WHERE operation_id IS NULL AND correlation_id = @id
         ORDER BY seq`,
      ),
      byIdempotencyKey: db.prepare(
        `SELECT bytes FROM ledger_events WHERE operation_id IN
           (SELECT operation_id FROM ledger_tags WHERE tag = 'k:' || ?)
         ORDER BY seq`,
      ),
      // The listing row holds each operation's projected state. Unresolved operations are in
      // priority bucket 0 or 1, the partial index ledger_operations_attention (schema 5), which
      // holds them with the few duplicates and answers alone (its ids then sorted).
      unresolved: db
        .prepare(
          `SELECT operation_id FROM ledger_operations INDEXED BY ledger_operations_attention
           WHERE priority < 2 AND state IN ('open', 'unknown') ORDER BY operation_id`,
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
      const rows: KnownRows = known?.rows ?? new Map<string, OperationRow | undefined>();
      // Takeovers are admitted under the write lock (src/ledger/lease.ts).
      const book = createOwnerBook(
        (id) =>
          ownerFrom(
            (this.#stmt.byOperation.all(id) as BytesRow[]).map((r) => parseRecord(r.bytes)),
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
      return result;
    };
    this.#group = createGroupCommit((batches) => settle(() => this.#writeBatches(batches)));
  }

  /**
   * Inserts one batch after `head` (advanced in place). Runs inside the write transaction;
   * `known` holds listing rows as committed or as written by earlier batches of this transaction,
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
    // The listing row holds every operation's state: one lookup serves the listing, unresolved()
    // and the tags (its session and correlation are the operation's first event's).
    const before = new Map<string, OperationRow | undefined>();
    const lookup = (id: string): OperationRow | undefined => {
      if (before.has(id)) return before.get(id);
      const row = known.has(id) ? known.get(id) : this.#listing.get(id);
      before.set(id, row);
      return row;
    };
    /** Operations whose first event is in this batch: their listing row takes its session. */
    const firstSession = new Map<string, string | null>();
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
      const id = record.operation_id;
      if (id === null) continue;
      const stored = lookup(id);
      if (!stored && !firstSession.has(id)) firstSession.set(id, record.session_id);
      const session = stored ? stored.session_id : firstSession.get(id);
      for (const tag of operationTags(record)) {
        // The listing row answers its own session (bySession); a correlation tag is written once.
        if (tag === `s:${session}`) continue;
        if (stored && tag === `c:${stored.correlation_id}`) continue;
        st.tag.run(tag, id);
      }
    }
    const written = this.#listing.apply(
      sealed.map((s) => s.record),
      lookup,
    );
    if (sealed.length > 0) {
      head.seq += sealed.length;
      head.hash = prev;
    }
    // Most recently used last (the oldest are dropped after the commit).
    for (const r of written) {
      known.delete(r.operation_id);
      known.set(r.operation_id, r);
    }
    // Returned records are decoded from the stored text (no aliasing of the caller's objects).
    return sealed.map(({ record, text }) => decodeSealed(text, record.hash));
  }

  #live(): void {
    if (this.#closed) throw new LedgerError('CLOSED', 'ledger: store is closed');
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
      return this.#stmt.byIdempotencyKey.all(q.idempotency_key);
    });
  }

  unresolved(): Promise<string[]> {
    return settle(() => {
      this.#live();
      return this.#stmt.unresolved.all() as string[];
    });
  }

  operations(q: OperationsQuery): Promise<OperationsPage> {
    return listOperationsSql(this.#sql, q, {
      prefixUpper: '\u{10ffff}',
      binary: '',
      partialIndexes: {
        attention: 'ledger_operations_attention',
        rare: 'ledger_operations_rare',
      },
    });
  }

  facets(sessions = 200): Promise<ListingFacets> {
    return listingFacetsSql(this.#sql, sessions);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#group.drain();
    this.#db.close();
  }

  #rows(run: () => unknown[]): Promise<StoredEvent[]> {
    return settle(() => {
      this.#live();
      return (run() as BytesRow[]).map((r) => parseRecord(r.bytes));
    });
  }
}
