// Property tests for classify(): seeded and replayable (set CANDOR_SEED to replay a printed seed).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { classify, EVIDENCE_FIELDS } from './classify.js';
import {
  ContractCheck,
  contractSchema,
  evidenceSchema,
  LocalError,
  Phase,
  type Contract,
  type Evidence,
} from './evidence.js';
import { ActionClass, valuesOf } from './vocabulary.js';

const seed = Number(process.env.CANDOR_SEED ?? 20261130);
const numRuns = 10_000;
const params = { seed, numRuns, verbose: 1 } as const;

const opt = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
  fc.option(a, { nil: undefined });

const statusArb = fc.oneof(
  fc.constantFrom(
    200,
    201,
    204,
    301,
    304,
    400,
    401,
    403,
    404,
    408,
    409,
    422,
    429,
    500,
    502,
    503,
    504,
  ),
  fc.integer({ min: 100, max: 999 }),
);

const evidenceArb: fc.Arbitrary<Evidence> = fc
  .record({
    phase: fc.constantFrom(...valuesOf(Phase)),
    blocked: opt(fc.constantFrom('gate_locked' as const, 'approval_denied' as const)),
    local_error: opt(fc.constantFrom(...valuesOf(LocalError))),
    response_misframed: opt(fc.boolean()),
    status: opt(statusArb),
    www_authenticate: opt(fc.boolean()),
    retry_after_ms: opt(fc.integer({ min: 0, max: 600_000 })),
    idempotent_replay: opt(fc.boolean()),
    idempotency_in_progress: opt(fc.boolean()),
    contract_check: opt(fc.constantFrom(...valuesOf(ContractCheck))),
    exit_status: opt(fc.option(fc.integer({ min: 0, max: 255 }), { nil: null })),
    reconciliation_matches: opt(fc.nat(3)),
  })
  .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as Evidence);

const contractArb: fc.Arbitrary<Contract> = fc.record({
  action_class: fc.constantFrom(...valuesOf(ActionClass)),
  idempotency_honoured: fc.boolean(),
  reconciliation: fc.boolean(),
  five_xx: fc.constantFrom('unknown' as const, 'not_applied' as const),
  default_retry_after_ms: fc.nat(60_000),
});

/** The service explicitly refused or said it did not do the work. */
function explicitRefusal(ev: Evidence, c: Contract): boolean {
  if (ev.status === undefined)
    return ev.contract_check === 'documented_failure' && typeof ev.exit_status === 'number';
  const s = ev.status;
  if (s >= 400 && s < 500) return !ev.idempotency_in_progress || s === 401 || s === 403;
  if (s >= 500 && s < 600)
    return ev.contract_check === 'documented_failure' || c.five_xx === 'not_applied';
  return false;
}

