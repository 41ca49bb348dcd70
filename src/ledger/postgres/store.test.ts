import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresSkipReason,
  startPostgres,
  type ThrowawayPostgres,
} from '../../../test/support/postgres.js';
import { finished, ledgerContractSuite, opened, started } from '../contract.case.js';
import { POSTGRES_SCHEMA_VERSION } from './schema.js';
import { openPostgresLedger } from './store.js';

const skip = postgresSkipReason();
let server: ThrowawayPostgres | undefined;
let n = 0;

beforeAll(async () => {
  if (skip === undefined) server = await startPostgres();
});
afterAll(async () => {
  await server?.stop();
});

const url = (): string => {
  if (!server) throw new Error('PostgreSQL server not started');
  return server.url;
};

ledgerContractSuite(
  'postgres',
  async () => {
    const schema = `contract_${++n}`;
    return {
      store: await openPostgresLedger(url(), { schema }),
      reopen: () => openPostgresLedger(url(), { schema }),
    };
  },
  { skip },
);

describe.skipIf(skip !== undefined)('postgres ledger schema', () => {
  it('records the schema version and refuses a newer one', async () => {
    const store = await openPostgresLedger(url(), { schema: 'versioned' });
    await store.append([opened('op_1')]);
    await store.close();
    const client = new pg.Client({ connectionString: url() });
    await client.connect();
    try {
      const v = await client.query<{ v: number }>(
        'SELECT max(version) AS v FROM versioned.schema_version',
      );
      expect(v.rows[0]!.v).toBe(POSTGRES_SCHEMA_VERSION);
      await client.query('INSERT INTO versioned.schema_version VALUES ($1, 0)', [
        POSTGRES_SCHEMA_VERSION + 1,
      ]);
    } finally {
      await client.end();
    }
    await expect(openPostgresLedger(url(), { schema: 'versioned' })).rejects.toMatchObject({
      code: 'SCHEMA_TOO_NEW',
    });
  });

  it('refuses a blank database with mustExist, and a bad schema name', async () => {
    await expect(
      openPostgresLedger(url(), { schema: 'blank', mustExist: true }),
    ).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    await expect(openPostgresLedger(url(), { schema: 'Robert"; drop' })).rejects.toMatchObject({
      code: 'BAD_URL',
    });
  });

  it('migrates safely when several clients open a fresh schema at once', async () => {
    const stores = await Promise.all(
      Array.from({ length: 4 }, () => openPostgresLedger(url(), { schema: 'racing' })),
    );
    await Promise.all(stores.map((s, i) => s.append([opened(`op_${i}`)])));
    expect(await stores[0]!.read()).toHaveLength(4);
    await Promise.all(stores.map((s) => s.close()));
  });

  it('migrates a schema-1 ledger: the listing is derived from the events already stored', async () => {
    const schema = 'older';
    const store = await openPostgresLedger(url(), { schema });
    await store.append([
      opened('op_1', { correlation: 'case-7' }),
      started('op_1', 'att_1'),
      opened('op_2', { at: Date.UTC(2026, 0, 2) }),
      finished('op_2', 'att_2', 'succeeded', 'never', 'applied'),
    ]);
    const expected = await store.operations({});
    await store.close();
    // Back to what Candor wrote before the listing existed.
    const client = new pg.Client({ connectionString: url() });
    await client.connect();
    try {
      await client.query(`SET search_path = ${schema}`);
      await client.query(`DROP TABLE ledger_operations, ledger_op_counts, ledger_sessions, ledger_leases;
        DELETE FROM ledger_tags WHERE tag LIKE 'r:%'; DELETE FROM schema_version WHERE version > 1`);
    } finally {
      await client.end();
    }
    const again = await openPostgresLedger(url(), { schema, mustExist: true });
    try {
      const page = await again.operations({});
      expect(page.rows.map((r) => [r.operation_id, r.state])).toEqual([
        ['op_1', 'unknown'],
        ['op_2', 'succeeded'],
      ]);
      expect(page).toEqual(expected);
      await again.append([finished('op_1', 'att_1', 'succeeded', 'never', 'applied')]);
      expect((await again.operations({ states: ['succeeded'] })).total).toBe(2);
    } finally {
      await again.close();
    }
  });

  it('seals before reading only while it is the only writer: another writer is re-read', async () => {
    const a = await openPostgresLedger(url(), { schema: 'two_writers' });
    const b = await openPostgresLedger(url(), { schema: 'two_writers' });
    try {
      await a.append([opened('op_1')]);
      await a.append([started('op_1', 'att_1')]); // sealed after what `a` remembers
      // `b` moves the head and op_1's listing row; `a` must notice both under the lock.
      await b.append([finished('op_1', 'att_1', 'confirmed_failure', 'never', 'none')]);
      await a.append([started('op_1', 'att_2', 2)]);
      await a.append([opened('op_2')]);
      // An operation `a` has not seen, already in the ledger: not taken for a new one.
      await b.append([opened('op_3')]);
      await a.append([started('op_3', 'att_3')]);
      // A third store, alone since its first commit, continues an operation it never read.
      const c = await openPostgresLedger(url(), { schema: 'two_writers' });
      await c.append([opened('op_9')]);
      await c.append([started('op_9', 'att_9')]); // found no other writer: the next one guesses
      await c.append([started('op_3', 'att_4', 2)]);
      await c.close();
      const all = await a.read();
      expect(all.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      for (let i = 1; i < all.length; i++) expect(all[i]!.prev_hash).toBe(all[i - 1]!.hash);
      const rows = (await b.operations({ order: 'opened' })).rows;
      expect(rows.find((r) => r.operation_id === 'op_1')).toMatchObject({
        attempts: 2,
        last_seq: 4,
      });
      expect(rows.find((r) => r.operation_id === 'op_3')).toMatchObject({
        attempts: 2,
        first_seq: 6,
        last_seq: 10,
      });
    } finally {
      await a.close();
      await b.close();
    }
  });
});
