// classify(): one total function from observed evidence and a declared contract to what the caller
// may honestly claim. It never throws; evidence it cannot read is treated as the worst case
// (bytes may have left, nothing came back). decide() only picks a rule id from the evidence, in
// order; the rule table (core/rule-table.ts) gives that rule's category, retry and remote effect.
import {
  ContractCheck,
  contractSchema,
  evidenceSchema,
  FiveXxMeaning,
  LocalError,
  Phase,
  type RecordedEvidence,
  type ResolvedContract,
} from './evidence.js';
import {
  ActionClass,
  DispatchState,
  Retry,
  valuesOf,
  type Category as CategoryT,
  type DispatchState as DispatchStateT,
  type RemoteEffect as RemoteEffectT,
  type Retry as RetryT,
} from './vocabulary.js';
import { ACTION_CLASS_RULES } from './rules.js';
import { contractFacts, effectOf, retryOf, RULE_TABLE, type RuleId } from './rule-table.js';

export { isRuleId, RULE_IDS, type RuleId } from './rule-table.js';

/** The rules that answer a 5xx (a retry they license is recorded as `destination_5xx`). */
export const FIVE_XX_RULES: ReadonlySet<RuleId> = new Set<RuleId>([
  'http_5xx_documented_failure',
  'http_5xx_not_applied_retry_after',
  'http_5xx_not_applied',
  'http_5xx_unknown',
]);

export interface Classification {
  category: CategoryT;
  retry: RetryT;
  remote_effect: RemoteEffectT;
  /** Set exactly when `retry` is `after_delay`. */
  retry_after_ms: number | null;
  dispatch_state: DispatchStateT;
  /** Which rule decided: a stable id, recorded in the ledger and reports. */
  rule: RuleId;
}

/**
 * Retry directive after a `confirmed_failure` (the service said the work was not done), per action
 * class: the `confirmed_failure_retry` column of ACTION_CLASS_RULES (core/rules.ts).
 */
export const CONFIRMED_FAILURE_RETRY: Readonly<Record<ActionClass, RetryT>> = Object.freeze(
  Object.fromEntries(
    Object.entries(ACTION_CLASS_RULES).map(([c, r]) => [c, r.confirmed_failure_retry]),
  ) as Record<ActionClass, RetryT>,
);

/**
 * Failures before any byte left that have a rule of their own (any other local error is
 * `not_sent`): a rejected SSH login, a changed host key, a credential that was not released.
 */
export const OWN_NOT_SENT_RULE: ReadonlySet<LocalError> = new Set<LocalError>([
  LocalError.ssh_auth_rejected,
  LocalError.host_key_mismatch,
  LocalError.credential_unavailable,
]);

/** Explicit refusals by HTTP status (response complete or not: the status line is the answer). */
export const STATUS_RULES: ReadonlyArray<{ match: (status: number) => boolean; rule: RuleId }> = [
  { match: (s) => s === 401, rule: 'http_401' },
  { match: (s) => s === 403, rule: 'http_403' },
  { match: (s) => s === 429, rule: 'http_429' },
  { match: (s) => s >= 400 && s < 500, rule: 'http_4xx_rejection' },
];

const WORST_CASE_CONTRACT: ResolvedContract = {
  action_class: ActionClass.execute,
  idempotency_honoured: false,
  reconciliation: false,
  five_xx: 'unknown',
  default_retry_after_ms: 1000,
};

export function classify(evidence: unknown, contract: unknown): Classification {
  try {
    const ctr = plainContract(contract) ?? parsedContract(contract);
    const e = plainEvidence(evidence) ?? evidenceSchema.safeParse(evidence);
    if (!e.success)
      return fromTable('unreadable_evidence', DispatchState.execution_error, { ctr, ev: null });
    const rule = decide(e.data, ctr);
    return fromTable(rule, dispatchFor(rule, e.data), { ctr, ev: e.data });
  } catch {
    // Unreachable by construction; kept so that the function is total even if a schema misbehaves.
    return fromTable('classifier_fault', DispatchState.execution_error, {
      ctr: WORST_CASE_CONTRACT,
      ev: null,
    });
  }
}

/**
 * The classification of `rule` (core/rule-table.ts gives category, retry and remote effect). An
 * `after_delay` waits what the destination asked for, else the contract's default.
 */
function fromTable(
  rule: RuleId,
  dispatch_state: DispatchStateT,
  { ctr, ev }: { ctr: ResolvedContract; ev: RecordedEvidence | null },
): Classification {
  const facts = contractFacts(ctr);
  const retry = retryOf(rule, facts);
  return {
    category: RULE_TABLE[rule].category as CategoryT,
    retry,
    remote_effect: effectOf(rule, facts),
    retry_after_ms:
      retry === Retry.after_delay ? (ev?.retry_after_ms ?? ctr.default_retry_after_ms) : null,
    dispatch_state,
    rule,
  };
}

