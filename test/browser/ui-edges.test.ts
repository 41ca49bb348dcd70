// `candor ui` at its edges in a real browser (Debian's chromium via playwright-core, as in
// ui.test.ts): a 1 MB remote id (with a right-to-left override) must leave the operation page within
// the viewport's width and under 200 KB; `//evil.example/?token=…` must stay on the view; `/audit`
// is served from the background verification's cache (its timing on a 50 MB ledger is a bench row:
// bench/hostile-edges.js).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/ledger/events.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/store.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { startUi, type StartedUi } from '../../src/web/server.js';

const CHROMIUM = '/usr/bin/chromium';
const skip = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} not found (apt-get install chromium)`;
if (skip && process.env.CI === 'true') throw new Error(`CI=true but ${skip}`);
if (skip) console.warn(`skipping browser edge tests: ${skip}`);

const HUGE = `\u202eevil-${'r'.repeat(1024 * 1024)}`;

const events = (): NewEvent[] => [
  {
    kind: 'operation_opened',
    at: 1_767_225_600_000,
    session_id: 'ses_edge',
    operation_id: 'op_huge',
    correlation_id: 'corr-huge',
    data: {
      owner: 'o',
      action: 'create_issue',
      action_class: 'create',
      intent: { kind: 'create_issue', subject_ref: HUGE, params_digest: 'sha256:00' },
      destination: { method: 'POST', route_template: '/v1/issues' },
      idempotency_key: null,
      supersedes_operation_id: null,
      attempt_budget: 3,
      params: null,
    },
  },
  {
    kind: 'operation_resolved',
    at: 1_767_225_600_100,
    session_id: 'ses_edge',
    operation_id: 'op_huge',
    correlation_id: 'corr-huge',
    data: { state: 'succeeded', category: 'succeeded', by: 'reconciliation', remote_refs: [HUGE] },
  } as unknown as NewEvent,
];

describe.skipIf(skip !== undefined)(
  'candor ui at its edges, in chromium',
  { timeout: 120_000 },
  () => {
    let dir: string;
    let store: LedgerStore;
    let ui: StartedUi;
    let context: BrowserContext;
    let page: Page;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'candor-ui-edges-'));
      store = openSqliteLedger(join(dir, 'ledger.db'));
      await store.append(events());
      ui = await startUi({ store, ledger: 'sqlite:edges', pollMs: 200 });
      context = await chromium.launchPersistentContext(join(dir, 'profile'), {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
        viewport: { width: 1280, height: 900 },
      });
      page = context.pages()[0] ?? (await context.newPage());
      await page.goto(ui.urlWithToken);
    }, 120_000);

    afterAll(async () => {
      await context?.close();
      await ui?.close();
      await store?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('a 1 MB remote id leaves the operation page within the viewport and under 200 KB', async () => {
      const res = await page.goto(`${ui.url}op/op_huge`);
      expect(res?.status()).toBe(200);
      const body = await res!.body();
      expect(body.length).toBeLessThan(200 * 1024);
      const width = await page.evaluate<number>('document.documentElement.scrollWidth');
      expect(width).toBeLessThanOrEqual(1280);
      // The override is shown as text, inside an isolating element; the whole value is one click away.
      expect(body.toString('utf8')).not.toContain('\u202e');
      expect(await page.locator('bdi.ext', { hasText: '\\u202eevil-rrr' }).count()).toBeGreaterThan(
        0,
      );
      const bidi = await page.evaluate<string>(
        "getComputedStyle(document.querySelector('bdi.ext')).unicodeBidi",
      );
      expect(bidi).toBe('isolate');
      await page.locator('a.whole').first().click();
      await page.waitForURL(/\/op\/op_huge\/events\.json$/);
      expect((await page.content()).length).toBeGreaterThan(1024 * 1024);
    });

    it('//evil.example/?token=… stays on the view', async () => {
      // Raw request: fetch() would normalise the path before it is sent.
      const u = new URL(ui.url);
      const location = await new Promise<string | undefined>((resolve, reject) => {
        const req = request(
          {
            host: u.hostname,
            port: u.port,
            path: `//evil.example/?token=${ui.ui.token}`,
            headers: { host: u.host },
          },
          (res) => {
            res.resume();
            resolve(res.headers.location);
          },
        );
        req.on('error', reject);
        req.end();
      });
      expect(location).toBe('/evil.example/');
      await page.goto(`${ui.url.replace(/\/$/, '')}//evil.example/?token=${ui.ui.token}`);
      expect(new URL(page.url()).host).toBe(u.host);
    });

    it('serves /audit from the cache while the ledger position is unchanged', async () => {
      await ui.ui.auditIdle();
      const runs = ui.ui.auditRuns();
      for (let i = 0; i < 3; i++) {
        const res = await page.goto(`${ui.url}audit`);
        expect(await res!.text()).toContain('data-audit-code="INTACT"');
      }
      await ui.ui.auditIdle();
      expect(ui.ui.auditRuns()).toBe(runs);
    });
  },
);
