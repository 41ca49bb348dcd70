// PostgreSQL's trailing listing (schema 6): what a reader sees while the projector has not caught
// up, which readers bring it up to date first, that queries and unresolved() never trail, and that
// a projection held up in another gateway delays no append.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresSkipReason,
  startPostgres,
  type ThrowawayPostgres,
} from '../../../test/support/postgres.js';
import { sha256Hex } from '../../core/fingerprint.js';
import type { NewEvent } from '../events.js';
import { finished, opened, started } from '../events.case.js';
import { POSTGRES_PROJECT_BATCH_BYTES, projectBatch } from './projector.js';
import { openPostgresLedger } from './store.js';

const skip = postgresSkipReason();
let server: ThrowawayPostgres | undefined;
let admin: pg.Client | undefined;
let n = 0;

beforeAll(async () => {
  if (skip !== undefined) return;
  server = await startPostgres();
  admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
}, 120_000);
afterAll(async () => {
  await admin?.end();
  await server?.stop();
});

const url = (): string => {
  if (!server) throw new Error('PostgreSQL server not started');
  return server.url;
};

const cursorOf = async (schema: string): Promise<number> =>
  Number(
    (await admin!.query<{ seq: string }>(`SELECT seq FROM ${schema}.ledger_projection`)).rows[0]!
      .seq,
  );

/** The projector's lock key of `schema` (as the store derives it). */
const projectorKey = (schema: string): string =>
  BigInt.asIntN(
    64,
    BigInt(`0x${sha256Hex(`candor-ledger-project:${schema}`).slice(0, 16)}`),
  ).toString();