function parsedContract(contract: unknown): ResolvedContract {
  const c = contractSchema.safeParse(contract);
  return c.success ? c.data : WORST_CASE_CONTRACT;
}

// Fast paths for the objects the engine and its transports build: a plain object whose fields all
// have the schema's types is taken without a zod pass (the same fields, the same defaults; keys
// the schema does not know are left out, as the schema strips them). Anything else — another
// prototype, a field present but undefined, a value out of range — goes through the schema, so
// these never accept what the schema would refuse.

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' &&
  v !== null &&
  (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null);
const oneOf =
  (values: readonly string[]) =>
  (v: unknown): boolean =>
    typeof v === 'string' && values.includes(v);
const isBoolean = (v: unknown): boolean => typeof v === 'boolean';
const isString = (v: unknown): boolean => typeof v === 'string';
const intIn =
  (min: number, max: number) =>
  (v: unknown): boolean =>
    Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max;
const ANY_INT = intIn(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
const COUNT = intIn(0, Number.MAX_SAFE_INTEGER);

/** evidenceSchema's fields as checks (kept beside it by a test that compares the two). */
export const EVIDENCE_FIELDS: Readonly<Record<keyof RecordedEvidence, (v: unknown) => boolean>> = {
  phase: oneOf(valuesOf(Phase)),
  blocked: oneOf(['gate_locked', 'approval_denied']),
  local_error: oneOf(valuesOf(LocalError)),
  // Any string, as recorded: older ledgers hold codes outside today's unions (core/error-code.ts).
  error_code: isString,
  response_misframed: isBoolean,
  status: intIn(100, 999),
  www_authenticate: isBoolean,
  retry_after_ms: COUNT,
  idempotent_replay: isBoolean,
  idempotency_in_progress: isBoolean,
  contract_check: oneOf(valuesOf(ContractCheck)),
  exit_status: (v) => v === null || ANY_INT(v),
  mcp_reply: oneOf(['result', 'tool_error', 'rpc_error', 'rpc_internal_error']),
  reconciliation_matches: COUNT,
};
const EVIDENCE_KEYS = Object.keys(EVIDENCE_FIELDS) as (keyof RecordedEvidence)[];

function plainEvidence(evidence: unknown): { success: true; data: RecordedEvidence } | null {
  if (!isPlain(evidence)) return null;
  const out: Record<string, unknown> = {};
  for (const key of EVIDENCE_KEYS) {
    if (!(key in evidence)) continue;
    const v = evidence[key];
    if (!EVIDENCE_FIELDS[key](v)) return null;
    out[key] = v;
  }
  return out['phase'] === undefined ? null : { success: true, data: out as RecordedEvidence };
}

const isActionClass = oneOf(valuesOf(ActionClass));
const isFiveXx = oneOf(valuesOf(FiveXxMeaning));

function plainContract(contract: unknown): ResolvedContract | null {
  if (!isPlain(contract)) return null;
  const field = <T>(key: string, ok: (v: unknown) => boolean, fallback: T): T | undefined => {
    if (!(key in contract)) return fallback;
    const v = contract[key];
    return ok(v) ? (v as T) : undefined;
  };
  const action_class = contract['action_class'];
  if (!isActionClass(action_class)) return null;
  const idempotency_honoured = field('idempotency_honoured', isBoolean, false);
  const reconciliation = field('reconciliation', isBoolean, false);
  const five_xx = field<FiveXxMeaning>('five_xx', isFiveXx, 'unknown');
  const default_retry_after_ms = field('default_retry_after_ms', COUNT, 1000);
  if (
    idempotency_honoured === undefined ||
    reconciliation === undefined ||
    five_xx === undefined ||
    default_retry_after_ms === undefined
  )
    return null;
  return {
    action_class: action_class as ActionClass,
    idempotency_honoured,
    reconciliation,
    five_xx,
    default_retry_after_ms,
  };
}

/**
 * Which rule the evidence meets, in order: the first that matches decides. The row it names
 * (core/rule-table.ts) says what the caller may claim.
 */
function decide(ev: RecordedEvidence, ctr: ResolvedContract): RuleId {
  if (ev.reconciliation_matches !== undefined && ev.reconciliation_matches >= 2)
    return 'reconciled_duplicates';
  if (ev.reconciliation_matches === 1) return 'reconciled_found';

  if (ev.phase === 'not_sent') {
    if (ev.blocked === 'gate_locked') return 'gate_locked';
    if (ev.blocked === 'approval_denied') return 'approval_denied';
    const local = ev.local_error;
    return local !== undefined && OWN_NOT_SENT_RULE.has(local) ? `not_sent_${local}` : 'not_sent';
  }

  if (ev.phase === 'request_sent') return 'sent_no_response';

  // A response (or an SSH exit status) arrived, completely or cut.
  if (ev.response_misframed) return 'misframed_response';

  if (ev.status === undefined && ev.mcp_reply !== undefined && ev.phase === 'response_complete')
    return mcpAnswer(ev.mcp_reply, ev, ctr);

  if (ev.status === undefined) {
    // SSH: the exit status is the answer; without it nothing is known.
    if (ev.phase === 'response_complete' && typeof ev.exit_status === 'number') {
      if (ev.exit_status === 0)
        // set-state: the command exited 0 but its convergence re-check failed.
        return ev.contract_check === 'violated' ? 'exit_zero_contract_violated' : 'exit_zero';
      // The command ran and failed; which of its steps took effect is unknown unless the wrapper
      // reported the documented "not started" failure.
      return ev.contract_check === 'documented_failure'
        ? 'exit_nonzero_not_started'
        : 'exit_nonzero';
    }
    if (ev.phase === 'response_cut' || ev.exit_status === null) return 'no_exit_status';
    return 'no_status';
  }

  const s = ev.status;
  // The first request under this key is still running: its outcome is pending, not refused.
  if (ev.idempotency_in_progress && s >= 400 && s < 500 && s !== 401 && s !== 403)
    return 'idempotency_in_progress';
  const refusal = STATUS_RULES.find((r) => r.match(s));
  if (refusal) return refusal.rule;

  if (s >= 500 && s < 600) {
    if (ev.contract_check === 'documented_failure') return 'http_5xx_documented_failure';
    if (ctr.five_xx === 'not_applied') {
      return ev.retry_after_ms !== undefined && (s === 503 || s === 502 || s === 504)
        ? 'http_5xx_not_applied_retry_after'
        : 'http_5xx_not_applied';
    }
    return 'http_5xx_unknown';
  }

  if (s >= 200 && s < 300) {
    if (ev.phase === 'response_cut') return 'http_2xx_body_cut';
    if (ev.contract_check === 'violated') return 'http_2xx_contract_violated';
    if (ev.contract_check === 'documented_failure') return 'http_2xx_error_body';
    return ev.idempotent_replay ? 'http_2xx_replay' : 'http_2xx';
  }

  // 1xx as a final answer, 3xx not followed, or a status outside the registry: not a usable answer.
  return 'http_unexpected_status';
}

/**
 * The rules of an upstream MCP server's answer (DESIGN.md §5), beside the HTTP rules (their rows
 * in core/rule-table.ts):
 *   JSON-RPC -32700…-32602 (parse error, invalid request, unknown method, invalid params or unknown
 *     tool): refused before any tool code ran -> confirmed_rejection, none.
 *   isError, -32603 and server-defined codes, once the request was written: the tool ran and failed
 *     somewhere; whether it wrote first is not known -> outcome_unknown, unknown (a write), or a
 *     failed read (confirmed_failure, none: a read changes nothing).
 *   a result whose structured content breaks the tool's outputSchema: malformed_response (applied
 *     for a write: it answered as done, in a broken form).
 *   a result: succeeded (applied for a write; a read's answer changes nothing: none).
 * Category and remote_effect always agree: never confirmed_failure with unknown.
 */
export const MCP_ANSWER_RULES: Readonly<
  Record<
    NonNullable<RecordedEvidence['mcp_reply']> | 'result_contract_violated',
    Readonly<Record<'read' | 'write', RuleId>>
  >
> = {
  rpc_error: { read: 'mcp_rpc_error', write: 'mcp_rpc_error' },
  tool_error: { read: 'mcp_read_error', write: 'mcp_tool_error' },
  rpc_internal_error: { read: 'mcp_read_error', write: 'mcp_rpc_internal_error' },
  result_contract_violated: {
    read: 'mcp_result_contract_violated',
    write: 'mcp_result_contract_violated',
  },
  result: { read: 'mcp_read_result', write: 'mcp_result' },
};

function mcpAnswer(
  reply: NonNullable<RecordedEvidence['mcp_reply']>,
  ev: RecordedEvidence,
  ctr: ResolvedContract,
): RuleId {
  const key =
    reply === 'result' && ev.contract_check === 'violated' ? 'result_contract_violated' : reply;
  return MCP_ANSWER_RULES[key][ctr.action_class === ActionClass.read ? 'read' : 'write'];
}

function dispatchFor(rule: RuleId, ev: RecordedEvidence): DispatchStateT {
  if (ev.phase === 'not_sent') return DispatchState.not_sent;
  if (RULE_TABLE[rule].answered) return DispatchState.response_received;
  if (ev.local_error === 'execution_error') return DispatchState.execution_error;
  return ev.phase === 'request_sent'
    ? DispatchState.sent_no_response
    : DispatchState.response_received;
}
