import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { finished, ledgerContractSuite, opened, started } from '../contract.case.js';
import { openSqliteLedger } from './store.js';
import { SQLITE_SCHEMA_VERSION } from './schema.js';

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
    const db = new Database(path);
    db.exec(`CREATE TABLE unresolved_operations (operation_id TEXT PRIMARY KEY, state TEXT NOT NULL) WITHOUT ROWID;
      INSERT INTO unresolved_operations VALUES ('op_1', 'open');
      INSERT OR IGNORE INTO ledger_tags VALUES ('s:ses_a', 'op_1'), ('s:ses_a', 'op_2');
      DROP INDEX ledger_operations_unresolved; DELETE FROM schema_version WHERE version > 3;`);
    db.close();
    const again = openSqliteLedger(path, { mustExist: true });
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
    const check = new Database(path, { readonly: true });
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
