// Issue 34: Cedar policies decided before every attempt, on real sockets against the fake service.
// What the fake received (its ground truth and its stored payments), what the agent was told and
// what the ledger holds are asserted; never only `ok === false`.
import { hintsFor } from '../src/web/hints.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import type { StoredEvent } from '../src/ledger/events.js';
import { projectOperation } from '../src/ledger/projection.js';
import { formatOperation } from '../src/cli/commands/ops.js';
import { operationBody } from '../src/web/pages/operation.js';
import {
  PAY_TOKEN,
  policyConfigYaml,
  startPolicyGateway,
  type PolicyGateway,
} from './support/policy-gateway.js';

let fake: FakeService;
let gw: PolicyGateway | null = null;
beforeAll(async () => {
  fake = await startFakeService({ seed: 34, tokens: [{ name: 'agent', token: PAY_TOKEN }] });
});
afterEach(async () => {
  await gw?.close();
  gw = null;
  fake.reset();
});
afterAll(async () => {
  await fake.close();
});

const received = () =>
  fake.groundTruth().filter((t) => t.event === 'received' && t.path === '/v1/payments');
const paid = () => fake.resources.all('payments').map((p) => p['amount']);

async function decisions(
  op: string,
): Promise<Array<Extract<StoredEvent, { kind: 'policy_decided' }>['data']>> {
  const events = await gw!.ledger.query({ operation_id: op });
  return events.flatMap((e) => (e.kind === 'policy_decided' ? [e.data] : []));
}

const BASE = `permit (principal, action, resource);\n`;

