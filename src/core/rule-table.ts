// One table from evidence to envelope (DESIGN.md §6): classify()'s decide() only picks a rule id
// from the evidence, and the engine picks one for each of its own refusals and holds; this table
// gives every rule its category, retry directive, remote effect and message key. It is keyed by
// rule id with `satisfies Record<…>`, so a rule without a row (or a row without a column) does not
// compile. Nothing else in src/ sets a retry directive by hand, except the operation fold
// (engine/truth.ts, core/operation-outcome.ts), which reads its values from here too
// (test/retry-assignments.test.ts).
import { LocalError, type LocalError as LocalErrorT } from './evidence.js';
import { classRule } from './rules.js';
import {
  ActionClass,
  Category,
  RemoteEffect,
  Retry,
  valuesOf,
  type Category as CategoryT,
  type RemoteEffect as RemoteEffectT,
  type Retry as RetryT,
} from './vocabulary.js';

/** The rules classify() can record for an attempt, except the not-sent ones per local error. */
export const RULE_IDS = [
  'reconciled_duplicates',
  'reconciled_found',
  'gate_locked',
  'approval_denied',
  'not_sent',
  'misframed_response',
  'exit_zero',
  'exit_zero_contract_violated',
  'exit_nonzero',
  'exit_nonzero_not_started',
  'no_exit_status',
  'no_status',
  'sent_no_response',
  'idempotency_in_progress',
  'http_401',
  'http_403',
  'http_429',
  'http_4xx_rejection',
  'http_5xx_documented_failure',
  'http_5xx_not_applied_retry_after',
  'http_5xx_not_applied',
  'http_5xx_unknown',
  'http_2xx_body_cut',
  'http_2xx_contract_violated',
  'http_2xx_error_body',
  'http_2xx_replay',
  'http_2xx',
  'http_unexpected_status',
  'mcp_result',
  'mcp_read_result',
  'mcp_result_contract_violated',
  'mcp_tool_error',
  'mcp_read_error',
  'mcp_rpc_error',
  'mcp_rpc_internal_error',
  'unreadable_evidence',
  'classifier_fault',
  // The engine's own: no attempt was made (the request could not be built, or changed).
  'request_unbuildable',
  'request_changed',
] as const;

/**
 * Which rule decided a classification: a closed set, recorded in the ledger and reports. A rule
 * the code can produce but this union lacks is a compile error in classify().
 */
export type RuleId = (typeof RULE_IDS)[number] | `not_sent_${LocalErrorT}`;

/**
 * The engine's own refusals and holds: answers made without a new attempt (so never recorded as an
 * attempt's rule), each with its row below.
 */
export const ENGINE_RULE_IDS = [
  // The gate and policy before an attempt.
  'approval_pending',
  'caller_not_permitted',
  'policy_denied',
  'retry_approval_denied',
  'retry_gate_locked',
  // The attempt budget is spent.
  'budget_spent_not_applied',
  'budget_spent_unknown',
  // Nothing sent now; what the operation's attempts established stays.
  'unknown_lookup_next',
  'unknown_person_decides',
  'reconcile_not_sent',
  'marker_final_failure',
  'duplicate_in_flight',
  // Recovery after a restart, and the gateway's own answers.
  'recovery_not_sent',
  'recovery_gate_locked',
  'action_unconfigured_not_sent',
  'action_unconfigured_sent',
  'invalid_input',
  'ledger_listing',
  // The operation fold (engine/truth.ts, core/operation-outcome.ts).
  'operation_applied',
  'operation_not_applied',
  'operation_unknown',
  'looked_up_in_vain',
  'retry_unlicensed',
  'owner_holds',
  'owner_holds_unleased',
] as const;

export type EngineRuleId = (typeof ENGINE_RULE_IDS)[number];

/** Every row of the table: a classifier rule or one of the engine's own. */
export type EnvelopeRuleId = RuleId | EngineRuleId;

/**
 * Message keys beyond the category's own sentence (core/messages.ts has one template per key):
 * reads say found / failed, never "applied"; an upstream tool that failed after the request was
 * written says so; a caller the gateway does not grant is told that.
 */
