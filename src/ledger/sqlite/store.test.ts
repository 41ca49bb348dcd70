import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import type { NewEvent } from '../events.js';
import {
  finished,
  ledgerContractSuite,
  observed,
  opened,
  sessionStarted,
  started,
} from '../contract.case.js';
import type { OperationsQuery } from '../listing.js';
import { listOperationsSql, type SqlRunner } from '../listing-sql.js';
import type { LedgerStore } from '../store.js';
import { openMemoryLedger } from '../memory/store.js';
import { backfillSqliteListing } from './listing.js';
import { openSqliteLedger } from './store.js';
import { SQLITE_MIGRATIONS, SQLITE_SCHEMA_VERSION } from './schema.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

for (const durability of ['process', 'power'] as const) {
  ledgerContractSuite(`sqlite (${durability})`, () => {
    const path = join(dir, `contract-${durability}-${++n}.db`);
    return Promise.resolve({
      store: openSqliteLedger(path, { durability }),
      reopen: () => Promise.resolve(openSqliteLedger(path, { durability })),
    });
  });
}

/**
 * A ledger file as Candor wrote it at schema `version`: the migrations up to it, then the events,
 * tags and leases of the file at `from` and the listing folded from those events (the migrations'
 * own backfill). Schema 4's tagging rules are schema 5's.
 */
function ledgerAtSchema(path: string, version: number, from: string): void {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.exec(
      'CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
    );
    for (const m of SQLITE_MIGRATIONS.filter((x) => x.version <= version)) {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_version VALUES (?, ?)').run(m.version, 0);
    }
    db.prepare('ATTACH DATABASE ? AS src').run(from);
    db.exec(`INSERT INTO ledger_events SELECT * FROM src.ledger_events;
      INSERT INTO ledger_tags SELECT * FROM src.ledger_tags;`);
    if (version >= 3) db.exec('INSERT INTO ledger_leases SELECT * FROM src.ledger_leases');
    db.exec('DETACH DATABASE src');
    if (version >= 2) backfillSqliteListing(db);
  } finally {
    db.close();
  }
}

/** `opened` with another action and class. */
function openedAs(op: string, action: string, cls: 'destructive' | 'read', at: number): NewEvent {
  const e = opened(op, { at, session: 'ses_c' });
  if (e.kind !== 'operation_opened') throw new Error('unreachable');
  return { ...e, data: { ...e.data, action, action_class: cls } };
}