describe('policy over arguments', () => {
  const limit = `${BASE}
@id("payment-over-500")
@reason("payments over 500 EUR are not allowed for agents")
forbid (principal, action == Candor::Action::"create_payment", resource)
when { context.args.amount > 500 };
`;

  it('denies a payment over the limit: authorization_denied, the fake receives nothing', async () => {
    gw = await startPolicyGateway(
      policyConfigYaml({ origin: fake.url, policy: '  - limits.cedar' }),
      { 'limits.cedar': limit },
    );
    const env = await gw.call({ amount: 501 });
    expect(env).toMatchObject({
      ok: false,
      category: 'authorization_denied',
      retry: 'never',
      remote_effect: 'none',
      data: {
        policy: {
          decision: 'deny',
          policy_ids: ['payment-over-500'],
          reason: 'payments over 500 EUR are not allowed for agents',
        },
      },
    });
    expect(env.message).toContain('payment-over-500');
    expect(received()).toHaveLength(0);
    expect(paid()).toEqual([]);
    const recorded = await decisions(env.operation_id!);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({
      decision: 'deny',
      policy_ids: ['payment-over-500'],
      attempt: 1,
    });
    expect(recorded[0]!.context_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const events = await gw.ledger.query({ operation_id: env.operation_id! });
    expect(events.some((e) => e.kind === 'attempt_started')).toBe(false);
    // Shown where people look: `ops show` and the web view's operation page.
    const view = projectOperation(events)!;
    expect(view.state).toBe('cancelled');
    const shown = formatOperation(view);
    expect(shown).toContain('attempt 1  deny by payment-over-500');
    expect(shown).toContain(recorded[0]!.context_digest);
    const page = operationBody(view, events, hintsFor('memory:')).toString();
    expect(page).toContain('Policy decisions (1)');
    expect(page).toContain('payment-over-500');
  });

  it('lets a payment under the limit through, and records the permit that allowed it', async () => {
    gw = await startPolicyGateway(
      policyConfigYaml({ origin: fake.url, policy: '  - limits.cedar' }),
      { 'limits.cedar': limit },
    );
    const env = await gw.call({ amount: 500 });
    expect(env).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
    expect(received()).toHaveLength(1);
    expect(paid()).toEqual([500]);
    const [d] = await decisions(env.operation_id!);
    expect(d).toMatchObject({ decision: 'allow', policy_ids: ['limits.cedar:1'], attempt: 1 });
  });
});

describe('policy over the ledger: a daily cap', () => {
  const cap = `${BASE}
@id("daily-cap")
@reason("no more than 2000 EUR a day per agent")
forbid (principal, action == Candor::Action::"create_payment", resource)
when { context.totals.spent_today.sum + context.args.amount > 2000 };
`;
  const section = `  files: [cap.cedar]
  zone: Europe/Berlin
  totals:
    spent_today: { argument: amount, actions: [create_payment], per: principal, window: day }`;

  it('counts an unknown outcome as spent: the next call over the cap is denied, one under it passes', async () => {
    gw = await startPolicyGateway(
      policyConfigYaml({ origin: fake.url, policy: section, deadlineMs: 300 }),
      { 'cap.cedar': cap },
    );
    // The payment commits, then its reply is held past the deadline: outcome unknown.
    fake.arm({
      match: { method: 'POST', path: '/v1/payments' },
      phase: 'after_commit',
      action: 'delay',
      delay_ms: 1500,
    });
    const first = await gw.call({ amount: 1500 });
    expect(first).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    expect(paid()).toEqual([1500]);

    const over = await gw.call({ amount: 600 });
    expect(over).toMatchObject({
      category: 'authorization_denied',
      remote_effect: 'none',
      data: { policy: { policy_ids: ['daily-cap'] } },
    });
    expect(received()).toHaveLength(1);

    const under = await gw.call({ amount: 400 });
    expect(under).toMatchObject({ category: 'succeeded' });
    expect(paid()).toEqual([1500, 400]);
    // Now 1900 is spent (or may be): even 101 more is over the cap.
    const after = await gw.call({ amount: 101 });
    expect(after.category).toBe('authorization_denied');
    expect(received()).toHaveLength(2);
  });

  it('a denied call is not spent: it does not count toward the cap', async () => {
    gw = await startPolicyGateway(policyConfigYaml({ origin: fake.url, policy: section }), {
      'cap.cedar': cap,
    });
    expect((await gw.call({ amount: 2001 })).category).toBe('authorization_denied');
    expect((await gw.call({ amount: 2000 })).category).toBe('succeeded');
    expect(paid()).toEqual([2000]);
  });
});

describe('policy over the operation state', () => {
  const retryNeedsPerson = `${BASE}
@id("retry-after-unknown")
@approval("required")
@reason("a retry of an operation whose outcome is unknown needs a person")
forbid (principal, action, resource)
when { context.operation.may_have_applied };
`;

  it('a first call goes out without a prompt; the retry of its unknown outcome asks a person', async () => {
    gw = await startPolicyGateway(
      policyConfigYaml({
        origin: fake.url,
        policy: '  - retry.cedar',
        honoured: true,
        approvals: true,
        deadlineMs: 300,
      }),
      { 'retry.cedar': retryNeedsPerson },
      [false],
    );
    // A first call without trouble: no prompt.
    const plain = await gw.call({ amount: 10 });
    expect(plain.category).toBe('succeeded');
    expect(gw.asked).toHaveLength(0);

    // The reply is lost after commit; the honoured key licenses an automatic retry, which the
    // policy sends to a person, who says no.
    fake.arm({
      match: { method: 'POST', path: '/v1/payments' },
      phase: 'after_commit',
      action: 'delay',
      delay_ms: 1500,
    });
    const env = await gw.call({ amount: 20 });
    expect(gw.asked).toHaveLength(1);
    expect(gw.asked[0]).toContain('retry-after-unknown');
    expect(env).toMatchObject({ category: 'approval_denied', remote_effect: 'unknown' });
    // One POST for the plain call, one for the first attempt; the retry was never sent.
    expect(received()).toHaveLength(2);
    const recorded = await decisions(env.operation_id!);
    expect(recorded.map((d) => [d.attempt, d.decision])).toEqual([
      [1, 'allow'],
      [2, 'require_approval'],
    ]);
    expect(recorded[1]!.policy_ids).toEqual(['retry-after-unknown']);
    const events = await gw.ledger.query({ operation_id: env.operation_id! });
    const card = events.find((e) => e.kind === 'approval_requested');
    expect(card?.kind === 'approval_requested' && card.data.card['reason']).toBe('policy_required');
  });

  it('without an approver, a policy that requires a person denies (fail closed)', async () => {
    gw = await startPolicyGateway(
      policyConfigYaml({
        origin: fake.url,
        policy: '  - retry.cedar',
        honoured: true,
        deadlineMs: 300,
      }),
      { 'retry.cedar': retryNeedsPerson },
    );
    fake.arm({
      match: { method: 'POST', path: '/v1/payments' },
      phase: 'after_commit',
      action: 'delay',
      delay_ms: 1500,
    });
    const env = await gw.call({ amount: 20 });
    // The denied retry states the operation (its first attempt may have applied), the denial is
    // its refusal code: never authorization_denied, which would read as "not applied".
    expect(env).toMatchObject({
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      data: { refusal: { code: 'policy_denied' } },
    });
    expect(env.retry).not.toBe('never');
    expect(env.message).toContain('Policy denied this retry');
    expect(received()).toHaveLength(1);
  });
});

describe('policy errors fail closed', () => {
  it('an evaluation error denies: nothing is sent', async () => {
    // Cedar skips an erroring forbid and would allow; Candor denies.
    const overflow = `${BASE}
@id("overflowing")
forbid (principal, action, resource)
when { context.args.amount * 4611686018427387904 > 10 };
`;
    gw = await startPolicyGateway(
      policyConfigYaml({ origin: fake.url, policy: '  - overflow.cedar' }),
      { 'overflow.cedar': overflow },
    );
    const env = await gw.call({ amount: 3 });
    expect(env).toMatchObject({
      category: 'authorization_denied',
      remote_effect: 'none',
      data: { policy: { decision: 'deny', policy_ids: ['overflowing'] } },
    });
    expect((env.data as { policy: { reason: string } }).policy.reason).toContain('overflow');
    expect(received()).toHaveLength(0);
  });
});