export const RULE_MESSAGE_KEYS = [
  'caller_not_permitted',
  'mcp_read_result',
  'mcp_read_error',
  'mcp_tool_error',
  'mcp_rpc_internal_error',
  'mcp_rpc_error',
] as const;

export type RuleMessageKey = (typeof RULE_MESSAGE_KEYS)[number];

/** Which sentence a row's envelope carries: its category's (`by_category`), or a rule's own. */
export type MessageKey = 'by_category' | RuleMessageKey;

/**
 * A retry cell is a directive, or a column that reads the action's facts:
 * - `after_unknown`: reads and honoured keys repeat; else a lookup first, else a person.
 * - `after_malformed`: reads stop; writes look the result up first, else a person.
 * - `confirmed_failure`: per action class (core/rules.ts `confirmed_failure_retry`).
 * - `failed_command`: a read that failed changed nothing (`confirmed_failure`); a write may have
 *   done part of its work (`after_malformed`).
 * - `in_progress`: an honoured key waits for the first request; else `after_unknown`.
 * - `lookup_or_person`: a lookup when the action has one, else a person.
 */
export type RetryColumn =
  | 'after_unknown'
  | 'after_malformed'
  | 'confirmed_failure'
  | 'failed_command'
  | 'in_progress'
  | 'lookup_or_person';

/**
 * `write_applied` / `write_unknown`: that effect for a write, `none` for a read (a read changes
 * nothing). `kept`: the caller states what the operation already established.
 */
export type EffectCell = RemoteEffectT | 'write_applied' | 'write_unknown' | 'kept';

export interface RuleRow {
  /** `kept`: the operation's (or the claim's) own category stays; this row sets the rest. */
  category: CategoryT | 'kept';
  retry: RetryT | { column: RetryColumn };
  remote_effect: EffectCell;
  message: MessageKey;
  /**
   * The rule reads an answer (a status, an exit status, an MCP reply), so the attempt's dispatch
   * state is `response_received` whatever phase the evidence names; the others after a send take
   * it from that phase (classify.ts `dispatchFor`).
   */
  answered: boolean;
}

const row = (
  category: RuleRow['category'],
  retry: RuleRow['retry'],
  remote_effect: EffectCell,
  message: MessageKey = 'by_category',
): RuleRow => ({ category, retry, remote_effect, message, answered: false });
/** The same row, for a rule that reads an answer. */
const answer = (r: RuleRow): RuleRow => ({ ...r, answered: true });
const col = (column: RetryColumn): { column: RetryColumn } => ({ column });

const notSent = (category: CategoryT, retry: RetryT): RuleRow =>
  row(category, retry, RemoteEffect.none);

const NOT_SENT_ROWS = {
  not_sent_dns: notSent(Category.local_failure, Retry.allowed),
  not_sent_connect_refused: notSent(Category.local_failure, Retry.allowed),
  not_sent_connect_timeout: notSent(Category.local_failure, Retry.allowed),
  not_sent_tls: notSent(Category.local_failure, Retry.allowed),
  // A missing, unbound or undecryptable credential is not fixed by trying again: a person must act.
  not_sent_credential_unavailable: notSent(Category.local_failure, Retry.escalate),
  // A changed host key is a possible interception: never retried automatically.
  not_sent_host_key_mismatch: notSent(Category.local_failure, Retry.never),
  not_sent_ssh_auth_rejected: notSent(Category.authentication_failed, Retry.never),
  not_sent_deadline: notSent(Category.local_failure, Retry.allowed),
  not_sent_cancelled: notSent(Category.local_failure, Retry.allowed),
  not_sent_connection_reset: notSent(Category.local_failure, Retry.allowed),
  not_sent_connection_closed: notSent(Category.local_failure, Retry.allowed),
  not_sent_parse_error: notSent(Category.local_failure, Retry.allowed),
  not_sent_execution_error: notSent(Category.local_failure, Retry.allowed),
  not_sent_other: notSent(Category.local_failure, Retry.allowed),
} as const satisfies Record<`not_sent_${LocalErrorT}`, RuleRow>;