describe.skipIf(skip !== undefined)('postgres listing projector', () => {
  it('commits only events and heads; a view says how far it trails, a fresh read projects first', async () => {
    const schema = `trail_${++n}`;
    const writer = await openPostgresLedger(url(), { schema });
    // A gateway that only reads (`ops`, `audit`): it never projects.
    const view = await openPostgresLedger(url(), { schema, projects: false });
    // Another gateway holds the projector lock: the writer's projector finds it busy.
    const holder = new pg.Client({ connectionString: url() });
    await holder.connect();
    try {
      await holder.query(`BEGIN; SELECT pg_advisory_xact_lock(${projectorKey(schema)})`);
      await writer.append([opened('op_1', { correlation: 'case-1', key: 'key-1' })]);
      await writer.append([started('op_1', 'att_1')]);
      await new Promise((r) => setTimeout(r, 60)); // past the projector's delay
      expect(await cursorOf(schema)).toBe(0);
      // unresolved() answers from the heads, written in the commit.
      expect(await view.unresolved()).toEqual(['op_1']);
      const stale = await view.operations({});
      expect(stale.rows).toEqual([]);
      expect(stale.total).toBe(0);
      expect(stale.trails?.events).toBe(2);
      expect(stale.trails?.ms).toBeGreaterThanOrEqual(0);
      expect((await view.facets(10)).trails?.events).toBe(2);
      // Queries never trail: events past the cursor answer by their own columns and keys.
      for (const q of [
        { session_id: 'ses_1' },
        { correlation_id: 'case-1' },
        { idempotency_key: 'key-1' },
      ]) {
        expect((await view.query(q)).map((e) => e.seq)).toEqual([1, 2]);
      }
      expect(await view.query({ idempotency_key: 'key-2' })).toEqual([]);
      // A fresh read waits for the other gateway's batch, then projects.
      const fresh = writer.operations({});
      await new Promise((r) => setTimeout(r, 50));
      expect(await cursorOf(schema)).toBe(0);
      await holder.query('COMMIT');
      const page = await fresh;
      expect(page.rows.map((r) => [r.operation_id, r.state, r.attempts])).toEqual([
        ['op_1', 'unknown', 1],
      ]);
      expect(page.trails).toBeUndefined();
      expect(await cursorOf(schema)).toBe(2);
      // Tags now answer the queries (the same events as before).
      expect((await view.query({ idempotency_key: 'key-1' })).map((e) => e.seq)).toEqual([1, 2]);
      expect((await view.operations({})).trails).toBeUndefined();
    } finally {
      await holder.end();
      await writer.close();
      await view.close();
    }
  });

  it('never delays an append: appends commit while another gateway holds the projector lock', async () => {
    const schema = `nodelay_${++n}`;
    const writer = await openPostgresLedger(url(), { schema });
    const holder = new pg.Client({ connectionString: url() });
    await holder.connect();
    try {
      await holder.query(`BEGIN; SELECT pg_advisory_xact_lock(${projectorKey(schema)})`);
      for (let i = 0; i < 20; i++) {
        await writer.append([opened(`op_${i}`)]);
        await new Promise((r) => setTimeout(r, 5)); // let the projector try, and find it busy
      }
      expect((await writer.read()).length).toBe(20);
      expect(await cursorOf(schema)).toBe(0);
      await holder.query('COMMIT');
      // Its own projector catches up by itself (polled, bounded).
      for (let i = 0; i < 400 && (await cursorOf(schema)) < 20; i++)
        await new Promise((r) => setTimeout(r, 10));
      expect(await cursorOf(schema)).toBe(20);
      expect((await writer.operations({ fresh: false })).total).toBe(20);
    } finally {
      await holder.end();
      await writer.close();
    }
  });

  it('reports each commit’s projection lag, and projects what it committed before it closes', async () => {
    const schema = `lag_${++n}`;
    const lags: number[] = [];
    const writer = await openPostgresLedger(url(), { schema, onProjected: (ms) => lags.push(ms) });
    await writer.append([opened('op_1')]);
    await writer.append([started('op_1', 'att_1')]);
    await writer.close();
    expect(await cursorOf(schema)).toBe(2);
    expect(lags).toHaveLength(2);
    const reader = await openPostgresLedger(url(), { schema, projects: false });
    try {
      const page = await reader.operations({});
      expect(page.rows.map((r) => [r.operation_id, r.state])).toEqual([['op_1', 'unknown']]);
      expect(page.trails).toBeUndefined();
    } finally {
      await reader.close();
    }
  });

  it('a record whose derived text PostgreSQL cannot hold (U+0000 in a remote reference) never stops the projection', async () => {
    const schema = `nul_${++n}`;
    const writer = await openPostgresLedger(url(), { schema });
    try {
      await writer.append([opened('op_1'), started('op_1', 'att_1')]);
      const f = finished('op_1', 'att_1', 'succeeded', 'never', 'applied');
      if (f.kind === 'attempt_finished')
        f.data.response = { status: 201, remote_ref: 'dep_\u0000x' } as typeof f.data.response;
      await writer.append([f]);
      await writer.append([opened('op_2')]);
      const page = await writer.operations({});
      expect(page.trails).toBeUndefined();
      expect(await cursorOf(schema)).toBe(4);
      expect(page.rows.map((r) => r.operation_id).sort()).toEqual(['op_1', 'op_2']);
      // The record keeps its bytes; the derived listing shows U+FFFD where the text had U+0000.
      const stored = (await writer.query({ operation_id: 'op_1' })).at(-1)!;
      expect(stored.kind === 'attempt_finished' && stored.data.response?.remote_ref).toBe(
        'dep_\u0000x',
      );
      expect((await writer.operations({ search: 'dep_\ufffdx' })).total).toBe(1);
    } finally {
      await writer.close();
    }
  });

  it('a projector connection that dies while it waits fails that read, not the process; the next read projects', async () => {
    const schema = `dies_${++n}`;
    const writer = await openPostgresLedger(url(), { schema });
    const holder = new pg.Client({ connectionString: url() });
    await holder.connect();
    try {
      await holder.query(`BEGIN; SELECT pg_advisory_xact_lock(${projectorKey(schema)})`);
      await writer.append([opened('op_1')]);
      const fresh = writer.operations({}).then(
        () => 'answered',
        (err: Error) => err.message,
      );
      // The projector's session, waiting for the lock, is ended by the server.
      let ended = 0;
      for (let i = 0; i < 100 && ended === 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
        ended = (
          await admin!.query(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND pid <> $1`,
            [(holder as unknown as { processID: number }).processID],
          )
        ).rowCount!;
      }
      expect(ended).toBe(1);
      expect(await fresh).not.toBe('answered');
      await holder.query('COMMIT');
      const page = await writer.operations({});
      expect(page.rows.map((r) => r.operation_id)).toEqual(['op_1']);
      expect(await cursorOf(schema)).toBe(1);
    } finally {
      await holder.end();
      await writer.close();
    }
  });

  it('a batch holds at most about 128 KiB of records, so a paused reader cannot hold the lock in the server’s send', async () => {
    const schema = `bytes_${++n}`;
    const holder = new pg.Client({ connectionString: url() });
    await holder.connect();
    const writer = await openPostgresLedger(url(), { schema, projects: false });
    try {
      const big = (i: number): NewEvent => {
        const e = opened(`op_${i}`);
        if (e.kind === 'operation_opened') e.data.params = { note: 'x'.repeat(40_000) };
        return e;
      };
      for (let i = 0; i < 10; i++) await writer.append([big(i)]);
      await holder.query(`SET search_path = ${schema}`);
      const seen: number[] = [];
      for (;;) {
        const r = await projectBatch(holder, projectorKey(schema), false);
        if ('busy' in r) throw new Error('busy');
        if (r.projected === 0) break;
        seen.push(r.projected);
      }
      // Each record is about 40 KB: a batch ends once 128 KiB is passed (at least one record).
      expect(Math.max(...seen)).toBeLessThanOrEqual(
        Math.ceil(POSTGRES_PROJECT_BATCH_BYTES / 40_000),
      );
      expect(seen.reduce((a, b) => a + b, 0)).toBe(10);
      expect(await cursorOf(schema)).toBe(10);
    } finally {
      await holder.end();
      await writer.close();
    }
  });

  it('answers a query by idempotency key while an opening whose params hold U+0000 is pending', async () => {
    const schema = `key_${++n}`;
    const view = await openPostgresLedger(url(), { schema, projects: false });
    try {
      const odd = opened('op_odd', { key: 'key-odd' });
      if (odd.kind === 'operation_opened') odd.data.params = { note: 'a\u0000b', s: 'x\ud800y' };
      await view.append([odd, opened('op_1', { key: 'key-1' })]);
      expect(await cursorOf(schema)).toBe(0);
      expect((await view.query({ idempotency_key: 'key-1' })).map((e) => e.operation_id)).toEqual([
        'op_1',
      ]);
      expect((await view.query({ idempotency_key: 'key-odd' })).map((e) => e.seq)).toEqual([1]);
      expect(await view.query({ idempotency_key: 'other' })).toEqual([]);
    } finally {
      await view.close();
    }
  });

  it('a view’s read projects what is pending, but waits at most a moment for another gateway’s batch', async () => {
    const schema = `view_${++n}`;
    const writer = await openPostgresLedger(url(), { schema, projects: false });
    const view = await openPostgresLedger(url(), { schema });
    const holder = new pg.Client({ connectionString: url() });
    await holder.connect();
    try {
      await writer.append([opened('op_1')]);
      // Nobody else projects: the view's own read brings the listing up to date.
      const page = await view.operations({ fresh: false });
      expect(page.rows.map((r) => r.operation_id)).toEqual(['op_1']);
      expect(page.trails).toBeUndefined();
      // Another gateway's batch holds the lock: the view answers as the listing stands.
      await holder.query(`BEGIN; SELECT pg_advisory_xact_lock(${projectorKey(schema)})`);
      await writer.append([opened('op_2')]);
      const t = performance.now();
      const stale = await view.operations({ fresh: false });
      expect(performance.now() - t).toBeLessThan(5_000);
      expect(stale.rows.map((r) => r.operation_id)).toEqual(['op_1']);
      expect(stale.trails?.events).toBe(1);
      await holder.query('COMMIT');
      expect((await view.operations({ fresh: false })).total).toBe(2);
    } finally {
      await holder.end();
      await writer.close();
      await view.close();
    }
  });
});
