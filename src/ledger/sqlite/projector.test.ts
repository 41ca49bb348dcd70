// SQLite's trailing listing (schema 7): what a reader sees while the projector has not caught up,
// which readers bring it up to date first, and that queries and unresolved() never trail.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { opened, started } from '../events.case.js';
import { openSqliteLedger } from './store.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-projector-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

const cursorOf = (path: string): number => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare('SELECT seq FROM ledger_projection').pluck().get() as number;
  } finally {
    db.close();
  }
};

describe('sqlite listing projector', () => {
  it('commits only events and heads; a fresh read of another store projects them first, a view says how far it trails', async () => {
    const path = join(dir, `two-${++n}.db`);
    const writer = openSqliteLedger(path);
    const view = openSqliteLedger(path);
    try {
      await writer.append([opened('op_1', { correlation: 'case-1', key: 'key-1' })]);
      await writer.append([started('op_1', 'att_1')]);
      // The commit left the listing behind (the projector runs after it, not inside it).
      expect(cursorOf(path)).toBe(0);
      // unresolved() answers from the heads, written in the commit.
      expect(await view.unresolved()).toEqual(['op_1']);
      // Not fresh: another process's events are not projected, and the answer says so.
      const stale = await view.operations({ fresh: false });
      expect(stale.rows).toEqual([]);
      expect(stale.total).toBe(0);
      expect(stale.trails?.events).toBe(2);
      expect((await view.facets(10, { fresh: false })).trails?.events).toBe(2);
      expect(cursorOf(path)).toBe(0);
      // Queries never trail: the events past the cursor answer by their own columns and keys.
      for (const q of [
        { session_id: 'ses_1' },
        { correlation_id: 'case-1' },
        { idempotency_key: 'key-1' },
      ]) {
        expect((await view.query(q)).map((e) => e.seq)).toEqual([1, 2]);
      }
      // The default read (what the duplicate guard and policy totals use) projects first.
      const fresh = await view.operations({});
      expect(fresh.rows.map((r) => [r.operation_id, r.state, r.attempts])).toEqual([
        ['op_1', 'unknown', 1],
      ]);
      expect(fresh.trails).toBeUndefined();
      expect(cursorOf(path)).toBe(2);
    } finally {
      await writer.close();
      await view.close();
    }
  });

  it('a store reads its own writes even when not fresh, and its projector catches up on its own', async () => {
    const path = join(dir, `own-${++n}.db`);
    const lags: number[] = [];
    const store = openSqliteLedger(path, { onProjected: (ms) => lags.push(ms) });
    try {
      await store.append([opened('op_1')]);
      const own = await store.operations({ fresh: false });
      expect(own.rows.map((r) => r.operation_id)).toEqual(['op_1']);
      expect(own.trails).toBeUndefined();
      await store.append([started('op_1', 'att_1')]);
      // No reader asks: the projector runs after the commit by itself (polled, bounded).
      for (let i = 0; i < 400 && cursorOf(path) < 2; i++)
        await new Promise((r) => setTimeout(r, 5));
      expect(cursorOf(path)).toBe(2);
      expect(lags).toHaveLength(2);
    } finally {
      await store.close();
    }
  });

  it('a read-only store answers as the listing stands and reports the trail', async () => {
    const path = join(dir, `ro-${++n}.db`);
    const writer = openSqliteLedger(path);
    await writer.append([opened('op_1', { session: 'ses_a' })]);
    await writer.close();
    // Left behind on purpose: a writer killed between its commit and its projection.
    const db = new Database(path);
    db.prepare('UPDATE ledger_projection SET seq = 0').run();
    db.exec(
      'DELETE FROM ledger_operations; DELETE FROM ledger_op_counts; DELETE FROM ledger_sessions; DELETE FROM ledger_tags',
    );
    db.close();
    const reader = openSqliteLedger(path, { readOnly: true });
    try {
      const page = await reader.operations({});
      expect(page.rows).toEqual([]);
      expect(page.trails?.events).toBe(1);
      expect((await reader.query({ session_id: 'ses_a' })).map((e) => e.seq)).toEqual([1]);
      expect(await reader.unresolved()).toEqual(['op_1']);
    } finally {
      await reader.close();
    }
    // The next writable open resumes the projection.
    const again = openSqliteLedger(path);
    try {
      const page = await again.operations({ fresh: false });
      expect(page.rows.map((r) => r.operation_id)).toEqual(['op_1']);
      expect(page.trails).toBeUndefined();
    } finally {
      await again.close();
    }
  });
});
