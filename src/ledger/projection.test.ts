import fc from 'fast-check';
import { foldAll, foldFromState, stateOf as stateOfFold } from '../core/fold.js';
import { describe, expect, it } from 'vitest';
import {
  valuesOf,
  Category,
  Retry,
  OperationState,
  type RetryDecision,
} from '../core/vocabulary.js';
import { finished, observed, opened, started } from './contract.case.js';
import { GENESIS_HASH, type NewEvent, type StoredEvent } from './events.js';
import {
  deliveryVerdict,
  foldStates,
  nextState,
  operationTags,
  projectOperation,
  type OperationView,
} from './projection.js';

const stored = (events: NewEvent[]): StoredEvent[] =>
  events.map((e, i) => ({ ...e, seq: i + 1, v: 1, prev_hash: GENESIS_HASH, hash: `h${i}` }));

const superseded = (op: string): NewEvent => ({
  kind: 'operation_superseded',
  at: 0,
  session_id: 'ses_1',
  operation_id: op,
  correlation_id: null,
  data: { superseded_by: 'op_new', reason: 'amount changed' },
});

describe('nextState', () => {
  // nextState over a bare state folds from the most cautious fold of that state (core/fold.ts):
  // an `unknown` state may hide an earlier attempt, so a later "not applied" cannot lower it.
  const history = (...events: NewEvent[]): string | null =>
    stateOfFold(foldAll(events.map((e) => e)));
  it('follows the state rules', () => {
    expect(nextState(null, opened('op'))).toBe('open');
    expect(nextState('open', started('op', 'a'))).toBe('unknown');
    expect(nextState('unknown', finished('op', 'a', 'succeeded', 'never', 'applied'))).toBe(
      'succeeded',
    );
    expect(
      nextState('unknown', finished('op', 'a', 'outcome_unknown', 'reconcile_first', 'unknown')),
    ).toBe('unknown');
    const one = (f: NewEvent): string | null => history(opened('op'), started('op', 'a'), f);
    expect(one(finished('op', 'a', 'confirmed_rejection', 'never', 'none'))).toBe('failed');
    expect(one(finished('op', 'a', 'outcome_unknown', 'escalate', 'none'))).toBe('failed');
    expect(one(finished('op', 'a', 'local_failure', 'allowed', 'none'))).toBe('open');
    expect(one(finished('op', 'a', 'rate_limited', 'after_delay', 'none'))).toBe('open');
    // A bare `unknown` may hide an earlier attempt: a later refusal does not lower it.
    expect(nextState('unknown', finished('op', 'a', 'confirmed_rejection', 'never', 'none'))).toBe(
      'unknown',
    );
    // An earlier attempt whose reply was lost stays unknown whatever the retry is told.
    expect(
      history(
        opened('op'),
        started('op', 'a'),
        finished('op', 'a', 'outcome_unknown', 'allowed', 'unknown'),
        started('op', 'b'),
        finished('op', 'b', 'rate_limited', 'after_delay', 'none'),
      ),
    ).toBe('unknown');
    expect(
      nextState('unknown', finished('op', 'a', 'duplicate_effect', 'escalate', 'applied')),
    ).toBe('duplicate_effect_confirmed');
    expect(nextState('unknown', observed('op', 'succeeded'))).toBe('succeeded');
    expect(nextState('open', superseded('op'))).toBe('cancelled');
    expect(nextState('succeeded', superseded('op'))).toBe('succeeded');
    // A possibly-applied write stays unresolved until reconciled, even when superseded.
    expect(nextState('unknown', superseded('op'))).toBe('unknown');
    expect(nextState(null, observed('op', 'failed', 0))).toBe('failed');
    // A lookup that proved absence after the attempt ended settles it.
    expect(nextState('unknown', observed('op', 'failed', 0))).toBe('failed');
    // A lookup that matched something but did not settle it proves no absence.
    expect(nextState('unknown', observed('op', 'failed', 1))).toBe('unknown');
    expect(
      nextState('open', {
        ...observed('op', 'open'),
        kind: 'gate_changed',
        data: { locked: true, by: 'x' },
      }),
    ).toBe('open');
  });

  it('never says failed when the remote effect is unknown (any category, any retry)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...valuesOf(Category)),
        fc.constantFrom(...valuesOf(Retry)),
        fc.constantFrom(null, ...valuesOf(OperationState)),
        (category, retry, before) => {
          const s = nextState(before, finished('op', 'a', category, retry, 'unknown'));
          // Known applied stays applied (knowledge is monotone); otherwise never failed.
          expect(s).toBe(
            before === 'succeeded' || before === 'duplicate_effect_confirmed' ? before : 'unknown',
          );
        },
      ),
      { seed: 7, numRuns: 300 },
    );
  });
});

describe('foldStates and operationTags', () => {
  it('reports only changed operations', () => {
    const events = stored([
      opened('op_1'),
      opened('op_2'),
      started('op_1', 'a'),
      observed('op_3', 'open'),
    ]);
    expect(
      foldStates(events, () => undefined).map((c) => ({ id: c.operation_id, state: c.state })),
    ).toEqual([
      { id: 'op_1', state: 'unknown' },
      { id: 'op_2', state: 'open' },
      { id: 'op_3', state: 'open' },
    ]);
    // op_2 already stored as open: re-opening changes nothing and is not rewritten.
    expect(foldStates(stored([opened('op_2')]), () => foldFromState('open'))).toEqual([]);
  });

  it('tags operation events by session, correlation id and idempotency key', () => {
    expect(operationTags(opened('op_1', { session: 's1', correlation: 'c1', key: 'k1' }))).toEqual([
      's:s1',
      'c:c1',
      'k:k1',
    ]);
    expect(operationTags(started('op_1', 'a'))).toEqual(['s:ses_1']);
    expect(operationTags({ ...opened('op_1'), operation_id: null })).toEqual([]);
  });
});

