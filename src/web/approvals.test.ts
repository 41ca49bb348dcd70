// The approvals page without a browser (test/browser/approvals.test.ts drives it in chromium with
// OpenID sign-in): per-approver tokens, every write's origin and CSRF token, the decision bound to
// the request shown, the four-eyes rule, and what the gate then records.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { approvalQueue } from '../approvals/approvers/queue.js';
import { consoleApprover } from '../approvals/approvers/console.js';
import { createApprovalGate } from '../approvals/gate.js';
import type { NewEvent } from '../ledger/events.js';
import { openMemoryLedger } from '../ledger/memory/store.js';
import { approvalsWebSchema } from '../config/approvals-web-schema.js';
import { approverSignIn } from './approver-signin.js';
import { APPROVER_COOKIE } from './approvals.js';
import { createUi, type UiApp } from './server.js';

const HOST = 'ui.test:1';
const ORIGIN = `http://${HOST}`;
const hash = (s: string): string => createHash('sha256').update(s).digest('hex');

let ui: UiApp | null = null;
let dir: string | null = null;
afterEach(async () => {
  await ui?.close();
  ui = null;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = null;
});

const opened = (caller: { subject: string }): NewEvent => ({
  kind: 'operation_opened',
  at: Date.now(),
  session_id: 'ses_1',
  operation_id: 'op_pay',
  correlation_id: 'corr-pay',
  data: {
    owner: 'o',
    action: 'create_payment',
    action_class: 'financial',
    intent: { kind: 'create_payment', subject_ref: null, params_digest: 'sha256:00' },
    destination: { method: 'POST', route_template: '/v1/payments' },
    idempotency_key: null,
    supersedes_operation_id: null,
    attempt_budget: 3,
    params: null,
    caller: { kind: 'token', subject: caller.subject, client_id: null, issuer: null, scopes: [] },
  },
});

async function setup() {
  dir = mkdtempSync(join(tmpdir(), 'candor-web-approvals-'));
  const ledger = openMemoryLedger();
  await ledger.append([opened({ subject: 'bob' })]);
  const queue = approvalQueue(dir);
  const gate = createApprovalGate({
    ledger,
    approver: consoleApprover({ queue, poll_ms: 10 }),
    wait_ms: 60_000,
  });
  const config = approvalsWebSchema.parse({
    tokens: [
      { name: 'bob', sha256: hash('bob-approver-token') },
      { name: 'carol', sha256: hash('carol-approver-token') },
    ],
  });
  ui = await createUi({
    store: ledger,
    ledger: 'memory:',
    hosts: [HOST],
    approvals: { queue, signIn: approverSignIn({ config }), four_eyes: true },
  });
  const app = ui;
  const decision = gate.check({
    session_id: 'ses_1',
    operation_id: 'op_pay',
    action: 'create_payment',
    action_class: 'financial',
    request_fingerprint: 'sha256:req1',
    prior_dispatch_state: null,
    intent: { kind: 'create_payment' },
    request: {
      method: 'POST',
      target: '/v1/payments',
      destination: 'https://pay.example',
      body: { amount: 100, to: 'acct-9' },
      headers: { 'content-type': 'application/json', 'idempotency-key': 'k1' },
      credential: 'vault:payments',
    },
  });
  let cards = await queue.pending(Date.now());
  while (cards.length === 0) {
    await new Promise((r) => setTimeout(r, 10));
    cards = await queue.pending(Date.now());
  }
  const req = (path: string, init: RequestInit & { headers?: Record<string, string> } = {}) =>
    Promise.resolve(app.app.request(path, { ...init, headers: { host: HOST, ...init.headers } }));
  async function signIn(token: string): Promise<{ cookie: string; csrf: string }> {
    const res = await req('/approvals/login/token', {
      method: 'POST',
      headers: {
        origin: ORIGIN,
        'sec-fetch-site': 'same-origin',
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ token }).toString(),
    });
    expect(res.status).toBe(303);
    const set = res.headers.get('set-cookie') ?? '';
    const sid = new RegExp(`${APPROVER_COOKIE}=([^;]+)`).exec(set)![1]!;
    const cookie = `${APPROVER_COOKIE}=${sid}`;
    const page = await (await req('/approvals', { headers: { cookie } })).text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
    return { cookie, csrf };
  }
  const decide = (
    who: { cookie: string; csrf: string },
    fields: Record<string, string>,
    headers: Record<string, string> = { origin: ORIGIN, 'sec-fetch-site': 'same-origin' },
  ) =>
    req(`/approvals/${cards[0]!.approval_id}/decide`, {
      method: 'POST',
      headers: {
        cookie: who.cookie,
        'content-type': 'application/x-www-form-urlencoded',
        ...headers,
      },
      body: new URLSearchParams({
        csrf: who.csrf,
        decision: 'approve',
        reason: 'ok',
        request_fingerprint: 'sha256:req1',
        ...fields,
      }).toString(),
    });
  return { ledger, queue, gate, decision, card: cards[0]!, req, signIn, decide };
}

