// Issue 34, property: for random arguments and histories, no request reaches the fake service when
// the policy denies. Each run draws a history of earlier payments (some ending unknown through a
// reply lost after commit) and a new payment; the policy's own rules (over 500, a 2000 daily cap
// counting unknown outcomes) say whether it must be denied, and the fake's ground truth must agree.
// Seeded: a failure prints the seed and the path to replay it.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { PAY_TOKEN, policyConfigYaml, startPolicyGateway } from './support/policy-gateway.js';

let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ seed: 3434, tokens: [{ name: 'agent', token: PAY_TOKEN }] });
});
afterAll(async () => {
  await fake.close();
});

const POLICY = `permit (principal, action, resource);
@id("over-500")
forbid (principal, action == Candor::Action::"create_payment", resource)
when { context.args.amount > 500 };
@id("daily-cap")
forbid (principal, action == Candor::Action::"create_payment", resource)
when { context.totals.spent_today.sum + context.args.amount > 2000 };
`;
const SECTION = `  files: [p.cedar]
  totals:
    spent_today: { argument: amount, actions: [create_payment], window: day }`;

const posts = () =>
  fake.groundTruth().filter((t) => t.event === 'received' && t.path === '/v1/payments').length;

describe('property: a denied call sends nothing', () => {
  it('for random amounts and histories (lost replies included), denied ⇔ nothing received', async () => {
    const step = fc.record({ amount: fc.integer({ min: 1, max: 900 }), lose: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 6 }), async (steps) => {
        fake.reset();
        const gw = await startPolicyGateway(
          policyConfigYaml({ origin: fake.url, policy: SECTION, deadlineMs: 200 }),
          { 'p.cedar': POLICY },
        );
        try {
          let spent = 0; // what may have been spent: applied and unknown alike
          for (const s of steps) {
            if (s.lose)
              fake.arm({
                match: { method: 'POST', path: '/v1/payments' },
                phase: 'after_commit',
                action: 'delay',
                delay_ms: 600,
              });
            const before = posts();
            const env = await gw.call({ amount: s.amount });
            const mustDeny = s.amount > 500 || spent + s.amount > 2000;
            if (mustDeny) {
              expect(env.category).toBe('authorization_denied');
              expect(posts()).toBe(before);
              fake.disarm();
            } else {
              expect(env.category).not.toBe('authorization_denied');
              expect(posts()).toBe(before + 1);
              spent += s.amount;
            }
          }
        } finally {
          await gw.close();
        }
      }),
      { numRuns: 12, seed: 34, verbose: true },
    );
  });
});
