// SQLite LedgerStore (better-sqlite3, WAL). Appends are linearised by `BEGIN IMMEDIATE`: the head
// is read and the new records inserted under SQLite's single-writer lock, so any number of
// processes appending to one file extend one chain. The unresolved-operation index is written in
// the same transaction as the events it derives from.
import { closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import type { OperationState } from '../../core/vocabulary.js';
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
import { foldStates, operationTags, UNRESOLVED_STATES } from '../projection.js';
import { parseRecord, sealRecord } from '../record.js';
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
      tag: db.prepare('INSERT OR IGNORE INTO ledger_tags (tag, operation_id) VALUES (?, ?)'),
      setState: db.prepare(
        `INSERT INTO unresolved_operations (operation_id, state) VALUES (?, ?)
         ON CONFLICT (operation_id) DO UPDATE SET state = excluded.state`,
      ),
      settle: db.prepare('DELETE FROM unresolved_operations WHERE operation_id = ?'),
      read: db.prepare('SELECT bytes FROM ledger_events WHERE seq >= ? ORDER BY seq LIMIT ?'),
      byOperation: db.prepare(
        'SELECT bytes FROM ledger_events WHERE operation_id = ? ORDER BY seq',
      ),
      // Operations carrying the tag, whole, plus the matching non-operation events.
      bySession: db.prepare(
        `SELECT seq, bytes FROM ledger_events WHERE operation_id IN
           (SELECT operation_id FROM ledger_tags WHERE tag = 's:' || @id)
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
      unresolved: db
        .prepare('SELECT operation_id FROM unresolved_operations ORDER BY operation_id')
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
    const writeOne = db.transaction((events: readonly NewEvent[], head: Head, book: OwnerBook) =>
      this.#insert(events, head, book),
    );
    const writeAll = db.transaction((batches: readonly (readonly NewEvent[])[]) => {
      const row = this.#stmt.head.get() as Head | undefined;
      const head: Head = { seq: row?.seq ?? 0, hash: row?.hash ?? GENESIS_HASH };
      // Takeovers are admitted under the write lock (src/ledger/lease.ts).
      const book = createOwnerBook(
        (id) =>
          ownerFrom(
            (this.#stmt.byOperation.all(id) as BytesRow[]).map((r) => parseRecord(r.bytes)),
          ),
        (owner) => this.#stmt.lease.get(owner) as LeaseRow | undefined,
      );
      if (batches.length === 1) return [this.#insert(batches[0]!, head, book)];
      return batches.map((events): StoredEvent[] | Error => {
        const before = { ...head };
        try {
          return writeOne(events, head, book);
        } catch (err) {
          Object.assign(head, before);
          return err instanceof Error ? err : new Error(String(err));
        }
      });
    });
    this.#writeBatches = (batches) => writeAll.immediate(batches);
    this.#group = createGroupCommit((batches) => settle(() => this.#writeBatches(batches)));
  }

  /** Inserts one batch after `head` (advanced in place). Runs inside the write transaction. */
  #insert(events: readonly NewEvent[], head: Head, book: OwnerBook): StoredEvent[] {
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
    // The listing row holds every operation's state: one lookup serves both projections, and
    // tells which session and correlation tags the operation's first event already wrote.
    const rows = new Map<string, OperationRow | undefined>();
    const lookup = (id: string): OperationRow | undefined => {
      if (!rows.has(id)) rows.set(id, this.#listing.get(id));
      return rows.get(id);
    };
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
      const known = record.operation_id === null ? undefined : lookup(record.operation_id);
      for (const tag of operationTags(record)) {
        if (known && (tag === `s:${known.session_id}` || tag === `c:${known.correlation_id}`))
          continue;
        st.tag.run(tag, record.operation_id);
      }
    }
    const lookupState = (id: string): OperationState | undefined => lookup(id)?.state ?? undefined;
    const changes = foldStates(events, lookupState);
    this.#listing.apply(
      sealed.map((s) => s.record),
      lookup,
    );
    for (const c of changes) {
      if (UNRESOLVED_STATES.has(c.state)) st.setState.run(c.operation_id, c.state);
      else st.settle.run(c.operation_id);
    }
    if (sealed.length > 0) {
      head.seq += sealed.length;
      head.hash = prev;
    }
    // Returned records are decoded from the stored bytes (no aliasing of the caller's objects).
    return sealed.map(({ record, bytes }) => decode(bytes, record.hash));
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
    return listOperationsSql(this.#sql, q, { prefixUpper: '\u{10ffff}', binary: '' });
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

function decode(bytes: Buffer, hash: string): StoredEvent {
  return {
    ...(JSON.parse(bytes.toString('utf8')) as Omit<StoredEvent, 'hash'>),
    hash,
  } as StoredEvent;
}