describe('approvals page', () => {
  it('needs its own sign-in, not the view token; a wrong approver token is refused', async () => {
    const t = await setup();
    const anon = await t.req('/approvals');
    expect(anon.status).toBe(401);
    expect(await anon.text()).toContain('Approver token');
    const wrong = await t.req('/approvals/login/token', {
      method: 'POST',
      headers: { origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'token=nope',
    });
    expect(wrong.status).toBe(403);
    expect(wrong.headers.get('set-cookie') ?? '').not.toContain(`${APPROVER_COOKIE}=`);
    // The rest of the view still needs its own token.
    expect((await t.req('/')).status).toBe(401);
    await t.gate.shutdown();
  });

  it('shows the exact request: method, URL, headers (credential not shown), body bytes', async () => {
    const t = await setup();
    const carol = await t.signIn('carol-approver-token');
    const page = await (await t.req('/approvals', { headers: { cookie: carol.cookie } })).text();
    expect(page).toContain('https://pay.example/v1/payments');
    expect(page).toContain('idempotency-key: k1');
    expect(page).toContain('[credential vault:payments, added when sent]');
    expect(page).toContain('{&quot;amount&quot;:100,&quot;to&quot;:&quot;acct-9&quot;}');
    expect(page).toContain('Asked by');
    expect(page).toContain('bob');
    await t.gate.shutdown();
  });

  it('refuses every write that is cross-site or lacks the session CSRF token: nothing decided', async () => {
    const t = await setup();
    const carol = await t.signIn('carol-approver-token');
    const attempts = [
      { origin: 'http://evil.test', 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'cross-site' },
      { origin: 'null' },
      { origin: ORIGIN, 'sec-fetch-site': 'same-site' },
    ];
    for (const headers of attempts) {
      const res = await t.decide(carol, {}, headers);
      expect(res.status).toBe(403);
    }
    const forged = await t.decide(carol, { csrf: 'guessed' });
    expect(forged.status).toBe(403);
    expect(await forged.text()).toContain('CSRF');
    expect(await t.queue.decisionFor(t.card.approval_id)).toBeNull();
    expect((await t.ledger.read()).filter((e) => e.kind === 'approval_decided')).toEqual([]);
    await t.gate.shutdown();
  });

  it('binds the decision to the request shown, refuses self-approval, records who and why', async () => {
    const t = await setup();
    const carol = await t.signIn('carol-approver-token');
    const other = await t.decide(carol, { request_fingerprint: 'sha256:another' });
    expect(other.status).toBe(409);
    expect(await other.text()).toContain('fingerprint_mismatch');
    const noReason = await t.decide(carol, { reason: '  ' });
    expect(noReason.status).toBe(400);
    // bob asked for the call: under four-eyes his approval is refused and shown.
    const bob = await t.signIn('bob-approver-token');
    const self = await t.decide(bob, {});
    expect(self.status).toBe(403);
    expect(await self.text()).toContain('four-eyes');
    expect(await t.queue.decisionFor(t.card.approval_id)).toBeNull();
    const ok = await t.decide(carol, { reason: 'invoice 77 checked' });
    expect(ok.status).toBe(200);
    expect(await t.decision).toEqual({ decision: 'approved' });
    const decided = (await t.ledger.read()).filter((e) => e.kind === 'approval_decided');
    expect(decided.map((e) => e.data)).toEqual([
      {
        approval_id: t.card.approval_id,
        decision: 'approved',
        approver: 'token:carol',
        decided_by: { kind: 'token', subject: 'carol', issuer: null },
        reason: 'invoice 77 checked',
        request_fingerprint: 'sha256:req1',
        requested_by: { kind: 'token', subject: 'bob', client_id: null, issuer: null, scopes: [] },
        requested_via: 'agent',
      },
    ]);
    // The first decision stands: the request has left the queue, nothing more can be decided.
    const again = await t.decide(carol, { decision: 'deny' });
    expect(again.status).toBe(404);
    expect((await t.ledger.read()).filter((e) => e.kind === 'approval_decided')).toHaveLength(1);
  });
});
