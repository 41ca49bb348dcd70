// One home for what an action class means to the rules: a table keyed by class, so adding a class
// to the vocabulary is a compile error here until every column is filled. classify(), licence(),
// the engine's witness hold and the approval defaults read their column from this table.
import { ActionClass, OperationState, Retry, RetryDecision } from './vocabulary.js';

/** How a person approves calls of a class by default (`auto`: nobody is asked). */
export type ApprovalScopeDefault = 'auto' | 'session' | 'per_call';

export interface ActionClassRule {
  /**
   * Money, deletion, permissions, credentials, arbitrary execution: a person approves each call,
   * `auto` approval is refused, and the records before it are checkpointed (witnessed) first.
   */
  sensitive: boolean;
  /** Removes remote state: an unknown outcome may have lost data. */
  destructive: boolean;
  /** Only reads: repeating it changes nothing remote, so an unknown outcome may be retried. */
  read_only: boolean;
  /** Retry directive after a confirmed failure (the service said the work was not done). */
  confirmed_failure_retry: Retry;
  /** The approval scope a gateway uses when the configuration names none. */
  approval_scope: ApprovalScopeDefault;
}

const plainWrite = {
  sensitive: false,
  destructive: false,
  read_only: false,
  confirmed_failure_retry: Retry.allowed,
  approval_scope: 'session',
} as const satisfies ActionClassRule;

const sensitiveWrite = {
  sensitive: true,
  destructive: false,
  read_only: false,
  // Sensitive classes stop for a person even when the remote side says "not applied".
  confirmed_failure_retry: Retry.escalate,
  approval_scope: 'per_call',
} as const satisfies ActionClassRule;

export const ACTION_CLASS_RULES: Readonly<Record<ActionClass, ActionClassRule>> = Object.freeze({
  [ActionClass.read]: {
    sensitive: false,
    destructive: false,
    read_only: true,
    confirmed_failure_retry: Retry.allowed,
    approval_scope: 'auto',
  },
  [ActionClass.set_state]: plainWrite,
  [ActionClass.create]: plainWrite,
  [ActionClass.append]: plainWrite,
  [ActionClass.notify]: plainWrite,
  [ActionClass.financial]: sensitiveWrite,
  [ActionClass.destructive]: { ...sensitiveWrite, destructive: true },
  [ActionClass.permission_change]: sensitiveWrite,
  [ActionClass.credential_change]: sensitiveWrite,
  [ActionClass.execute]: sensitiveWrite,
});

/** The rule row of a class. */
export function classRule(actionClass: ActionClass): ActionClassRule {
  return ACTION_CLASS_RULES[actionClass];
}

/** Attempts an operation may make when its action declares no `attempt_budget`. */
export const DEFAULT_ATTEMPT_BUDGET = 3;

/**
 * What a retry decision means for sending again after an attempt that may have been delivered:
 * `licenses` (the evidence permits it), `refuses` (no further attempt), `neither` (a first send, or
 * a refusal by the destination that does not license a repeat by itself). Keyed by decision, so a
 * new decision is a compile error here until it is placed.
 */
export const RETRY_DECISION_RULES = Object.freeze({
  [RetryDecision.not_sent]: 'neither',
  [RetryDecision.read_only]: 'licenses',
  [RetryDecision.destination_idempotency_confirmed]: 'licenses',
  [RetryDecision.reconciled_absent_key_valid]: 'licenses',
  [RetryDecision.converged_state_check]: 'licenses',
  [RetryDecision.operator_approved]: 'licenses',
  [RetryDecision.destination_refused_not_applied]: 'neither',
  [RetryDecision.budget_exhausted]: 'refuses',
  [RetryDecision.reconcile_required]: 'refuses',
  [RetryDecision.human_required]: 'refuses',
} as const satisfies Record<RetryDecision, 'licenses' | 'refuses' | 'neither'>);

const decisionsWhere = (
  rule: (typeof RETRY_DECISION_RULES)[RetryDecision],
): ReadonlySet<RetryDecision> =>
  new Set(
    (Object.keys(RETRY_DECISION_RULES) as RetryDecision[]).filter(
      (d) => RETRY_DECISION_RULES[d] === rule,
    ),
  );

/** Decisions that license sending again after an attempt that may have been delivered. */
export const LICENSING_DECISIONS: ReadonlySet<RetryDecision> = decisionsWhere('licenses');

/** Operation states that settle an operation (no further attempt is planned). */
export const TERMINAL_STATES: ReadonlySet<OperationState> = new Set([
  OperationState.succeeded,
  OperationState.failed,
  OperationState.cancelled,
  OperationState.duplicate_effect_confirmed,
]);
