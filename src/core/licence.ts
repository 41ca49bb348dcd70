// licence(): which retry, if any, the evidence permits — the other half of classify(). A pure,
// total function over a classification (its closed RuleId) and two facts about the action; its
// answer (a closed reason and decision) is recorded on the attempt it licenses.
import { FIVE_XX_RULES, type Classification } from './classify.js';
import type { RetryDecision, RetryReason } from './vocabulary.js';

/** A retry licence: the closed reason and decision recorded on the attempt it licenses. */
export interface Licence {
  reason: RetryReason;
  decision: RetryDecision;
}

/** What licence() needs to know about the action besides the classification. */
export interface LicenceFacts {
  /** The action class only reads (core/rules.ts `read_only`). */
  read_only: boolean;
  /** The destination documents and honours the idempotency key. */
  idempotency_honoured: boolean;
}

export type Licensable = Pick<
  Classification,
  'category' | 'retry' | 'remote_effect' | 'dispatch_state' | 'rule'
>;

/**
 * `automatic`: the engine retrying on its own within one run. Rate limits are never waited out
 * automatically — the agent gets `after_delay` and decides — but a caller continuing the same
 * operation after the delay is licensed.
 */
export function licence(c: Licensable, facts: LicenceFacts, automatic: boolean): Licence | null {
  if (c.retry === 'after_delay' && c.category === 'outcome_unknown' && facts.idempotency_honoured) {
    return {
      reason: 'response_lost_after_dispatch',
      decision: 'destination_idempotency_confirmed',
    };
  }
  if (c.retry === 'after_delay' && c.remote_effect === 'none' && !automatic) {
    return { reason: 'rate_limited', decision: 'destination_refused_not_applied' };
  }
  if (c.retry !== 'allowed') return null;
  const fiveXx = FIVE_XX_RULES.has(c.rule);
  // The destination said it did not do the work: the caller (never the engine on its own) may try
  // the same request again.
  if (c.category === 'confirmed_failure' && c.remote_effect === 'none' && !automatic) {
    return {
      reason: fiveXx ? 'destination_5xx' : 'operator_requested',
      decision: 'destination_refused_not_applied',
    };
  }
  if (c.dispatch_state === 'not_sent')
    return { reason: 'connection_not_established', decision: 'not_sent' };
  if (c.category !== 'outcome_unknown') return null;
  const reason: RetryReason = fiveXx ? 'destination_5xx' : 'response_lost_after_dispatch';
  if (facts.read_only) return { reason, decision: 'read_only' };
  if (facts.idempotency_honoured) return { reason, decision: 'destination_idempotency_confirmed' };
  return null;
}