const C = Category;
const R = Retry;
const E = RemoteEffect;

/** The table. Column order: category, retry, remote effect, message key (default: category). */
export const RULE_TABLE: Readonly<Record<EnvelopeRuleId, RuleRow>> = Object.freeze({
  // Reconciliation evidence: a lookup found the effect once, or more than once.
  reconciled_duplicates: row(C.duplicate_effect, R.escalate, E.applied),
  reconciled_found: row(C.succeeded, R.never, 'write_applied'),
  // Not sent: the gate, a person, or the connection.
  gate_locked: row(C.gate_locked, R.never, E.none),
  approval_denied: row(C.approval_denied, R.never, E.none),
  not_sent: row(C.local_failure, R.allowed, E.none),
  ...NOT_SENT_ROWS,
  // An answer that cannot be read as one, or none at all.
  misframed_response: row(C.malformed_response, col('after_malformed'), 'write_unknown'),
  no_status: row(C.malformed_response, col('after_malformed'), 'write_unknown'),
  http_unexpected_status: row(C.malformed_response, col('after_malformed'), 'write_unknown'),
  sent_no_response: row(C.outcome_unknown, col('after_unknown'), E.unknown),
  no_exit_status: row(C.outcome_unknown, col('after_unknown'), E.unknown),
  unreadable_evidence: row(C.outcome_unknown, col('after_unknown'), E.unknown),
  classifier_fault: row(C.outcome_unknown, R.escalate, E.unknown),
  // SSH: the exit status is the answer.
  exit_zero: answer(row(C.succeeded, R.never, 'write_applied')),
  exit_zero_contract_violated: row(C.malformed_response, col('after_malformed'), 'write_applied'),
  exit_nonzero: answer(row(C.confirmed_failure, col('failed_command'), 'write_unknown')),
  exit_nonzero_not_started: answer(row(C.confirmed_failure, col('confirmed_failure'), E.none)),
  // HTTP: explicit refusals by status.
  idempotency_in_progress: answer(row(C.outcome_unknown, col('in_progress'), 'write_unknown')),
  http_401: answer(row(C.authentication_failed, R.never, E.none)),
  http_403: answer(row(C.authorization_denied, R.never, E.none)),
  http_429: answer(row(C.rate_limited, R.after_delay, E.none)),
  http_4xx_rejection: answer(row(C.confirmed_rejection, R.never, E.none)),
  http_5xx_documented_failure: answer(row(C.confirmed_failure, col('confirmed_failure'), E.none)),
  http_5xx_not_applied_retry_after: answer(row(C.rate_limited, R.after_delay, E.none)),
  http_5xx_not_applied: answer(row(C.confirmed_failure, col('confirmed_failure'), E.none)),
  http_5xx_unknown: row(C.outcome_unknown, col('after_unknown'), 'write_unknown'),
  http_2xx_body_cut: row(C.outcome_unknown, col('after_unknown'), 'write_applied'),
  http_2xx_contract_violated: row(C.malformed_response, col('after_malformed'), 'write_applied'),
  http_2xx_error_body: row(C.malformed_response, col('after_malformed'), 'write_applied'),
  http_2xx_replay: answer(row(C.succeeded, R.never, 'write_applied')),
  http_2xx: answer(row(C.succeeded, R.never, 'write_applied')),
  // An upstream MCP server's answer (DESIGN.md §5; classify.ts MCP_ANSWER_RULES picks the rule).
  mcp_result: answer(row(C.succeeded, R.never, E.applied)),
  mcp_read_result: answer(row(C.succeeded, R.never, E.none, 'mcp_read_result')),
  mcp_result_contract_violated: answer(
    row(C.malformed_response, col('after_malformed'), 'write_applied'),
  ),
  mcp_tool_error: answer(row(C.outcome_unknown, col('after_unknown'), E.unknown, 'mcp_tool_error')),
  mcp_read_error: answer(
    row(C.confirmed_failure, col('confirmed_failure'), E.none, 'mcp_read_error'),
  ),
  mcp_rpc_error: answer(row(C.confirmed_rejection, R.never, E.none, 'mcp_rpc_error')),
  mcp_rpc_internal_error: answer(
    row(C.outcome_unknown, col('after_unknown'), E.unknown, 'mcp_rpc_internal_error'),
  ),
  // No attempt: the request could not be built, or would not be the operation's request.
  request_unbuildable: row(C.local_failure, R.escalate, E.none),
  request_changed: row(C.local_failure, R.escalate, E.none),

  // The engine's own refusals and holds.
  // A person has been asked and has not answered: call again with the same operation_id.
  approval_pending: row(C.approval_pending, R.after_approval, 'kept'),
  caller_not_permitted: row(C.authorization_denied, R.never, 'kept', 'caller_not_permitted'),
  policy_denied: row(C.authorization_denied, R.never, E.none),
  // A retry a person or the locked gate refused after an earlier attempt that may have applied.
  retry_approval_denied: row(C.approval_denied, col('lookup_or_person'), 'kept'),
  retry_gate_locked: row(C.gate_locked, col('lookup_or_person'), 'kept'),
  budget_spent_not_applied: row('kept', R.escalate, E.none),
  budget_spent_unknown: row(C.outcome_unknown, col('lookup_or_person'), E.unknown),
  unknown_lookup_next: row(C.outcome_unknown, R.reconcile_first, E.unknown),
  unknown_person_decides: row(C.outcome_unknown, R.escalate, E.unknown),
  // Never sent, so a lookup has nothing to find: the operation may be tried again.
  reconcile_not_sent: row('kept', R.allowed, E.none),
  // The SSH marker is the final word: a completed run that failed is for a person.
  marker_final_failure: row('kept', R.escalate, 'kept'),
  // The same intent is still in flight under another operation: its outcome is not known yet.
  duplicate_in_flight: row(C.outcome_unknown, R.reconcile_first, E.unknown),
  recovery_not_sent: row(C.local_failure, R.escalate, E.none),
  recovery_gate_locked: row(C.gate_locked, R.escalate, 'kept'),
  action_unconfigured_not_sent: row(C.local_failure, R.escalate, E.none),
  action_unconfigured_sent: row(C.outcome_unknown, R.escalate, E.unknown),
  // The arguments break the input schema: the agent must change them, never repeat them.
  invalid_input: row(C.invalid_input, R.never, E.none),
  // A local read of the ledger: nothing remote happened, nothing to repeat.
  ledger_listing: row(C.succeeded, R.never, E.none),
  operation_applied: row(C.succeeded, R.never, E.applied),
  operation_not_applied: row('kept', R.never, E.none),
  operation_unknown: row(C.outcome_unknown, col('lookup_or_person'), E.unknown),
  // A lookup after the last answer found nothing bound to the operation: asking again shows the same.
  looked_up_in_vain: row('kept', R.escalate, 'kept'),
  // An invitation to call again that no licence or budget backs: a lookup, or a person.
  retry_unlicensed: row('kept', col('lookup_or_person'), 'kept'),
  // Another gateway owns the operation: wait out its lease, or (no lease that lapses) a person.
  owner_holds: row('kept', R.after_delay, 'kept'),
  owner_holds_unleased: row('kept', R.escalate, 'kept'),
} satisfies Record<EnvelopeRuleId, RuleRow>);

