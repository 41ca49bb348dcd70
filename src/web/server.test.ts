// The view without a browser: access control, read-only, and the audit page on a tampered ledger.
// (test/browser/ drives the same app in chromium.)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../ledger/events.js';
import { openMemoryLedger } from '../ledger/memory/store.js';
import { openSqliteLedger } from '../ledger/sqlite/store.js';
import { createUi, TOKEN_COOKIE, type UiApp } from './server.js';

const opened = (id: string, at: number): NewEvent => ({
  kind: 'operation_opened',
  at,
  session_id: 'ses_1',
  operation_id: id,
  correlation_id: `corr-${id}`,
  data: {
    owner: 'o',
    action: 'create_issue',
    action_class: 'create',
    intent: { kind: 'create_issue', subject_ref: null, params_digest: 'sha256:00' },
    destination: { method: 'POST', route_template: '/v1/issues' },
    idempotency_key: null,
    supersedes_operation_id: null,
    attempt_budget: 3,
    params: null,
  },
});

let ui: UiApp | null = null;
let dir: string | null = null;
afterEach(async () => {
  await ui?.close();
  ui = null;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = null;
});

const get = (app: UiApp, path: string, headers: Record<string, string> = {}): Promise<Response> =>
  Promise.resolve(app.app.request(path, { headers: { host: 'ui.test:1', ...headers } }));

