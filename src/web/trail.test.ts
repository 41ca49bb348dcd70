// The operations page over SQLite's trailing listing (schema 7): it never projects another
// process's events itself, and says how far its counts and rows are behind.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { opened } from '../ledger/events.case.js';
import { openSqliteLedger } from '../ledger/sqlite/store.js';
import { createUi, TOKEN_COOKIE, type UiApp } from './server.js';

let ui: UiApp | null = null;
let dir: string | null = null;
afterEach(async () => {
  await ui?.close();
  ui = null;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = null;
});

const page = async (app: UiApp): Promise<string> =>
  (
    await app.app.request('/', {
      headers: { host: 'ui.test:1', cookie: `${TOKEN_COOKIE}=t` },
    })
  ).text();

describe('candor ui over a trailing listing', () => {
  it('shows the listing as it stands and how many events it trails, then none once projected', async () => {
    dir = mkdtempSync(join(tmpdir(), 'candor-ui-trail-'));
    const file = join(dir, 'ledger.db');
    const gateway = openSqliteLedger(file);
    const store = openSqliteLedger(file);
    try {
      ui = await createUi({ store, ledger: `sqlite:${file}`, hosts: ['ui.test:1'], token: 't' });
      await gateway.append([opened('op_a'), opened('op_b')]);
      const behind = await page(ui);
      expect(behind).toContain('data-trails="2"');
      expect(behind).toContain('The listing trails the ledger by 2 event(s)');
      expect(behind).not.toContain('data-op="op_a"');
      // The gateway's own projector (or its close) brings the listing up; the page follows.
      await gateway.close();
      const caughtUp = await page(ui);
      expect(caughtUp).not.toContain('data-trails');
      expect(caughtUp).toContain('data-op="op_a"');
      expect(caughtUp).toContain('data-op="op_b"');
    } finally {
      await gateway.close();
    }
  });
});