const TABLE_IDS: ReadonlySet<string> = new Set(Object.keys(RULE_TABLE));
const RECORDED_IDS: ReadonlySet<string> = new Set([
  ...RULE_IDS,
  ...valuesOf(LocalError).map((e) => `not_sent_${e}`),
]);

/** Whether a recorded rule (a string from the ledger) is one the classifier knows. */
export function isRuleId(rule: string): rule is RuleId {
  return RECORDED_IDS.has(rule);
}

/** Whether a string names a row of the table (a classifier rule or the engine's own). */
export function isEnvelopeRuleId(rule: string): rule is EnvelopeRuleId {
  return TABLE_IDS.has(rule);
}

/** What the retry columns read: the action's offers, from its contract or the operation's facts. */
export interface RetryFacts {
  /** Unknown (an action this runtime does not know): the sensitive row, which stops for a person. */
  action_class?: ActionClass;
  read_only: boolean;
  idempotency_honoured: boolean;
  /** The action has a lookup (`reconcile_operation` can settle it). */
  lookup: boolean;
}

/** No guarantee offered: every column falls to its most careful answer. */
export const WORST_CASE_FACTS: RetryFacts = Object.freeze({
  read_only: false,
  idempotency_honoured: false,
  lookup: false,
});

/** The facts a resolved contract offers (core/evidence.ts `ResolvedContract`, engine `contractOf`). */
export function contractFacts(contract: {
  action_class: ActionClass;
  idempotency_honoured: boolean;
  reconciliation: boolean;
}): RetryFacts {
  return {
    action_class: contract.action_class,
    read_only: classRule(contract.action_class).read_only,
    idempotency_honoured: contract.idempotency_honoured,
    lookup: contract.reconciliation,
  };
}

