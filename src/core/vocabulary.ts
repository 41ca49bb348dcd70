// The closed vocabulary of DESIGN.md §1–2. Names are the public contract: never rename.
// Each is a const object (for values at run time) plus a union type of the same name.

type ValueOf<T> = T[keyof T];

const closedSet = <const T extends readonly string[]>(
  ...names: T
): { readonly [K in T[number]]: K } =>
  Object.freeze(Object.fromEntries(names.map((n) => [n, n]))) as { readonly [K in T[number]]: K };

/** What the caller may honestly claim about an outcome. */
export const Category = closedSet(
  'succeeded',
  'local_failure',
  'authentication_failed',
  'authorization_denied',
  'rate_limited',
  'confirmed_rejection',
  'confirmed_failure',
  'malformed_response',
  'outcome_unknown',
  'approval_denied',
  'approval_pending',
  'gate_locked',
  'duplicate_effect',
  'invalid_input',
);
export type Category = ValueOf<typeof Category>;

/** What the agent may do next. */
export const Retry = closedSet(
  'allowed',
  'after_delay',
  'reconcile_first',
  'never',
  'escalate',
  /** A person has been asked; nothing was sent; call again with the same operation_id later. */
  'after_approval',
);
export type Retry = ValueOf<typeof Retry>;

/** Whether the remote effect is known: the "remote effect known?" column of the matrix. */
export const RemoteEffect = closedSet('none', 'applied', 'unknown');
export type RemoteEffect = ValueOf<typeof RemoteEffect>;

/** How far one attempt got. `execution_error` is treated as `sent_no_response` for safety. */
export const DispatchState = closedSet(
  'not_sent',
  'sent_no_response',
  'response_received',
  'execution_error',
);
export type DispatchState = ValueOf<typeof DispatchState>;

/** Derived state of an operation. Never `failed` when the truth is `unknown`. */
export const OperationState = closedSet(
  'open',
  'succeeded',
  'failed',
  'unknown',
  'cancelled',
  'duplicate_effect_confirmed',
);
export type OperationState = ValueOf<typeof OperationState>;

/** Why a later attempt was made. */
export const RetryReason = closedSet(
  'connection_not_established',
  'rate_limited',
  'destination_5xx',
  'response_lost_after_dispatch',
  'credential_refreshed',
  'operator_requested',
);
export type RetryReason = ValueOf<typeof RetryReason>;

/** What licensed (or refused) a later attempt. The last three are refusals. */
export const RetryDecision = closedSet(
  'not_sent',
  'read_only',
  'destination_idempotency_confirmed',
  'reconciled_absent_key_valid',
  'converged_state_check',
  'operator_approved',
  /**
   * The destination explicitly refused or failed without applying (429, a 5xx under a not-applied
   * contract, a documented failure body).
   */
  'destination_refused_not_applied',
  'budget_exhausted',
  'reconcile_required',
  'human_required',
);
export type RetryDecision = ValueOf<typeof RetryDecision>;

/** The declared contract of an action. Only `read` is blindly repeatable. */
export const ActionClass = closedSet(
  'read',
  'set_state',
  'create',
  'append',
  'financial',
  'destructive',
  'notify',
  'permission_change',
  'credential_change',
  'execute',
);
export type ActionClass = ValueOf<typeof ActionClass>;

/** Ledger event kinds. */
export const EventKind = closedSet(
  'session_started',
  'session_ended',
  'operation_opened',
  'attempt_started',
  'attempt_finished',
  'observation_recorded',
  'approval_requested',
  'approval_decided',
  'policy_decided',
  'operation_resolved',
  'operation_superseded',
  'owner_changed',
  'gate_changed',
  'checkpoint',
);
export type EventKind = ValueOf<typeof EventKind>;

/** The values of a closed set, in declaration order (for schemas and generators). */
export const valuesOf = <T extends Readonly<Record<string, string>>>(
  set: T,
): [ValueOf<T>, ...ValueOf<T>[]] => Object.values(set) as [ValueOf<T>, ...ValueOf<T>[]];
