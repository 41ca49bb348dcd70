import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { opened } from './contract.case.js';
import { openLedger, parseLedgerUrl } from './open.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-open-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('parseLedgerUrl', () => {
  it('resolves sqlite paths against cwd; an empty path is a bad URL, never a silent default', () => {
    for (const url of ['sqlite:', 'sqlite://', 'sqlite:  '])
      expect(parseLedgerUrl(url, '/srv/app')).toMatchObject({
        ok: false,
        failure: { code: 'BAD_URL', message: expect.stringContaining('names no file') },
      });
    expect(parseLedgerUrl('sqlite:data/l.db', '/srv')).toMatchObject({
      value: { path: '/srv/data/l.db' },
    });
    expect(parseLedgerUrl('sqlite:///var/l.db', '/srv')).toMatchObject({
      value: { path: '/var/l.db' },
    });
  });

  it('takes the schema out of a postgres URL and rejects unknown schemes without echoing passwords', () => {
    expect(parseLedgerUrl('postgres://u:pw@db:5432/candor?schema=gw&sslmode=disable')).toEqual({
      ok: true,
      value: {
        kind: 'postgres',
        url: 'postgres://u:pw@db:5432/candor?sslmode=disable',
        schema: 'gw',
      },
    });
    const bad = parseLedgerUrl('mysql://root:hunter2@db/x');
    if (bad.ok) throw new Error('expected a failure');
    expect(bad.failure.code).toBe('BAD_URL');
    expect(bad.failure.message).not.toContain('hunter2');
  });
});

describe('openLedger', () => {
  it('opens memory and sqlite stores', async () => {
    const mem = await openLedger('memory:');
    expect(mem.ok).toBe(true);
    await mem.value?.close();
    const sq = await openLedger('sqlite:ledger.db', { cwd: dir });
    if (!sq.ok) throw new Error(sq.failure.message);
    await sq.value.append([opened('op_1')]);
    await sq.value.close();
    const again = await openLedger(`sqlite:${join(dir, 'ledger.db')}`, { mustExist: true });
    if (!again.ok) throw new Error(again.failure.message);
    expect(await again.value.unresolved()).toEqual(['op_1']);
    await again.value.close();
  });

  it('returns NOT_FOUND for a missing ledger with mustExist, OPEN_FAILED for an unreachable server', async () => {
    const missing = await openLedger('sqlite:nope/ledger.db', { cwd: dir, mustExist: true });
    expect(missing.failure?.code).toBe('NOT_FOUND');
    // Port 1 on loopback: nothing listens there; the password must not leak into the message.
    const pg = await openLedger('postgres://u:secret@127.0.0.1:1/x');
    expect(pg.failure?.code).toBe('OPEN_FAILED');
    expect(pg.failure?.message).not.toContain('secret');
  });
});