const COLUMNS: Readonly<Record<RetryColumn, (f: RetryFacts) => RetryT>> = {
  after_unknown: (f) =>
    f.read_only || f.idempotency_honoured
      ? Retry.allowed
      : f.lookup
        ? Retry.reconcile_first
        : Retry.escalate,
  after_malformed: (f) =>
    f.read_only ? Retry.never : f.lookup ? Retry.reconcile_first : Retry.escalate,
  confirmed_failure: (f) =>
    f.action_class === undefined
      ? classRule(ActionClass.execute).confirmed_failure_retry
      : classRule(f.action_class).confirmed_failure_retry,
  failed_command: (f) => (f.read_only ? COLUMNS.confirmed_failure(f) : COLUMNS.after_malformed(f)),
  in_progress: (f) => (f.idempotency_honoured ? Retry.after_delay : COLUMNS.after_unknown(f)),
  lookup_or_person: (f) => (f.lookup ? Retry.reconcile_first : Retry.escalate),
};

/** The retry directive of a rule, for an action with these facts. */
export function retryOf(rule: EnvelopeRuleId, facts: RetryFacts = WORST_CASE_FACTS): RetryT {
  const cell = RULE_TABLE[rule].retry;
  return typeof cell === 'string' ? cell : COLUMNS[cell.column](facts);
}

/** What a rule's answer carries into an envelope. */
export interface RuleOutcome {
  category: CategoryT;
  retry: RetryT;
  remote_effect: RemoteEffectT;
  retry_after_ms: null;
  rule: EnvelopeRuleId;
}

/** The named arguments of `outcomeOf`. */
export interface OutcomeOptions {
  facts?: RetryFacts;
  /** The operation's own category, for rows that keep it (default: `local_failure`). */
  category?: CategoryT;
  /** What the operation established, for rows that keep it (default: `unknown`). */
  remote_effect?: RemoteEffectT;
}

/** The remote effect of a rule's row, for an action with these facts. */
export function effectOf(
  rule: EnvelopeRuleId,
  facts: Pick<RetryFacts, 'read_only'>,
  kept: RemoteEffectT = RemoteEffect.unknown,
): RemoteEffectT {
  const cell = RULE_TABLE[rule].remote_effect;
  if (cell === 'kept') return kept;
  if (cell === 'write_applied') return facts.read_only ? RemoteEffect.none : RemoteEffect.applied;
  if (cell === 'write_unknown') return facts.read_only ? RemoteEffect.none : RemoteEffect.unknown;
  return cell;
}

/** The row of `rule` as an outcome: category, retry and remote effect from the table. */
export function outcomeOf(rule: EnvelopeRuleId, options: OutcomeOptions = {}): RuleOutcome {
  const facts = options.facts ?? WORST_CASE_FACTS;
  const r = RULE_TABLE[rule];
  return {
    category: r.category === 'kept' ? (options.category ?? Category.local_failure) : r.category,
    retry: retryOf(rule, facts),
    remote_effect: effectOf(rule, facts, options.remote_effect),
    retry_after_ms: null,
    rule,
  };
}
