import { describe, expect, it } from 'vitest';
import { LocalError } from './evidence.js';
import {
  ENGINE_RULE_IDS,
  isRuleId,
  outcomeOf,
  RULE_IDS,
  RULE_TABLE,
  retryOf,
} from './rule-table.js';
import { valuesOf } from './vocabulary.js';

const classifierRules = [...RULE_IDS, ...valuesOf(LocalError).map((e) => `not_sent_${e}` as const)];

describe('the rule table', () => {
  it('gives every rule classify() can record a category and an effect of its own', () => {
    // classify() reads the category straight from the row: a `kept` one would have nothing to keep.
    const kept = classifierRules.filter(
      (r) => RULE_TABLE[r].category === 'kept' || RULE_TABLE[r].remote_effect === 'kept',
    );
    expect(kept).toEqual([]);
  });

  it('keeps the engine rows apart from the recorded ones', () => {
    expect(ENGINE_RULE_IDS.filter((r) => isRuleId(r))).toEqual([]);
    expect(Object.keys(RULE_TABLE).sort()).toEqual([...classifierRules, ...ENGINE_RULE_IDS].sort());
  });

  it('answers a pending approval with after_approval and the effect the operation has', () => {
    expect(outcomeOf('approval_pending', { remote_effect: 'unknown' })).toEqual({
      category: 'approval_pending',
      retry: 'after_approval',
      remote_effect: 'unknown',
      retry_after_ms: null,
      rule: 'approval_pending',
    });
  });

  it('reads the lookup column: a lookup when the action has one, else a person', () => {
    const facts = { read_only: false, idempotency_honoured: false, lookup: true };
    expect(retryOf('retry_gate_locked', facts)).toBe('reconcile_first');
    expect(retryOf('retry_gate_locked', { ...facts, lookup: false })).toBe('escalate');
    // Without facts every column takes its most careful answer.
    expect(retryOf('sent_no_response')).toBe('escalate');
    expect(retryOf('http_5xx_not_applied')).toBe('escalate');
  });
});
