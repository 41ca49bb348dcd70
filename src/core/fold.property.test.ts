// Property tests of the operation fold (issue 29, acceptance 2): knowledge is monotone. Seeded and
// replayable (CANDOR_SEED replays a printed seed). Histories are arbitrary event sequences of one
// operation — attempts started and finished in any order (also finishes of attempts never seen
// started, as a fenced former owner writes them), lookups that found, did not find or could not
// tell, resolutions, takeovers, supersessions and kinds the fold does not know.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeFold,
  effectOf,
  encodeFold,
  foldAll,
  foldEvent,
  stateOf,
  type FoldEvent,
  type OperationFold,
} from './fold.js';
import { Category, OperationState, RemoteEffect, Retry, valuesOf } from './vocabulary.js';

const seed = Number(process.env.CANDOR_SEED ?? 20261201);
const params = { seed, numRuns: 2_000, verbose: 1 } as const;

const attemptId = fc.constantFrom('att_1', 'att_2', 'att_3', 'att_4');
const state = fc.constantFrom(...valuesOf(OperationState));

/** A lookup bound to the operation that proved absence. */
const provingLookup = fc.record({
  kind: fc.constant('observation_recorded' as const),
  data: fc.record({
    state_after: fc.constantFrom('failed' as const, 'open' as const, 'cancelled' as const),
    matches: fc.constant(0),
    source: fc.constant('lookup'),
  }),
});

const eventArb: fc.Arbitrary<FoldEvent> = fc.oneof(
  fc.constant({ kind: 'operation_opened' as const }),
  fc.record({
    kind: fc.constant('attempt_started' as const),
    data: fc.record({ attempt_id: attemptId }),
  }),
  fc.record({
    kind: fc.constant('attempt_finished' as const),
    data: fc.record({
      attempt_id: attemptId,
      category: fc.constantFrom(...valuesOf(Category)),
      remote_effect: fc.constantFrom(...valuesOf(RemoteEffect)),
      retry: fc.constantFrom(...valuesOf(Retry)),
    }),
  }),
  fc.record({
    kind: fc.constant('observation_recorded' as const),
    data: fc.record({ state_after: state, matches: fc.nat(3), source: fc.constant('lookup') }),
  }),
  provingLookup,
  fc.record({ kind: fc.constant('operation_resolved' as const), data: fc.record({ state }) }),
  fc.constant({ kind: 'operation_superseded' as const }),
  fc.constant({ kind: 'owner_changed' as const }),
  fc.constant({ kind: 'approval_requested', data: { anything: true } }),
);

const historyArb = fc.array(eventArb, { minLength: 0, maxLength: 30 });

function isProvingLookup(e: FoldEvent): boolean {
  if (e.kind !== 'observation_recorded') return false;
  const d = (e as Extract<FoldEvent, { kind: 'observation_recorded' }>).data;
  return (
    d.matches === 0 &&
    (d.state_after === 'failed' || d.state_after === 'open' || d.state_after === 'cancelled')
  );
}

/** The attempt's own "not applied" answer, for an attempt that was in flight. */
function ownRefusal(before: OperationFold | null, e: FoldEvent): boolean {
  if (e.kind !== 'attempt_finished' || before === null) return false;
  const d = (e as Extract<FoldEvent, { kind: 'attempt_finished' }>).data;
  return d.remote_effect === 'none' && before.inflight.includes(d.attempt_id);
}

/** Every prefix fold of a history, from before the first event to after the last. */
function prefixes(events: readonly FoldEvent[]): Array<OperationFold | null> {
  const out: Array<OperationFold | null> = [null];
  let f: OperationFold | null = null;
  for (const e of events) out.push((f = foldEvent(f, e)));
  return out;
}

