import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  postgresSkipReason,
  startPostgres,
  type ThrowawayPostgres,
} from '../../../test/support/postgres.js';
import { finished, ledgerContractSuite, opened, started } from '../contract.case.js';
import { GENESIS_HASH, type NewEvent } from '../events.js';
import { ownerChanged } from '../lease.case.js';
import { sealRecord } from '../record.js';
import { STALE_FOLD, templateOf } from './append.js';
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
      await client.query(`DROP FUNCTION candor_append;
        DROP TABLE ledger_operations, ledger_op_counts, ledger_sessions, ledger_leases,
          ledger_heads, ledger_projection;
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
      // Schema 6's heads come from the derived listing: unresolved() and the next append use them.
      expect(await again.unresolved()).toEqual(['op_1']);
      await again.append([finished('op_1', 'att_1', 'succeeded', 'never', 'applied')]);
      expect(await again.unresolved()).toEqual([]);
      expect((await again.operations({ states: ['succeeded'] })).total).toBe(2);
    } finally {
      await again.close();
    }
  });

  it('folds before reading on what it remembers; what another writer changed is re-read', async () => {
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

  it('acknowledges an append only once the server flushed the WAL past it', async () => {
    // The append commits asynchronously (outside its locks) and is acknowledged after a flush
    // wait. So once append() returns, none of the append's WAL records (its rows, its commit, the
    // flush wait's message) may lie beyond the server's flushed position. The server writes WAL of
    // its own too (a standby snapshot every 15 s, autovacuum), which its WAL writer flushes up to
    // 200 ms later: so a position behind is not by itself a finding. When it is behind, the test
    // waits for that WAL to reach disk and reads the records in between (pg_walinspect). Without a
    // working flush wait every check finds the append's own records there.
    const store = await openPostgresLedger(url(), { schema: 'flushed' });
    const observer = new pg.Client({ connectionString: url() });
    await observer.connect();
    try {
      await observer.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
      const unflushed: { i: number; records: string[] }[] = [];
      let background = 0;
      for (let i = 0; i < 10; i++) {
        await store.append([opened(`op_flush_${i}`)]);
        await store.append([started(`op_flush_${i}`, `att_flush_${i}`)]);
        const { rows } = await observer.query<{ flushed: string; inserted: string }>(
          'SELECT pg_current_wal_flush_lsn()::text AS flushed, pg_current_wal_insert_lsn()::text AS inserted',
        );
        const { flushed, inserted } = rows[0]!;
        if (flushed === inserted) continue;
        const xids = (
          await observer.query<{ xid: string }>(
            'SELECT DISTINCT xmin::text AS xid FROM flushed.ledger_events WHERE operation_id = $1',
            [`op_flush_${i}`],
          )
        ).rows.map((r) => r.xid);
        // pg_walinspect reads only flushed WAL: wait for the WAL writer, then look.
        for (let t = 0; t < 100; t++) {
          const caught = await observer.query<{ ok: boolean }>(
            'SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn AS ok',
            [inserted],
          );
          if (caught.rows[0]!.ok) break;
          await new Promise((r) => setTimeout(r, 20));
        }
        const records = await observer.query<{ rm: string; type: string; xid: string }>(
          `SELECT resource_manager AS rm, record_type AS type, xid::text AS xid
             FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)`,
          [flushed, inserted],
        );
        const ours = records.rows.filter((r) => r.rm === 'LogicalMessage' || xids.includes(r.xid));
        if (ours.length > 0)
          unflushed.push({ i, records: ours.map((r) => `${r.rm}/${r.type} xid ${r.xid}`) });
        else background++;
      }
      expect(unflushed).toEqual([]);
      expect(background).toBeLessThan(10); // the check looked at the append's WAL at least once
      expect(await store.read()).toHaveLength(20);
    } finally {
      await observer.end();
      await store.close();
    }
  });

  it('seals in the server the bytes the client seals: same records, hashes and listing', async () => {
    const odd = opened('op_ü');
    const events: NewEvent[] = [
      {
        kind: 'session_started',
        at: Date.UTC(2026, 0, 1),
        session_id: 'ses_é',
        operation_id: null,
        correlation_id: null,
        data: { owner: 'gw-1', instance_id: 'i-1', pid: 7, agent: 'a "quoted" \\ agent' },
      },
      {
        ...odd,
        session_id: 'ses_é',
        correlation_id: 'case \u2028 😀',
        data: {
          ...odd.data,
          // The record's own head fields, nested in its data: only the outer ones are spliced.
          params: { prev_hash: '', seq: 0, session_id: 'x', note: 'é 😀 \u2028 "q" \\' },
        },
      } as NewEvent,
      started('op_ü', 'att_1'),
      opened('op_2', { session: null }),
      finished('op_ü', 'att_1', 'succeeded', 'never', 'applied'),
      started('op_2', 'att_2'),
    ];
    // `server`: a fresh store per append, so each one seals in the server (no commit to guess
    // after). `client`: one store, alone from its second commit on, so the rest are sealed in the
    // client and sent in one message.
    for (const e of events) {
      const s = await openPostgresLedger(url(), { schema: 'sealed_server' });
      await s.append([e]);
      await s.close();
    }
    const one = await openPostgresLedger(url(), { schema: 'sealed_client' });
    for (const e of events) await one.append([e]);
    const stored = await one.read();
    await one.close();
    const client = new pg.Client({ connectionString: url() });
    await client.connect();
    try {
      const table = async (schema: string, sql: string): Promise<unknown[]> =>
        (await client.query<Record<string, unknown>>(sql.replaceAll('$s', schema))).rows;
      const raw = (await table(
        'sealed_server',
        'SELECT seq::int, hash, bytes FROM $s.ledger_events ORDER BY seq',
      )) as { seq: number; hash: string; bytes: Buffer }[];
      // What the client's sealing writes for the same events, byte for byte.
      let prev = GENESIS_HASH;
      expect(raw.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      raw.forEach((r, i) => {
        const sealed = sealRecord(events[i]!, i + 1, prev);
        expect(r.bytes.toString('hex')).toBe(sealed.bytes.toString('hex'));
        expect(r.hash).toBe(sealed.record.hash);
        prev = sealed.record.hash;
      });
      expect(stored.map((e) => e.hash)).toEqual(raw.map((r) => r.hash));
      for (const sql of [
        'SELECT seq, hash, bytes, kind, operation_id, session_id, correlation_id FROM $s.ledger_events ORDER BY seq',
        'SELECT * FROM $s.ledger_operations ORDER BY operation_id',
        // Zero counts are left by transient states; a batch projection nets them out first.
        'SELECT * FROM $s.ledger_op_counts WHERE n <> 0 ORDER BY action, action_class, session_id, state',
        'SELECT * FROM $s.ledger_sessions ORDER BY session_id',
        'SELECT * FROM $s.ledger_tags ORDER BY tag, operation_id',
        'SELECT * FROM $s.ledger_heads ORDER BY operation_id',
        'SELECT * FROM $s.ledger_projection',
      ]) {
        expect(await table('sealed_server', sql)).toEqual(await table('sealed_client', sql));
      }
      const ops = await table(
        'sealed_server',
        'SELECT operation_id, first_seq::int, last_seq::int, attempts FROM $s.ledger_operations ORDER BY first_seq',
      );
      expect(ops).toEqual([
        { operation_id: 'op_ü', first_seq: 2, last_seq: 5, attempts: 1 },
        { operation_id: 'op_2', first_seq: 4, last_seq: 6, attempts: 1 },
      ]);
    } finally {
      await client.end();
    }
  });

  it('a remembered owner is checked under the lock: another gateway’s takeover fences this one', async () => {
    const a = await openPostgresLedger(url(), { schema: 'fenced_guess' });
    const b = await openPostgresLedger(url(), { schema: 'fenced_guess' });
    const attempt = (worker: string, n: number): NewEvent => {
      const e = started('op_1', `att_${n}`, n);
      if (e.kind === 'attempt_started') e.data.worker = worker;
      return e;
    };
    try {
      await a.append([opened('op_1')]); // `a` remembers op_1, owned by gw-1 (opened's owner)
      await a.append([attempt('gw-1', 1)]); // admitted on what it remembers, guard holds
      await b.append([ownerChanged('op_1', 'gw-1', 'gw-2', Date.UTC(2026, 0, 2))]);
      // `a` still remembers gw-1 as the owner: the guard sees op_1 moved, and the re-read fences.
      await expect(a.append([attempt('gw-1', 2)])).rejects.toMatchObject({
        code: 'OWNER_CONFLICT',
      });
      await a.append([attempt('gw-2', 3)]);
      const kinds = (await b.query({ operation_id: 'op_1' })).map((e) =>
        e.kind === 'attempt_started' ? `${e.kind}:${e.data.worker}` : e.kind,
      );
      expect(kinds).toEqual([
        'operation_opened',
        'attempt_started:gw-1',
        'owner_changed',
        'attempt_started:gw-2',
      ]);
      const row = (await b.operations({})).rows[0]!;
      expect(row).toMatchObject({ operation_id: 'op_1', attempts: 2, first_seq: 1, last_seq: 4 });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('candor_append refuses a fold made on a head that has moved since, writing nothing', async () => {
    const store = await openPostgresLedger(url(), { schema: 'stale_fold' });
    await store.append([opened('op_1')]);
    await store.close();
    const client = new pg.Client({ connectionString: url() });
    await client.connect();
    try {
      await client.query('SET search_path = stale_fold');
      const t = templateOf(started('op_1', 'att_1'));
      // What an older writer, taking no operation locks, leaves behind: op_1 moved after the read.
      const call = (last: number): string =>
        `SELECT * FROM candor_append(1, ARRAY['\\x${Buffer.from(t.prefix).toString('hex')}']::bytea[], ` +
        `ARRAY['\\x${Buffer.from(t.suffix).toString('hex')}']::bytea[], ARRAY['attempt_started'], ` +
        `ARRAY['op_1'], ARRAY['ses_1'], ARRAY[NULL]::text[], ` +
        `ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::bigint[], ARRAY[]::text[], 'c', ` +
        `ARRAY['op_1'], ARRAY[${last}]::bigint[])`;
      await expect(client.query(call(7))).rejects.toMatchObject({ code: STALE_FOLD });
      const count = await client.query<{ n: string }>('SELECT count(*) AS n FROM ledger_events');
      expect(count.rows[0]!.n).toBe('1');
      const ok = await client.query<{ head_seq: string; hashes: string[] }>(call(1));
      expect(ok.rows[0]!.head_seq).toBe('1');
      const stored = await client.query<{ hash: string }>(
        'SELECT hash FROM ledger_events WHERE seq = 2',
      );
      expect(stored.rows[0]!.hash).toBe(ok.rows[0]!.hashes[0]);
    } finally {
      await client.end();
    }
  });
});
