// `candor ui` as a command: prints a URL with a token that works (and only that token), serves
// until told to stop, and turns mistakes into usage errors (exit 2) or environment errors (exit 3).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../ledger/sqlite/store.js';
import { main } from '../main.js';
import { run } from './ui.js';

let dir: string | null = null;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = null;
});

function capture(): {
  io: { out: (s: string) => void; err: (s: string) => void };
  out: string[];
  err: string[];
} {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (s) => void out.push(s), err: (s) => void err.push(s) }, out, err };
}

describe('candor ui', () => {
  it('serves the ledger at the printed URL until stopped', async () => {
    dir = mkdtempSync(join(tmpdir(), 'candor-ui-cli-'));
    const db = join(dir, 'ledger.db');
    const store = openSqliteLedger(db);
    await store.close();
    const c = capture();
    let stop!: () => void;
    const until = new Promise<void>((r) => (stop = r));
    const done = run(['--ledger', `sqlite:${db}`], c.io, until);
    let url: string | undefined;
    while (url === undefined) {
      await new Promise((r) => setImmediate(r));
      url = /open (http:\/\/127\.0\.0\.1:\d+\/\?token=\S+)/.exec(c.out.join(''))?.[1];
    }
    const res = await fetch(url, { redirect: 'manual' });
    expect(res.status).toBe(303);
    const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
    const page = await fetch(new URL('/', url), { headers: { cookie } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('No operation matches.');
    expect((await fetch(url.replace(/token=.*/, 'token=nope'))).status).toBe(401);
    stop();
    expect(await done).toBe(0);
    await expect(fetch(url)).rejects.toThrow();
  });

  it('usage errors exit 2 and name the option; a missing ledger exits 3', async () => {
    dir = mkdtempSync(join(tmpdir(), 'candor-ui-cli-'));
    const bad = join(dir, 'report.json');
    writeFileSync(bad, '{"rows": []}');
    const c = capture();
    expect(await main(['ui', '--port', 'x'], c.io)).toBe(2);
    expect(await main(['ui', '--matrix', bad], c.io)).toBe(2);
    expect(await main(['ui', '--bogus'], c.io)).toBe(2);
    expect(c.err.join('')).toContain('--port');
    expect(c.err.join('')).toContain('field "matrix" is missing');
    expect(c.err.join('')).toContain('--bogus');
    expect(await main(['ui', '--ledger', `sqlite:${join(dir, 'none.db')}`], c.io)).toBe(3);
  });
});
