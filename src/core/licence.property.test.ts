// Property tests for licence(): seeded and replayable (set CANDOR_SEED to replay a printed seed).
// Inputs are real classifications (classify() over arbitrary evidence and contracts), so every
// RuleId classify() can produce is exercised, plus the facts the engine adds about the action.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { classify, RULE_IDS, isRuleId } from './classify.js';
import { ContractCheck, LocalError, Phase, type Contract, type Evidence } from './evidence.js';
import { licence, type LicenceFacts } from './licence.js';
import { ACTION_CLASS_RULES } from './rules.js';
import {
  ActionClass,
  Category,
  DispatchState,
  RemoteEffect,
  Retry,
  RetryDecision,
  RetryReason,
  valuesOf,
} from './vocabulary.js';

const seed = Number(process.env.CANDOR_SEED ?? 20261130);
const numRuns = 10_000;
const params = { seed, numRuns, verbose: 1 } as const;

const opt = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
  fc.option(a, { nil: undefined });

const evidenceArb: fc.Arbitrary<Evidence> = fc
  .record({
    phase: fc.constantFrom(...valuesOf(Phase)),
    blocked: opt(fc.constantFrom('gate_locked' as const, 'approval_denied' as const)),
    local_error: opt(fc.constantFrom(...valuesOf(LocalError))),
    response_misframed: opt(fc.boolean()),
    status: opt(
      fc.oneof(fc.constantFrom(200, 201, 401, 403, 409, 422, 429, 500, 502, 503), fc.nat(999)),
    ),
    www_authenticate: opt(fc.boolean()),
    retry_after_ms: opt(fc.integer({ min: 0, max: 600_000 })),
    idempotent_replay: opt(fc.boolean()),
    idempotency_in_progress: opt(fc.boolean()),
    contract_check: opt(fc.constantFrom(...valuesOf(ContractCheck))),
    exit_status: opt(fc.option(fc.integer({ min: 0, max: 255 }), { nil: null })),
  })
  .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as Evidence);

const contractArb: fc.Arbitrary<Contract> = fc.record({
  action_class: fc.constantFrom(...valuesOf(ActionClass)),
  idempotency_honoured: fc.boolean(),
  reconciliation: fc.boolean(),
  five_xx: fc.constantFrom('unknown' as const, 'not_applied' as const),
  default_retry_after_ms: fc.nat(60_000),
});

/** A classification as the engine sees it, with the facts it derives from the same contract. */
const caseArb = fc.tuple(evidenceArb, contractArb, fc.boolean()).map(([ev, ctr, automatic]) => ({
  c: classify(ev, ctr),
  facts: {
    read_only: ACTION_CLASS_RULES[ctr.action_class].read_only,
    idempotency_honoured: ctr.idempotency_honoured === true,
  } satisfies LicenceFacts,
  automatic,
}));

describe(`licence properties (seed ${seed}, ${numRuns} cases each)`, () => {
  it('is total and deterministic, and answers only with closed reasons and decisions', () => {
    fc.assert(
      fc.property(caseArb, ({ c, facts, automatic }) => {
        const a = licence(c, facts, automatic);
        expect(licence(c, facts, automatic)).toEqual(a);
        expect(isRuleId(c.rule)).toBe(true);
        if (a) {
          expect(valuesOf(RetryReason)).toContain(a.reason);
          expect(valuesOf(RetryDecision)).toContain(a.decision);
        }
      }),
      params,
    );
  });

  it('never licenses repeating a write whose effect may have happened, without a guarantee', () => {
    fc.assert(
      fc.property(caseArb, ({ c, facts, automatic }) => {
        const a = licence(c, facts, automatic);
        if (c.remote_effect !== 'none' && !facts.read_only && !facts.idempotency_honoured)
          expect(a).toBeNull();
      }),
      params,
    );
  });

  it('never licenses an unguaranteed write, for any consistent classification (not only classify())', () => {
    const anyCase = fc
      .record({
        category: fc.constantFrom(...valuesOf(Category)),
        retry: fc.constantFrom(...valuesOf(Retry)),
        remote_effect: fc.constantFrom(...valuesOf(RemoteEffect)),
        dispatch_state: fc.constantFrom(...valuesOf(DispatchState)),
        rule: fc.constantFrom(...RULE_IDS),
      })
      // Nothing sent means no effect: the one invariant every classification keeps.
      .filter((c) => c.dispatch_state !== 'not_sent' || c.remote_effect === 'none');
    fc.assert(
      fc.property(anyCase, fc.boolean(), (c, automatic) => {
        const facts = { read_only: false, idempotency_honoured: false };
        if (c.remote_effect !== 'none') expect(licence(c, facts, automatic)).toBeNull();
      }),
      params,
    );
  });

  it('the engine on its own never waits out a rate limit nor repeats a confirmed failure', () => {
    fc.assert(
      fc.property(caseArb, ({ c, facts }) => {
        const a = licence(c, facts, true);
        if (c.category === 'rate_limited' || c.category === 'confirmed_failure')
          expect(a).toBeNull();
      }),
      params,
    );
  });

  it('grants nothing after a refusal, a denial, a lock or a success', () => {
    const refusing = new Set([
      'succeeded',
      'authentication_failed',
      'authorization_denied',
      'confirmed_rejection',
      'approval_denied',
      'gate_locked',
    ]);
    fc.assert(
      fc.property(caseArb, ({ c, facts, automatic }) => {
        if (refusing.has(c.category)) expect(licence(c, facts, automatic)).toBeNull();
      }),
      params,
    );
  });

  it('names a 5xx as the reason exactly when a 5xx rule decided', () => {
    fc.assert(
      fc.property(caseArb, ({ c, facts, automatic }) => {
        const a = licence(c, facts, automatic);
        if (a?.reason === 'destination_5xx') expect(c.rule.startsWith('http_5xx')).toBe(true);
        if (a && c.rule.startsWith('http_5xx') && a.reason !== 'rate_limited')
          expect(a.reason).toBe('destination_5xx');
      }),
      params,
    );
  });

  it('a request that never left may always be sent again when the classifier allows it', () => {
    fc.assert(
      fc.property(caseArb, ({ c, facts, automatic }) => {
        if (
          c.dispatch_state === 'not_sent' &&
          c.retry === 'allowed' &&
          c.category !== 'confirmed_failure'
        )
          expect(licence(c, facts, automatic)).toEqual({
            reason: 'connection_not_established',
            decision: 'not_sent',
          });
      }),
      params,
    );
  });

  it('every rule id is distinct and recognised', () => {
    expect(new Set(RULE_IDS).size).toBe(RULE_IDS.length);
    for (const r of RULE_IDS) expect(isRuleId(r)).toBe(true);
    expect(isRuleId('not_sent_dns')).toBe(true);
    expect(isRuleId('http_5xx_someday')).toBe(false);
  });
});