describe('candor ui server', () => {
  it('answers only with the token, the expected Host and Origin, and only GET', async () => {
    const store = openMemoryLedger();
    await store.append([opened('op_a', 1)]);
    ui = await createUi({ store, ledger: 'memory:', hosts: ['ui.test:1'], token: 't0ken' });
    const cookie = { cookie: `${TOKEN_COOKIE}=t0ken` };
    expect((await get(ui, '/')).status).toBe(401);
    expect((await get(ui, '/?token=wrong')).status).toBe(401);
    expect((await get(ui, '/', { cookie: `${TOKEN_COOKIE}=t0keN` })).status).toBe(401);
    expect((await get(ui, '/', { ...cookie, host: 'evil.test:1' })).status).toBe(403);
    expect((await get(ui, '/', { ...cookie, origin: 'http://evil.test' })).status).toBe(403);
    expect((await get(ui, '/', { ...cookie, origin: 'http://ui.test:1' })).status).toBe(200);
    const post = await ui.app.request('/', {
      method: 'POST',
      headers: { host: 'ui.test:1', ...cookie },
    });
    expect(post.status).toBe(405);
    const first = await get(ui, '/?token=t0ken&state=open');
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe('/?state=open');
    const page = await get(ui, '/', cookie);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await page.text()).toContain('data-op="op_a"');
    expect((await get(ui, '/op/op_missing', cookie)).status).toBe(404);
  });

  it('the audit page names the code and the first bad seq of a tampered ledger', async () => {
    dir = mkdtempSync(join(tmpdir(), 'candor-ui-audit-'));
    const file = join(dir, 'ledger.db');
    const store = openSqliteLedger(file);
    await store.append([opened('op_a', 1), opened('op_b', 2), opened('op_c', 3)]);
    ui = await createUi({ store, ledger: `sqlite:${file}`, hosts: ['ui.test:1'], token: 't' });
    const cookie = { cookie: `${TOKEN_COOKIE}=t` };
    await ui.auditIdle();
    const intact = await (await get(ui, '/audit', cookie)).text();
    expect(intact).toContain('data-audit-code="INTACT"');
    // No checkpoint and no log key: the records agree, but nothing anchors them. That is never
    // shown as a green pass beside "could have been rewritten".
    const verdict = /<div\s+class="verdict (\w+)"[^]*?<\/div>/.exec(intact)!;
    expect(verdict[1]).toBe('warn');
    expect(verdict[0]).toContain('UNANCHORED');
    expect(verdict[0]).toContain('could have been rewritten');
    expect(verdict[0]).not.toMatch(/>\s*INTACT/);
    expect(intact).toContain('data-audit-anchored="false"');
    expect(intact).not.toContain('class="verdict ok"');
    const db = new Database(file);
    const row = db.prepare('SELECT bytes FROM ledger_events WHERE seq = 2').get() as {
      bytes: Buffer;
    };
    const changed = Buffer.from(row.bytes.toString('utf8').replace('op_b', 'op_x'));
    db.prepare('UPDATE ledger_events SET bytes = ? WHERE seq = 2').run(changed);
    db.close();
    await store.append([opened('op_d', 4)]);
    await ui.poll();
    await get(ui, '/audit', cookie);
    await ui.auditIdle();
    const text = await (await get(ui, '/audit', cookie)).text();
    expect(text).toContain('data-audit-code="MODIFIED"');
    expect(text).toContain('first bad record at seq 2');
    expect(text).toContain('class="verdict bad"');
  });

  it('redirects only to its own paths: //evil.example/?token=… stays on the view', async () => {
    const store = openMemoryLedger();
    ui = await createUi({ store, ledger: 'memory:', hosts: ['ui.test:1'], token: 't0ken' });
    for (const [path, location] of [
      ['//evil.example/?token=t0ken', '/evil.example/'],
      ['//evil.example/x?token=t0ken&a=1', '/evil.example/x?a=1'],
      ['/%5Cevil.example/?token=t0ken', '/%5Cevil.example/'],
    ] as const) {
      const res = await get(ui, path);
      expect(res.status).toBe(303);
      expect(res.headers.get('location')).toBe(location);
      expect(new URL(res.headers.get('location')!, 'http://ui.test:1').host).toBe('ui.test:1');
    }
  });

  it('encodes ids in links and shows a 1 MB remote id cut, escaped and bidi-isolated', async () => {
    const store = openMemoryLedger();
    const huge = `\u202e${'r'.repeat(1024 * 1024)}`;
    await store.append([{ ...opened('op_big', 1), session_id: '../audit' }]);
    await store.append([
      {
        kind: 'operation_resolved',
        at: 2,
        session_id: '../audit',
        operation_id: 'op_big',
        correlation_id: 'corr-op_big',
        data: {
          state: 'succeeded',
          category: 'succeeded',
          by: 'reconciliation',
          remote_refs: [huge],
        },
      } as unknown as NewEvent,
    ]);
    ui = await createUi({ store, ledger: 'memory:', hosts: ['ui.test:1'], token: 't' });
    const cookie = { cookie: `${TOKEN_COOKIE}=t` };
    const res = await get(ui, '/op/op_big', cookie);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text.length).toBeLessThan(200_000);
    expect(text).toContain('href="/sessions/..%2Faudit"');
    expect(text).not.toContain('href="/sessions/../audit"');
    expect(text).not.toContain('\u202e');
    expect(text).toContain('<bdi class="ext">\\u202e');
    expect(text).toContain(`(${huge.length} characters)`);
    expect(text).toContain('href="/op/op_big/events.json">show all</a>');
    const whole = await get(ui, '/op/op_big/events.json', cookie);
    expect(whole.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await whole.text()).toContain(huge);
  });

  it("shows the trace ids of the calls on the operation's timeline and on each attempt", async () => {
    const store = openMemoryLedger();
    const tp1 = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const tp2 = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const op = opened('op_traced', 1);
    await store.append([
      { ...op, data: { ...op.data, traceparent: tp1 } } as NewEvent,
      {
        kind: 'attempt_started',
        at: 2,
        session_id: 'ses_1',
        operation_id: 'op_traced',
        correlation_id: 'corr-op_traced',
        data: {
          attempt_id: 'att_1',
          number: 1,
          worker: 'o',
          retry_of_attempt_id: null,
          retry_reason: null,
          retry_decision: null,
          attempt_budget_remaining: 2,
          request_fingerprint: 'sha256:00',
          prior_request_fingerprint: null,
          credential_ref: null,
          destination: { method: 'POST', route_template: '/v1/issues' },
          traceparent: tp2,
        },
      },
      opened('op_untraced', 3),
    ]);
    ui = await createUi({ store, ledger: 'memory:', hosts: ['ui.test:1'], token: 't' });
    const cookie = { cookie: `${TOKEN_COOKIE}=t` };
    const text = await (await get(ui, '/op/op_traced', cookie)).text();
    const ids = [...text.matchAll(/<span class="mono" data-trace-id>([0-9a-f]+)<\/span>/g)];
    expect(ids.map((m) => m[1])).toEqual([tp1.split('-')[1], tp2.split('-')[1]]);
    expect(text).toMatch(/data-attempt-trace>0af7651916cd43dd8448eb211c80319c</);
    const plain = await (await get(ui, '/op/op_untraced', cookie)).text();
    expect(plain).toContain('No trace recorded (telemetry was off).');
    expect(plain).not.toContain('data-trace-id>');
  });

  it('serves /audit from a background verification cached by ledger position', async () => {
    const store = openMemoryLedger();
    await store.append([opened('op_a', 1), opened('op_b', 2)]);
    let verifications = 0;
    let release: () => void = () => undefined;
    let gate = new Promise<void>((r) => (release = r));
    const { verifyStore } = await import('../ledger/chain/export.js');
    ui = await createUi({
      store,
      ledger: 'memory:',
      hosts: ['ui.test:1'],
      token: 't',
      verify: async (s, o) => {
        verifications++;
        await gate;
        return verifyStore(s, o);
      },
    });
    const cookie = { cookie: `${TOKEN_COOKIE}=t` };
    // The first view does not wait for the verification: it says one is running.
    const first = await (await get(ui, '/audit', cookie)).text();
    expect(first).toContain('data-audit-pending');
    release();
    await ui.auditIdle();
    expect(await (await get(ui, '/audit', cookie)).text()).toContain('data-audit-code="INTACT"');
    await get(ui, '/audit', cookie);
    await get(ui, '/audit', cookie);
    await ui.auditIdle();
    // Same ledger position: served from the cache, no new verification.
    expect(verifications).toBe(1);
    expect(ui.auditRuns()).toBe(1);
    gate = Promise.resolve();
    await store.append([opened('op_c', 3)]);
    await ui.poll();
    await get(ui, '/audit', cookie);
    await ui.auditIdle();
    expect(verifications).toBe(2);
    expect(await (await get(ui, '/audit', cookie)).text()).toContain('data-verified-at="3"');
  });
});
