// Offline verification works on a PostgreSQL ledger too: intact -> exit 0; a byte edited in the
// database -> MODIFIED at that sequence number, exit 1.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as audit } from '../src/cli/commands/audit.js';
import { opened } from '../src/ledger/contract.case.js';
import { openPostgresLedger } from '../src/ledger/postgres/store.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from './support/postgres.js';

const skip = postgresSkipReason();
let server: ThrowawayPostgres | undefined;
beforeAll(async () => {
  if (skip === undefined) server = await startPostgres();
});
afterAll(async () => {
  await server?.stop();
});

async function verify(
  url: string,
): Promise<{ code: number; report: { code: string; first_bad_seq: number | null } }> {
  let out = '';
  const code = await audit(['verify', url, '--json'], {
    out: (s) => void (out += s),
    err: () => undefined,
  });
  return { code, report: JSON.parse(out) as { code: string; first_bad_seq: number | null } };
}

describe.skipIf(skip !== undefined)('candor audit verify on PostgreSQL', () => {
  it('reports INTACT, then MODIFIED at the edited record', { timeout: 180_000 }, async () => {
    const url = `${server!.url}${server!.url.includes('?') ? '&' : '?'}schema=audit_pg`;
    const store = await openPostgresLedger(server!.url, { schema: 'audit_pg' });
    for (let i = 1; i <= 5; i++) await store.append([opened(`op_${i}`)]);
    await store.close();

    const intact = await verify(url);
    expect(intact.code).toBe(0);
    expect(intact.report.code).toBe('INTACT');

    const client = new pg.Client({ connectionString: server!.url });
    await client.connect();
    await client.query(
      `UPDATE audit_pg.ledger_events SET bytes = convert_to(replace(convert_from(bytes, 'UTF8'), 'op_3', 'op_X'), 'UTF8') WHERE seq = 3`,
    );
    await client.end();

    const tampered = await verify(url);
    expect(tampered.code).toBe(1);
    expect(tampered.report).toMatchObject({ code: 'MODIFIED', first_bad_seq: 3 });
  });
});