describe(`classify properties (seed ${seed}, ${numRuns} cases each)`, () => {
  it('never throws, for any input at all', () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (e, c) => {
        const out = classify(e, c);
        expect(typeof out.category).toBe('string');
      }),
      params,
    );
  });

  it('is deterministic', () => {
    fc.assert(
      fc.property(evidenceArb, contractArb, (e, c) => {
        expect(classify(structuredClone(e), structuredClone(c))).toEqual(classify(e, c));
      }),
      params,
    );
  });

  it('says remote_effect "none" only when no byte left, the service refused, or a read got an answer', () => {
    fc.assert(
      fc.property(evidenceArb, contractArb, (e, c) => {
        const out = classify(e, c);
        if (out.remote_effect !== 'none') return;
        const readAnswered =
          c.action_class === 'read' &&
          (e.phase !== 'request_sent' || e.reconciliation_matches === 1);
        expect(e.phase === 'not_sent' || explicitRefusal(e, c) || readAnswered).toBe(true);
      }),
      params,
    );
  });

  it('never says local_failure or confirmed_failure once request bytes left without an explicit answer', () => {
    fc.assert(
      fc.property(evidenceArb, contractArb, (e, c) => {
        const out = classify(e, c);
        const exitStatus =
          e.status === undefined &&
          e.phase === 'response_complete' &&
          typeof e.exit_status === 'number';
        if (e.phase === 'not_sent' || explicitRefusal(e, c) || exitStatus) return;
        expect(out.category).not.toBe('local_failure');
        expect(out.category).not.toBe('confirmed_failure');
      }),
      params,
    );
  });

  it('never tells a read to reconcile first', () => {
    fc.assert(
      fc.property(evidenceArb, contractArb, (e, c) => {
        expect(classify(e, { ...c, action_class: 'read' }).retry).not.toBe('reconcile_first');
      }),
      params,
    );
  });

  it('never allows a retry of a write with unknown outcome unless the idempotency key is honoured', () => {
    fc.assert(
      fc.property(
        evidenceArb,
        contractArb.filter((c) => c.action_class !== 'read'),
        (e, c) => {
          const out = classify(e, c);
          if (out.remote_effect === 'unknown' && out.retry === 'allowed') {
            expect(c.idempotency_honoured).toBe(true);
          }
          if (out.category === 'outcome_unknown' && !c.idempotency_honoured) {
            expect(out.retry).not.toBe('allowed');
          }
        },
      ),
      params,
    );
  });

  it('gives retry_after_ms exactly with after_delay, and ok-ness matches the category', () => {
    fc.assert(
      fc.property(evidenceArb, contractArb, (e, c) => {
        const out = classify(e, c);
        expect(out.retry === 'after_delay').toBe(out.retry_after_ms !== null);
      }),
      params,
    );
  });

  it('takes plain evidence and contracts without zod exactly as the schemas would (same claim for the same fields, also when a field is wrong, missing or undefined)', () => {
    expect(Object.keys(EVIDENCE_FIELDS).sort()).toEqual(Object.keys(evidenceSchema.shape).sort());
    // A field of the right kind, or a value of the wrong kind or out of range.
    const odd = fc.constantFrom<unknown>(
      undefined,
      null,
      -1,
      0,
      1.5,
      99,
      1000,
      Number.NaN,
      Infinity,
      2 ** 60,
      'x',
      '',
      true,
      {},
      [],
    );
    // Absent keys come from the record itself; a present key holds mostly a good value.
    const field = (good: fc.Arbitrary<unknown>) =>
      fc.oneof({ weight: 12, arbitrary: good }, { weight: 1, arbitrary: odd });
    const looseEvidence = fc.record(
      {
        phase: fc.oneof(
          { weight: 6, arbitrary: fc.constantFrom<unknown>(...valuesOf(Phase)) },
          { weight: 1, arbitrary: odd },
        ),
        blocked: field(fc.constantFrom('gate_locked', 'approval_denied')),
        local_error: field(fc.constantFrom(...valuesOf(LocalError))),
        error_code: field(fc.string({ maxLength: 6 })),
        response_misframed: field(fc.boolean()),
        status: field(statusArb),
        www_authenticate: field(fc.boolean()),
        retry_after_ms: field(fc.integer({ min: 0, max: 600_000 })),
        idempotent_replay: field(fc.boolean()),
        idempotency_in_progress: field(fc.boolean()),
        contract_check: field(fc.constantFrom(...valuesOf(ContractCheck))),
        exit_status: field(fc.option(fc.integer({ min: -5, max: 255 }), { nil: null })),
        mcp_reply: field(
          fc.constantFrom('result', 'tool_error', 'rpc_error', 'rpc_internal_error'),
        ),
        reconciliation_matches: field(fc.nat(3)),
        extra: field(fc.string({ maxLength: 3 })),
      },
      { requiredKeys: [] },
    );
    const looseContract = fc.record(
      {
        action_class: fc.oneof(
          { weight: 6, arbitrary: fc.constantFrom<unknown>(...valuesOf(ActionClass)) },
          { weight: 1, arbitrary: odd },
        ),
        idempotency_honoured: field(fc.boolean()),
        reconciliation: field(fc.boolean()),
        five_xx: field(fc.constantFrom('unknown', 'not_applied')),
        default_retry_after_ms: field(fc.nat(60_000)),
        extra: field(fc.boolean()),
      },
      { requiredKeys: [] },
    );
    // The same fields behind another prototype: classify then reads them through the schemas only.
    const viaSchema = (o: object): object => Object.assign(Object.create({}) as object, o);
    fc.assert(
      fc.property(looseEvidence, looseContract, (e, c) => {
        expect(classify(e, c)).toEqual(classify(viaSchema(e), viaSchema(c)));
        // The schema path itself is what the schemas say (a refused contract is the worst case).
        if (contractSchema.safeParse(c).success && evidenceSchema.safeParse(e).success)
          expect(classify(e, c)).toEqual(
            classify(evidenceSchema.parse(e), contractSchema.parse(c)),
          );
      }),
      params,
    );
  });
});