interface Try {
  n: number;
  decision?: RetryDecision | null;
  fingerprint?: string;
  sent?: boolean;
  ref?: string | null;
  replay?: boolean;
  finished?: boolean;
}

/** One operation with the given attempts (responses with remote refs and replay flags). */
function scenario(tries: Try[], extra: NewEvent[] = []): OperationView {
  const events: NewEvent[] = [opened('op_1', { key: 'candor-k' })];
  for (const t of tries) {
    const s = started('op_1', `att_${t.n}`, t.n, { decision: t.decision ?? null });
    if (s.kind === 'attempt_started') s.data.request_fingerprint = t.fingerprint ?? 'sha256:same';
    events.push(s);
    if (t.finished === false) continue;
    const f = finished('op_1', `att_${t.n}`, 'succeeded', 'never', 'applied');
    if (f.kind === 'attempt_finished') {
      f.data.dispatch_state = t.sent === false ? 'not_sent' : 'response_received';
      if (t.sent === false)
        Object.assign(f.data, {
          category: 'local_failure',
          retry: 'allowed',
          remote_effect: 'none',
        });
      f.data.response =
        t.sent === false
          ? null
          : {
              status: 201,
              fingerprint: null,
              remote_ref: t.ref ?? null,
              replay: t.replay ?? false,
            };
      f.data.diagnostics = { raw: 'kept in the ledger only' };
    }
    events.push(f);
  }
  return projectOperation(stored([...events, ...extra]))!;
}

describe('projectOperation', () => {
  it('merges attempt start and finish and keeps diagnostics out of the view', () => {
    const v = scenario([{ n: 1, ref: 'dep_1' }]);
    expect(v).toMatchObject({
      operation_id: 'op_1',
      action: 'create_deployment',
      idempotency_key: 'candor-k',
      state: 'succeeded',
      attempts: [
        {
          attempt_id: 'att_1',
          number: 1,
          finish: { category: 'succeeded', response: { remote_ref: 'dep_1' } },
        },
      ],
    });
    expect(JSON.stringify(v)).not.toContain('kept in the ledger only');
  });

  it('shows an unfinished attempt as unknown and counts approval prompts', () => {
    const ask = (id: string): NewEvent => ({
      kind: 'approval_requested',
      at: 5,
      session_id: 'ses_1',
      operation_id: 'op_1',
      correlation_id: null,
      data: { approval_id: id, scope: 'per_call', request_fingerprint: 'sha256:same', card: {} },
    });
    const v = scenario(
      [{ n: 1, finished: false }],
      [
        ask('apr_1'),
        {
          kind: 'approval_decided',
          at: 6,
          session_id: 'ses_1',
          operation_id: 'op_1',
          correlation_id: null,
          data: { approval_id: 'apr_1', decision: 'denied', approver: 'ann' },
        },
        ask('apr_2'),
        superseded('op_1'),
      ],
    );
    expect(v.state).toBe('unknown');
    expect(v.attempts[0]!.finish).toBeNull();
    expect(v.prompts).toBe(2);
    expect(v.approvals.map((a) => a.decision)).toEqual(['denied', null]);
    expect(v.superseded_by).toBe('op_new');
  });
});

describe('deliveryVerdict', () => {
  it('tells a deduplicated retry apart from sending twice and getting lucky', () => {
    const dedup = scenario([
      { n: 1, finished: true, ref: null, sent: true, replay: false },
      { n: 2, decision: 'destination_idempotency_confirmed', ref: 'dep_9', replay: true },
    ]);
    const lucky = scenario([
      { n: 1, ref: 'dep_1' },
      { n: 2, ref: 'dep_2' },
    ]);
    expect(deliveryVerdict(dedup)).toEqual({
      code: 'retry_deduplicated',
      line: expect.stringContaining('destination deduplicated') as string,
    });
    const l = deliveryVerdict(lucky);
    expect(l.code).toBe('duplicate_effect');
    expect(l.line).toContain('dep_1, dep_2');
    expect(l.line).toContain('attempt 2 was sent with retry decision none');
  });

  it('flags a second send without a licence even when only one record appeared', () => {
    const v = scenario([
      { n: 1, ref: null },
      { n: 2, ref: 'dep_1', decision: null },
    ]);
    expect(deliveryVerdict(v).code).toBe('unlicensed_retry');
    // A licence for a different request is no licence.
    const changed = scenario([
      { n: 1, ref: null },
      {
        n: 2,
        ref: 'dep_1',
        replay: true,
        decision: 'destination_idempotency_confirmed',
        fingerprint: 'sha256:other',
      },
    ]);
    expect(deliveryVerdict(changed).code).toBe('unlicensed_retry');
  });

  it('counts attempts that never left as no delivery', () => {
    expect(deliveryVerdict(scenario([])).code).toBe('no_attempt');
    const v = scenario([
      { n: 1, sent: false },
      { n: 2, decision: 'not_sent', ref: 'dep_1' },
    ]);
    expect(deliveryVerdict(v)).toEqual({
      code: 'single_delivery',
      line: 'sent once (1 earlier attempt(s) never left)',
    });
    const licensed = scenario([
      { n: 1, ref: null },
      { n: 2, decision: 'reconciled_absent_key_valid', ref: 'dep_1' },
    ]);
    expect(deliveryVerdict(licensed).code).toBe('retry_licensed');
  });
});