describe('the operation fold: knowledge is monotone', () => {
  it('applied never goes back to unknown or none, whatever comes after', () => {
    fc.assert(
      fc.property(historyArb, historyArb, (head, tail) => {
        const folds = prefixes([...head, ...tail]);
        const first = folds.findIndex((f) => effectOf(f) === 'applied');
        if (first < 0) return;
        for (const f of folds.slice(first)) {
          expect(effectOf(f)).toBe('applied');
          expect(['succeeded', 'duplicate_effect_confirmed']).toContain(stateOf(f));
        }
      }),
      params,
    );
  });

  it('unknown becomes none only through a proving lookup or the in-flight attempt’s own refusal with nothing unproven', () => {
    fc.assert(
      fc.property(historyArb, (events) => {
        let f: OperationFold | null = null;
        for (const e of events) {
          const before = f;
          f = foldEvent(f, e);
          if (effectOf(before) !== 'unknown' || effectOf(f) !== 'none') continue;
          const lookup = isProvingLookup(e) && before!.inflight.length === 0;
          const refusal = ownRefusal(before, e) && before!.unproven.length === 0;
          expect(lookup || refusal, `${JSON.stringify(before)} + ${JSON.stringify(e)}`).toBe(true);
        }
      }),
      params,
    );
  });

  it('a later attempt’s refusal never un-says an earlier attempt that may have applied', () => {
    fc.assert(
      fc.property(
        historyArb,
        attemptId,
        fc.constantFrom(...valuesOf(Category)),
        fc.constantFrom(...valuesOf(Retry)),
        (head, id, category, retry) => {
          const before = foldAll(head);
          if (before === null || before.unproven.length === 0) return;
          const after = foldEvent(before, {
            kind: 'attempt_finished',
            data: { attempt_id: id, category, remote_effect: 'none', retry },
          });
          expect(effectOf(after)).not.toBe('none');
          expect(stateOf(after)).not.toBe('failed');
        },
      ),
      params,
    );
  });

  it('a lookup while an attempt is in flight proves nothing about that attempt', () => {
    fc.assert(
      fc.property(historyArb, provingLookup, (head, lookup) => {
        const before = foldAll(head);
        if (before === null || before.inflight.length === 0) return;
        expect(effectOf(foldEvent(before, lookup))).not.toBe('none');
      }),
      params,
    );
  });

  it('resolutions, takeovers, supersessions and "unknown" lookups never lower what is known', () => {
    const rank = { none: 0, unknown: 1, applied: 2 } as const;
    const lowering = fc.oneof(
      fc.record({ kind: fc.constant('operation_resolved' as const), data: fc.record({ state }) }),
      fc.constant({ kind: 'owner_changed' as const }),
      fc.constant({ kind: 'operation_superseded' as const }),
      fc.record({
        kind: fc.constant('observation_recorded' as const),
        data: fc.record({ state_after: fc.constant('unknown' as const), matches: fc.constant(0) }),
      }),
    );
    fc.assert(
      fc.property(historyArb, lowering, (head, e) => {
        const before = foldAll(head);
        expect(rank[effectOf(foldEvent(before, e))]).toBeGreaterThanOrEqual(rank[effectOf(before)]);
      }),
      params,
    );
  });

  it('state and effect agree: never failed or open while unknown, succeeded only when applied', () => {
    fc.assert(
      fc.property(historyArb, (events) => {
        for (const f of prefixes(events)) {
          const effect = effectOf(f);
          const s = stateOf(f);
          if (effect === 'unknown') expect(s).toBe('unknown');
          if (effect === 'applied')
            expect(['succeeded', 'duplicate_effect_confirmed']).toContain(s);
          if (effect === 'none') expect([null, 'open', 'failed', 'cancelled']).toContain(s);
        }
      }),
      params,
    );
  });

  it('is total and deterministic, and a stored fold reads back as itself', () => {
    fc.assert(
      fc.property(historyArb, (events) => {
        const f = foldAll(events);
        expect(foldAll(events)).toEqual(f);
        expect(decodeFold(encodeFold(f), stateOf(f))).toEqual(f);
      }),
      params,
    );
  });
});
