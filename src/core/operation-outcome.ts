// Directives follow the operation, not the attempt (DESIGN.md §2 "Knowledge is monotone"): what the
// agent is told after an attempt is the operation's truth (core/fold.ts) — a later attempt's
// refusal (429, 4xx, 5xx, "key in use") speaks for that attempt only and never un-says an earlier
// attempt that may have applied. Also here: the licence to send again, raised to the operation.
import type { Licence } from './licence.js';
import type { Category, RemoteEffect, Retry } from './vocabulary.js';
import { retryOf, WORST_CASE_FACTS } from './rule-table.js';

/** What one attempt's classification said (or what a refusal would say alone). */
export interface Claim {
  category: Category;
  retry: Retry;
  remote_effect: RemoteEffect;
  retry_after_ms: number | null;
  rule?: string;
}

/** What the operation's events establish and what the action offers to settle it. */
export interface OperationFacts {
  /** The operation fold's remote effect (core/fold.ts), including this attempt. */
  effect: RemoteEffect;
  /** The destination documents and honours the idempotency key (a keyed retry is safe). */
  idempotency_honoured: boolean;
  /** The action only reads. */
  read_only: boolean;
  /** The action has a lookup (`reconcile_operation` can settle it). */
  lookup: boolean;
}

/** Why the operation's claim differs from the attempt's (the envelope's message says it). */
export type EarlierAttempt = 'earlier_attempt_may_have_applied' | 'earlier_attempt_applied';

export interface OperationClaim {
  claim: Claim;
  /** Set when the attempt's own word was overruled by what earlier attempts established. */
  earlier: EarlierAttempt | null;
}

/** The next step when the effect may exist and no retry is licensed: look it up, or a person. */
export function unknownNextStep(facts: Pick<OperationFacts, 'lookup'>): Retry {
  return retryOf('operation_unknown', { ...WORST_CASE_FACTS, lookup: facts.lookup });
}

/**
 * The claim the agent sees after `attempt`, given the operation's facts. Rows (attempt effect ×
 * operation effect):
 * - equal: the attempt's own claim.
 * - operation applied, attempt not: done (an earlier attempt or a lookup showed it).
 * - operation unknown, attempt none (a refused or unsent retry): `outcome_unknown`; a keyed
 *   (honoured) or read-only retry keeps the attempt's `after_delay` / `allowed`, anything else looks
 *   it up first, or escalates.
 */
export function operationClaim(attempt: Claim, facts: OperationFacts): OperationClaim {
  if (facts.effect === attempt.remote_effect) return { claim: attempt, earlier: null };
  if (facts.effect === 'applied') {
    return {
      claim: {
        category: 'succeeded',
        retry: retryOf('operation_applied'),
        remote_effect: 'applied',
        retry_after_ms: null,
        ...(attempt.rule !== undefined ? { rule: attempt.rule } : {}),
      },
      earlier: 'earlier_attempt_applied',
    };
  }
  if (facts.effect === 'unknown') {
    const repeatable = facts.idempotency_honoured || facts.read_only;
    const keepsDirective =
      repeatable && (attempt.retry === 'after_delay' || attempt.retry === 'allowed');
    return {
      claim: {
        category: 'outcome_unknown',
        retry: keepsDirective ? attempt.retry : unknownNextStep(facts),
        remote_effect: 'unknown',
        retry_after_ms:
          keepsDirective && attempt.retry === 'after_delay' ? attempt.retry_after_ms : null,
        ...(attempt.rule !== undefined ? { rule: attempt.rule } : {}),
      },
      earlier: 'earlier_attempt_may_have_applied',
    };
  }
  // The operation knows less than the attempt claims (none vs unknown/applied) cannot happen: the
  // fold includes the attempt. Keep the attempt's (more cautious) claim.
  return { claim: attempt, earlier: null };
}

/**
 * The licence to send again, raised to the operation: an operation known applied is never sent
 * again; one whose effect is unknown is sent again only under a guarantee that covers *every*
 * earlier attempt (an honoured idempotency key, or a read) — a licence the last attempt alone
 * earned (it was never sent, or the destination refused it) says nothing about the earlier ones.
 */
export function operationLicence(
  attemptLicence: Licence | null,
  facts: Pick<OperationFacts, 'effect' | 'idempotency_honoured' | 'read_only'>,
): Licence | null {
  if (attemptLicence === null) return null;
  // Applied: never sent again, except under the destination's honoured key, where the same
  // request is a replay that returns the stored result and applies nothing.
  if (facts.effect === 'applied')
    return attemptLicence.decision === 'destination_idempotency_confirmed' ? attemptLicence : null;
  if (facts.effect === 'none') return attemptLicence;
  const d = attemptLicence.decision;
  if (d !== 'not_sent' && d !== 'destination_refused_not_applied') return attemptLicence;
  if (facts.read_only) return { reason: attemptLicence.reason, decision: 'read_only' };
  if (facts.idempotency_honoured)
    return { reason: attemptLicence.reason, decision: 'destination_idempotency_confirmed' };
  return null;
}