describe('sqlite ledger file', () => {
  it('creates the directory, uses WAL and records the schema version', async () => {
    const path = join(dir, 'nested', 'deeper', 'ledger.db');
    const store = openSqliteLedger(path);
    await store.append([opened('op_1')]);
    await store.close();
    const db = new Database(path, { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.prepare('SELECT max(version) FROM schema_version').pluck().get()).toBe(
      SQLITE_SCHEMA_VERSION,
    );
    db.close();
  });

  it('refuses a ledger written by a newer schema, and a missing file with mustExist', async () => {
    const path = join(dir, 'future.db');
    await openSqliteLedger(path).close();
    const db = new Database(path);
    db.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, 0)').run(
      SQLITE_SCHEMA_VERSION + 1,
    );
    db.close();
    expect(() => openSqliteLedger(path)).toThrow(
      expect.objectContaining({ code: 'SCHEMA_TOO_NEW' }),
    );
    expect(() => openSqliteLedger(join(dir, 'absent', 'x.db'), { mustExist: true })).toThrow(
      expect.objectContaining({ code: 'NOT_FOUND' }),
    );
  });

  it('makes an edit of stored bytes visible in the chain', async () => {
    const path = join(dir, 'tamper.db');
    const store = openSqliteLedger(path);
    await store.append([opened('op_1'), started('op_1', 'att_1'), opened('op_2')]);
    await store.close();
    const db = new Database(path);
    const bytes = db
      .prepare('SELECT bytes FROM ledger_events WHERE seq = 2')
      .pluck()
      .get() as Buffer;
    const edited = Buffer.from(bytes.toString('utf8').replace('"number":1', '"number":2'));
    db.prepare('UPDATE ledger_events SET bytes = ? WHERE seq = 2').run(edited);
    db.close();
    const again = openSqliteLedger(path);
    const all = await again.read();
    await again.close();
    // The edited record's hash no longer matches what its successor chained to.
    expect(all[2]!.prev_hash).not.toBe(all[1]!.hash);
    expect(all[1]!.prev_hash).toBe(all[0]!.hash);
  });

  it('migrates a schema-1 ledger file: the listing is derived from the events already stored', async () => {
    const path = join(dir, 'v1.db');
    const store = openSqliteLedger(path);
    await store.append([
      opened('op_1', { correlation: 'case-7' }),
      started('op_1', 'att_1'),
      opened('op_2', { at: Date.UTC(2026, 0, 2) }),
      finished('op_2', 'att_2', 'succeeded', 'never', 'applied'),
    ]);
    const expected = await store.operations({});
    await store.close();
    // Back to what Candor wrote before the listing existed.
    const db = new Database(path);
    db.exec(`DROP TABLE ledger_operations; DROP TABLE ledger_op_counts; DROP TABLE ledger_sessions; DROP TABLE ledger_leases;
      DELETE FROM ledger_tags WHERE tag LIKE 'r:%'; DELETE FROM schema_version WHERE version > 1;
      CREATE TABLE unresolved_operations (operation_id TEXT PRIMARY KEY, state TEXT NOT NULL) WITHOUT ROWID;
      INSERT INTO unresolved_operations VALUES ('op_1', 'unknown');`);
    db.close();
    const again = openSqliteLedger(path, { mustExist: true });
    try {
      const page = await again.operations({});
      expect(page.rows.map((r) => [r.operation_id, r.state])).toEqual([
        ['op_1', 'unknown'],
        ['op_2', 'succeeded'],
      ]);
      expect(page).toEqual(expected);
      expect(
        (await again.operations({ search: 'case-7' })).rows.map((r) => r.operation_id),
      ).toEqual(['op_1']);
      // And it keeps being maintained on append.
      await again.append([finished('op_1', 'att_1', 'succeeded', 'never', 'applied')]);
      expect((await again.operations({ states: ['succeeded'] })).total).toBe(2);
    } finally {
      await again.close();
    }
    const check = new Database(path, { readonly: true });
    expect(check.prepare('SELECT max(version) FROM schema_version').pluck().get()).toBe(
      SQLITE_SCHEMA_VERSION,
    );
    check.close();
  });

  it('migrates a schema-3 ledger: unresolved() and session queries answer from the listing', async () => {
    const path = join(dir, 'v3.db');
    const store = openSqliteLedger(path);
    await store.append([
      opened('op_1', { session: 'ses_a' }),
      started('op_1', 'att_1', 1, { session: 'ses_b' }),
      opened('op_2', { session: 'ses_a' }),
      finished('op_2', 'att_2', 'succeeded', 'never', 'applied'),
    ]);
    const events = await store.read();
    await store.close();
    // Schema 3 kept unresolved operations in a table of their own and tagged every session.
    const v3 = join(dir, 'v3-old.db');
    ledgerAtSchema(v3, 3, path);
    const db = new Database(v3);
    db.exec(`INSERT INTO unresolved_operations VALUES ('op_1', 'open');
      INSERT OR IGNORE INTO ledger_tags VALUES ('s:ses_a', 'op_1'), ('s:ses_a', 'op_2');`);
    db.close();
    const again = openSqliteLedger(v3, { mustExist: true });
    try {
      expect(await again.unresolved()).toEqual(['op_1']);
      // Each event once, whether its operation is found by a tag, by its listing row, or both.
      expect((await again.query({ session_id: 'ses_a' })).map((e) => e.seq)).toEqual(
        events.map((e) => e.seq),
      );
      expect((await again.query({ session_id: 'ses_b' })).map((e) => e.seq)).toEqual([1, 2]);
      await again.append([finished('op_1', 'att_1', 'succeeded', 'never', 'applied')]);
      expect(await again.unresolved()).toEqual([]);
    } finally {
      await again.close();
    }
    const check = new Database(v3, { readonly: true });
    expect(
      check
        .prepare("SELECT count(*) FROM sqlite_master WHERE name = 'unresolved_operations'")
        .pluck()
        .get(),
    ).toBe(0);
    // Schema 4 writes no tag for an operation's own session (its listing row holds it).
    expect(
      check
        .prepare("SELECT tag FROM ledger_tags WHERE operation_id = 'op_1' ORDER BY tag")
        .pluck()
        .all(),
    ).toEqual(expect.arrayContaining(['s:ses_a', 's:ses_b']));
    check.close();
  });

  it('migrates a schema-4 ledger to schema 5: the same pages, queries and unresolved() as before, and as the memory store', async () => {
    const T0 = Date.UTC(2026, 0, 1);
    const events: NewEvent[] = [
      sessionStarted('ses_a'),
      opened('op_1', { session: 'ses_a', correlation: 'case-1', key: 'key-1', at: T0 + 1 }),
      started('op_1', 'att_1'),
      finished('op_1', 'att_1', 'succeeded', 'never', 'applied'),
      opened('op_2', { session: 'ses_b', at: T0 + 2 }),
      started('op_2', 'att_2'),
      opened('op_3', { at: T0 + 3, correlation: 'case-3' }),
      openedAs('op_4', 'delete_app', 'destructive', T0 + 4),
      started('op_4', 'att_4'),
      finished('op_4', 'att_4', 'confirmed_failure', 'never', 'none'),
      opened('op_5', { at: T0 + 5, key: 'key-5' }),
      started('op_5', 'att_5'),
      finished('op_5', 'att_5', 'succeeded', 'never', 'applied'),
      observed('op_5', 'succeeded', 2),
      openedAs('op_6', 'read_app', 'read', T0 + 6),
      started('op_6', 'att_6'),
      finished('op_6', 'att_6', 'succeeded', 'never', 'applied'),
      opened('op_7', { at: T0 + 2 }),
      started('op_7', 'att_7'),
      finished('op_7', 'att_7', 'confirmed_failure', 'never', 'none'),
    ];
    const fresh = join(dir, 'v5-fresh.db');
    const source = openSqliteLedger(fresh);
    const memory = openMemoryLedger();
    for (const e of events) {
      await source.append([e]);
      await memory.append([e]);
    }
    await source.close();
    const path = join(dir, 'v4.db');
    ledgerAtSchema(path, 4, fresh);

    const queries: OperationsQuery[] = [
      {},
      { states: ['open', 'unknown'] },
      { states: ['failed'] },
      { states: ['succeeded'] },
      { states: ['cancelled'] },
      { states: ['succeeded', 'failed'], limit: 2 },
      { action: 'delete_app' },
      { action_class: 'read' },
      { session_id: 'ses_a' },
      { session_id: 'ses_c', states: ['failed'] },
      { order: 'opened' },
      { order: 'opened', states: ['failed', 'succeeded'] },
      { opened_from: T0 + 2, opened_to: T0 + 4 },
      { opened_from: T0 + 2, states: ['failed'] },
      { search: 'case-3' },
      { operation_ids: ['op_2', 'op_5', 'op_9'] },
    ];
    /** Every page of `q`, walked forward with two rows a page. */
    const walk = async (
      list: (q: OperationsQuery) => Promise<Awaited<ReturnType<LedgerStore['operations']>>>,
      q: OperationsQuery,
    ): Promise<unknown[]> => {
      const pages = [];
      let page = await list({ ...q, limit: 2 });
      pages.push(page);
      while (page.next !== null && pages.length < 20) {
        page = await list({ ...q, limit: 2, after: page.next });
        pages.push(page);
      }
      // And one step back from the last page.
      if (page.prev !== null) pages.push(await list({ ...q, limit: 2, before: page.prev }));
      return pages;
    };
    const answers = async (
      list: (q: OperationsQuery) => Promise<Awaited<ReturnType<LedgerStore['operations']>>>,
    ): Promise<unknown[]> => {
      const out = [];
      for (const q of queries) out.push(await list(q), await walk(list, q));
      return out;
    };
    const expected = await answers((q) => memory.operations(q));
    expect(await memory.unresolved()).toEqual(['op_2', 'op_3']);

    // The schema-4 file answers through schema 4's indexes and unresolved() statement.
    const old = new Database(path, { readonly: true });
    const runner: SqlRunner = {
      placeholder: () => '?',
      run: (sql, params) =>
        Promise.resolve(old.prepare(sql).all(...params) as Record<string, unknown>[]),
    };
    expect(
      await answers((q) => listOperationsSql(runner, q, { prefixUpper: '\u{10ffff}', binary: '' })),
    ).toEqual(expected);
    expect(
      old
        .prepare(
          `SELECT operation_id FROM ledger_operations INDEXED BY ledger_operations_unresolved
           WHERE state IN ('open', 'unknown') ORDER BY operation_id`,
        )
        .pluck()
        .all(),
    ).toEqual(['op_2', 'op_3']);
    old.close();

    const again = openSqliteLedger(path, { mustExist: true });
    try {
      expect(await answers((q) => again.operations(q))).toEqual(expected);
      expect(await again.unresolved()).toEqual(['op_2', 'op_3']);
      expect(await again.facets()).toEqual(await memory.facets());
      for (const q of [
        { operation_id: 'op_5' },
        { session_id: 'ses_a' },
        { session_id: 'ses_2' },
        { correlation_id: 'case-3' },
        { idempotency_key: 'key-5' },
      ]) {
        expect((await again.query(q)).map((e) => e.hash)).toEqual(
          (await memory.query(q)).map((e) => e.hash),
        );
      }
      // Maintained on append from here: op_2 resolves, op_3 goes unknown.
      const more = [
        finished('op_2', 'att_2', 'succeeded', 'never', 'applied'),
        started('op_3', 'att_3'),
      ];
      await again.append(more);
      await memory.append(more);
      expect(await again.unresolved()).toEqual(['op_3']);
      expect(await answers((q) => again.operations(q))).toEqual(
        await answers((q) => memory.operations(q)),
      );
    } finally {
      await again.close();
    }
    const check = new Database(path, { readonly: true });
    expect(check.prepare('SELECT max(version) FROM schema_version').pluck().get()).toBe(
      SQLITE_SCHEMA_VERSION,
    );
    expect(
      check
        .prepare(
          "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger_operations' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .pluck()
        .all(),
    ).toEqual([
      'ledger_operations_action',
      'ledger_operations_attention',
      'ledger_operations_class',
      'ledger_operations_opened',
      'ledger_operations_rare',
      'ledger_operations_session',
    ]);
    check.close();
  });

  it('re-reads what another connection committed between two appends of this one', async () => {
    const path = join(dir, 'two-writers.db');
    const a = openSqliteLedger(path);
    const b = openSqliteLedger(path);
    try {
      await a.append([opened('op_1')]);
      // `a` remembers op_1's listing row and the head; `b` moves both.
      await b.append([started('op_1', 'att_1')]);
      await b.append([finished('op_1', 'att_1', 'confirmed_failure', 'never', 'none')]);
      await a.append([started('op_1', 'att_2', 2)]);
      const all = await a.read();
      expect(all.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
      for (let i = 1; i < all.length; i++) expect(all[i]!.prev_hash).toBe(all[i - 1]!.hash);
      const [row] = (await b.operations({})).rows;
      expect(row).toMatchObject({ operation_id: 'op_1', attempts: 2, last_seq: 4 });
    } finally {
      await a.close();
      await b.close();
    }
  });
});
