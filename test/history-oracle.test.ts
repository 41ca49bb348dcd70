// The history campaigns' oracle holds each claim to the fake's commits at the time the claim was
// made: when something else may commit while a claim is asked for (a successor's sweep, a resumed
// owner), "applied" is false only if nothing was committed after the answer arrived, and "not
// applied" only if something was committed before it was asked for.
import { describe, expect, it } from 'vitest';
import type { Envelope } from '../src/core/envelope.js';
import { checkEnvelope } from './support/history/oracle.js';

const envelope = (over: Partial<Envelope>): Envelope =>
  ({
    ok: false,
    category: 'outcome_unknown',
    retry: 'escalate',
    remote_effect: 'unknown',
    message: 'Whether the deployment was applied is unknown.',
    operation_id: 'op_1',
    ...over,
  }) as Envelope;
const applied = envelope({
  ok: true,
  category: 'succeeded',
  retry: 'never',
  remote_effect: 'applied',
  message: 'Done: the deployment was applied.',
});
const none = envelope({
  category: 'confirmed_rejection',
  retry: 'never',
  remote_effect: 'none',
  message: 'The deployment was not applied.',
});
const claims = (e: Envelope, commits: Parameters<typeof checkEnvelope>[2]) =>
  checkEnvelope('operation_status', e, commits).map((v) => v.claim);

describe('history oracle: a claim against the commits around it', () => {
  it('"applied" is false only when nothing was committed after the answer arrived', () => {
    expect(claims(applied, 0)).toEqual(['applied_while_not_committed']);
    expect(claims(applied, { before: 0, after: 0 })).toEqual(['applied_while_not_committed']);
    // A successor committed while the status was asked for: the answer may be true.
    expect(claims(applied, { before: 0, after: 1 })).toEqual([]);
    expect(claims(applied, 1)).toEqual([]);
  });

  it('"not applied" is false when something was committed before it was asked for', () => {
    expect(claims(none, 1)).toEqual(['none_while_committed']);
    expect(claims(none, { before: 1, after: 1 })).toEqual(['none_while_committed']);
    expect(claims(none, { before: 0, after: 1 })).toEqual([]);
    expect(claims(none, 0)).toEqual([]);
  });
});
