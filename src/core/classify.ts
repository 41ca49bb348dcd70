// classify(): one total function from observed evidence and a declared contract to what the caller
// may honestly claim. It never throws; evidence it cannot read is treated as the worst case
// (bytes may have left, nothing came back). The rules are the data tables below, in order.
import {
  ContractCheck,
  contractSchema,
  evidenceSchema,
  FiveXxMeaning,
  LocalError,
  Phase,
  type Evidence,
  type LocalError as LocalErrorT,
  type ResolvedContract,
} from './evidence.js';
import {
  ActionClass,
  Category,
  DispatchState,
  RemoteEffect,
  Retry,
  valuesOf,
  type Category as CategoryT,
  type DispatchState as DispatchStateT,
  type RemoteEffect as RemoteEffectT,
  type Retry as RetryT,
} from './vocabulary.js';
import { ACTION_CLASS_RULES } from './rules.js';

/** Every rule that can decide a classification, except the not-sent ones per local error. */
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

const RULE_ID_SET: ReadonlySet<string> = new Set([
  ...RULE_IDS,
  ...valuesOf(LocalError).map((e) => `not_sent_${e}`),
]);

/** Whether a recorded rule (a string from the ledger) is one this classifier knows. */
export function isRuleId(rule: string): rule is RuleId {
  return RULE_ID_SET.has(rule);
}

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

/** Failures before any byte left: category and retry per local error (default: allowed). */
export const NOT_SENT_RULES: Readonly<
  Partial<Record<NonNullable<Evidence['local_error']>, { category: CategoryT; retry: RetryT }>>
> = {
  ssh_auth_rejected: { category: Category.authentication_failed, retry: Retry.never },
  // A changed host key is a possible interception: never retried automatically.
  host_key_mismatch: { category: Category.local_failure, retry: Retry.never },
  // A missing, unbound or undecryptable credential is not fixed by trying again: a person must act.
  credential_unavailable: { category: Category.local_failure, retry: Retry.escalate },
};

/** Explicit refusals by HTTP status (response complete or not: the status line is the answer). */
export const STATUS_RULES: ReadonlyArray<{
  match: (status: number) => boolean;
  category: CategoryT;
  retry: RetryT;
  rule: RuleId;
}> = [
  {
    match: (s) => s === 401,
    category: Category.authentication_failed,
    retry: Retry.never,
    rule: 'http_401',
  },
  {
    match: (s) => s === 403,
    category: Category.authorization_denied,
    retry: Retry.never,
    rule: 'http_403',
  },
  {
    match: (s) => s === 429,
    category: Category.rate_limited,
    retry: Retry.after_delay,
    rule: 'http_429',
  },
  {
    match: (s) => s >= 400 && s < 500,
    category: Category.confirmed_rejection,
    retry: Retry.never,
    rule: 'http_4xx_rejection',
  },
];

/** Retry after an unknown outcome: reads repeat; writes need an honoured key or a lookup first. */
export function retryAfterUnknown(contract: ResolvedContract): RetryT {
  if (contract.action_class === ActionClass.read) return Retry.allowed;
  if (contract.idempotency_honoured) return Retry.allowed;
  if (contract.reconciliation) return Retry.reconcile_first;
  return Retry.escalate;
}

/** Retry after a response that breaks the contract: reads stop; writes look the result up first. */
export function retryAfterMalformed(contract: ResolvedContract): RetryT {
  if (contract.action_class === ActionClass.read) return Retry.never;
  return contract.reconciliation ? Retry.reconcile_first : Retry.escalate;
}

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
    if (!e.success) {
      return result({
        category: Category.outcome_unknown,
        retry: retryAfterUnknown(ctr),
        remote_effect: RemoteEffect.unknown,
        retry_after_ms: null,
        dispatch_state: DispatchState.execution_error,
        rule: 'unreadable_evidence',
      });
    }
    return decide(e.data, ctr);
  } catch {
    // Unreachable by construction; kept so that the function is total even if a schema misbehaves.
    return result({
      category: Category.outcome_unknown,
      retry: Retry.escalate,
      remote_effect: RemoteEffect.unknown,
      retry_after_ms: null,
      dispatch_state: DispatchState.execution_error,
      rule: 'classifier_fault',
    });
  }
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
export const EVIDENCE_FIELDS: Readonly<Record<keyof Evidence, (v: unknown) => boolean>> = {
  phase: oneOf(valuesOf(Phase)),
  blocked: oneOf(['gate_locked', 'approval_denied']),
  local_error: oneOf(valuesOf(LocalError)),
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
const EVIDENCE_KEYS = Object.keys(EVIDENCE_FIELDS) as (keyof Evidence)[];

function plainEvidence(evidence: unknown): { success: true; data: Evidence } | null {
  if (!isPlain(evidence)) return null;
  const out: Record<string, unknown> = {};
  for (const key of EVIDENCE_KEYS) {
    if (!(key in evidence)) continue;
    const v = evidence[key];
    if (!EVIDENCE_FIELDS[key](v)) return null;
    out[key] = v;
  }
  return out['phase'] === undefined ? null : { success: true, data: out as Evidence };
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

function decide(ev: Evidence, ctr: ResolvedContract): Classification {
  const isRead = ctr.action_class === ActionClass.read;
  const writeEffect = (known: RemoteEffectT): RemoteEffectT => (isRead ? RemoteEffect.none : known);

  if (ev.reconciliation_matches !== undefined && ev.reconciliation_matches >= 2) {
    return result({
      category: Category.duplicate_effect,
      retry: Retry.escalate,
      remote_effect: RemoteEffect.applied,
      retry_after_ms: null,
      dispatch_state: dispatchOf(ev),
      rule: 'reconciled_duplicates',
    });
  }
  if (ev.reconciliation_matches === 1) {
    return result({
      category: Category.succeeded,
      retry: Retry.never,
      remote_effect: writeEffect(RemoteEffect.applied),
      retry_after_ms: null,
      dispatch_state: dispatchOf(ev),
      rule: 'reconciled_found',
    });
  }

  if (ev.phase === 'not_sent') {
    if (ev.blocked === 'gate_locked') {
      return result({
        category: Category.gate_locked,
        retry: Retry.never,
        remote_effect: RemoteEffect.none,
        retry_after_ms: null,
        dispatch_state: DispatchState.not_sent,
        rule: 'gate_locked',
      });
    }
    if (ev.blocked === 'approval_denied') {
      return result({
        category: Category.approval_denied,
        retry: Retry.never,
        remote_effect: RemoteEffect.none,
        retry_after_ms: null,
        dispatch_state: DispatchState.not_sent,
        rule: 'approval_denied',
      });
    }
    const local = ev.local_error;
    const special = local === undefined ? undefined : NOT_SENT_RULES[local];
    if (local !== undefined && special) {
      return result({
        category: special.category,
        retry: special.retry,
        remote_effect: RemoteEffect.none,
        retry_after_ms: null,
        dispatch_state: DispatchState.not_sent,
        rule: `not_sent_${local}`,
      });
    }
    return result({
      category: Category.local_failure,
      retry: Retry.allowed,
      remote_effect: RemoteEffect.none,
      retry_after_ms: null,
      dispatch_state: DispatchState.not_sent,
      rule: 'not_sent',
    });
  }

  const unknownOutcome = (rule: RuleId, effect: RemoteEffectT): Classification =>
    result({
      category: Category.outcome_unknown,
      retry: retryAfterUnknown(ctr),
      remote_effect: effect,
      retry_after_ms: null,
      dispatch_state: dispatchOf(ev),
      rule,
    });
  const malformed = (rule: RuleId, writeKnown: RemoteEffectT): Classification =>
    result({
      category: Category.malformed_response,
      retry: retryAfterMalformed(ctr),
      remote_effect: writeEffect(writeKnown),
      retry_after_ms: null,
      dispatch_state: dispatchOf(ev),
      rule,
    });

  if (ev.phase === 'request_sent') return unknownOutcome('sent_no_response', RemoteEffect.unknown);

  // A response (or an SSH exit status) arrived, completely or cut.
  if (ev.response_misframed) return malformed('misframed_response', RemoteEffect.unknown);

  if (ev.status === undefined && ev.mcp_reply !== undefined && ev.phase === 'response_complete')
    return mcpAnswer(ev.mcp_reply, ev, ctr);

  if (ev.status === undefined) {
    // SSH: the exit status is the answer; without it nothing is known.
    if (ev.phase === 'response_complete' && typeof ev.exit_status === 'number') {
      if (ev.exit_status === 0) {
        // set-state: the command exited 0 but its convergence re-check failed.
        if (ev.contract_check === 'violated')
          return malformed('exit_zero_contract_violated', RemoteEffect.applied);
        return result({
          category: Category.succeeded,
          retry: Retry.never,
          remote_effect: writeEffect(RemoteEffect.applied),
          retry_after_ms: null,
          dispatch_state: DispatchState.response_received,
          rule: 'exit_zero',
        });
      }
      // The command ran and failed; which of its steps took effect is unknown unless the wrapper
      // reported the documented "not started" failure.
      const notStarted = ev.contract_check === 'documented_failure';
      const effect = notStarted ? RemoteEffect.none : writeEffect(RemoteEffect.unknown);
      const retry =
        effect === RemoteEffect.none
          ? CONFIRMED_FAILURE_RETRY[ctr.action_class]
          : retryAfterMalformed(ctr);
      return result({
        category: Category.confirmed_failure,
        retry: retry,
        remote_effect: effect,
        retry_after_ms: null,
        dispatch_state: DispatchState.response_received,
        rule: notStarted ? 'exit_nonzero_not_started' : 'exit_nonzero',
      });
    }
    if (ev.phase === 'response_cut' || ev.exit_status === null) {
      return unknownOutcome('no_exit_status', RemoteEffect.unknown);
    }
    return malformed('no_status', RemoteEffect.unknown);
  }

  const s = ev.status;
  if (ev.idempotency_in_progress && s >= 400 && s < 500 && s !== 401 && s !== 403) {
    // The first request under this key is still running: its outcome is pending, not refused.
    const retry = ctr.idempotency_honoured ? Retry.after_delay : retryAfterUnknown(ctr);
    const delay =
      retry === Retry.after_delay ? (ev.retry_after_ms ?? ctr.default_retry_after_ms) : null;
    return result({
      category: Category.outcome_unknown,
      retry: retry,
      remote_effect: writeEffect(RemoteEffect.unknown),
      retry_after_ms: delay,
      dispatch_state: DispatchState.response_received,
      rule: 'idempotency_in_progress',
    });
  }
  const refusal = STATUS_RULES.find((r) => r.match(s));
  if (refusal) {
    const delay =
      refusal.retry === Retry.after_delay
        ? (ev.retry_after_ms ?? ctr.default_retry_after_ms)
        : null;
    return result({
      category: refusal.category,
      retry: refusal.retry,
      remote_effect: RemoteEffect.none,
      retry_after_ms: delay,
      dispatch_state: DispatchState.response_received,
      rule: refusal.rule,
    });
  }

  if (s >= 500 && s < 600) {
    if (ev.contract_check === 'documented_failure') {
      return result({
        category: Category.confirmed_failure,
        retry: CONFIRMED_FAILURE_RETRY[ctr.action_class],
        remote_effect: RemoteEffect.none,
        retry_after_ms: null,
        dispatch_state: DispatchState.response_received,
        rule: 'http_5xx_documented_failure',
      });
    }
    if (ctr.five_xx === 'not_applied') {
      if (ev.retry_after_ms !== undefined && (s === 503 || s === 502 || s === 504)) {
        return result({
          category: Category.rate_limited,
          retry: Retry.after_delay,
          remote_effect: RemoteEffect.none,
          retry_after_ms: ev.retry_after_ms,
          dispatch_state: DispatchState.response_received,
          rule: 'http_5xx_not_applied_retry_after',
        });
      }
      return result({
        category: Category.confirmed_failure,
        retry: CONFIRMED_FAILURE_RETRY[ctr.action_class],
        remote_effect: RemoteEffect.none,
        retry_after_ms: null,
        dispatch_state: DispatchState.response_received,
        rule: 'http_5xx_not_applied',
      });
    }
    return unknownOutcome('http_5xx_unknown', writeEffect(RemoteEffect.unknown));
  }

  if (s >= 200 && s < 300) {
    if (ev.phase === 'response_cut')
      return unknownOutcome('http_2xx_body_cut', writeEffect(RemoteEffect.applied));
    if (ev.contract_check === 'violated' || ev.contract_check === 'documented_failure') {
      return malformed(
        ev.contract_check === 'violated' ? 'http_2xx_contract_violated' : 'http_2xx_error_body',
        RemoteEffect.applied,
      );
    }
    return result({
      category: Category.succeeded,
      retry: Retry.never,
      remote_effect: writeEffect(RemoteEffect.applied),
      retry_after_ms: null,
      dispatch_state: DispatchState.response_received,
      rule: ev.idempotent_replay ? 'http_2xx_replay' : 'http_2xx',
    });
  }

  // 1xx as a final answer, 3xx not followed, or a status outside the registry: not a usable answer.
  return malformed('http_unexpected_status', RemoteEffect.unknown);
}

/**
 * The result table of an upstream MCP server's answer (DESIGN.md §5), beside the HTTP rules:
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
    NonNullable<Evidence['mcp_reply']> | 'result_contract_violated',
    Readonly<Record<'read' | 'write', { category: CategoryT; effect: RemoteEffectT; rule: RuleId }>>
  >
> = {
  rpc_error: {
    read: {
      category: Category.confirmed_rejection,
      effect: RemoteEffect.none,
      rule: 'mcp_rpc_error',
    },
    write: {
      category: Category.confirmed_rejection,
      effect: RemoteEffect.none,
      rule: 'mcp_rpc_error',
    },
  },
  tool_error: {
    read: {
      category: Category.confirmed_failure,
      effect: RemoteEffect.none,
      rule: 'mcp_read_error',
    },
    write: {
      category: Category.outcome_unknown,
      effect: RemoteEffect.unknown,
      rule: 'mcp_tool_error',
    },
  },
  rpc_internal_error: {
    read: {
      category: Category.confirmed_failure,
      effect: RemoteEffect.none,
      rule: 'mcp_read_error',
    },
    write: {
      category: Category.outcome_unknown,
      effect: RemoteEffect.unknown,
      rule: 'mcp_rpc_internal_error',
    },
  },
  result_contract_violated: {
    read: {
      category: Category.malformed_response,
      effect: RemoteEffect.none,
      rule: 'mcp_result_contract_violated',
    },
    write: {
      category: Category.malformed_response,
      effect: RemoteEffect.applied,
      rule: 'mcp_result_contract_violated',
    },
  },
  result: {
    read: { category: Category.succeeded, effect: RemoteEffect.none, rule: 'mcp_read_result' },
    write: { category: Category.succeeded, effect: RemoteEffect.applied, rule: 'mcp_result' },
  },
};

/** Retry after a category of the MCP table: the same columns the HTTP rules use. */
function mcpRetry(category: CategoryT, ctr: ResolvedContract): RetryT {
  switch (category) {
    case Category.succeeded:
    case Category.confirmed_rejection:
      return Retry.never;
    case Category.confirmed_failure:
      return CONFIRMED_FAILURE_RETRY[ctr.action_class];
    case Category.malformed_response:
      return retryAfterMalformed(ctr);
    default:
      return retryAfterUnknown(ctr);
  }
}

function mcpAnswer(
  reply: NonNullable<Evidence['mcp_reply']>,
  ev: Evidence,
  ctr: ResolvedContract,
): Classification {
  const key =
    reply === 'result' && ev.contract_check === 'violated' ? 'result_contract_violated' : reply;
  const row = MCP_ANSWER_RULES[key][ctr.action_class === ActionClass.read ? 'read' : 'write'];
  return result({
    category: row.category,
    retry: mcpRetry(row.category, ctr),
    remote_effect: row.effect,
    retry_after_ms: null,
    dispatch_state: DispatchState.response_received,
    rule: row.rule,
  });
}

function dispatchOf(ev: Evidence): DispatchStateT {
  if (ev.local_error === 'execution_error' && ev.phase !== 'not_sent')
    return DispatchState.execution_error;
  switch (ev.phase) {
    case 'not_sent':
      return DispatchState.not_sent;
    case 'request_sent':
      return DispatchState.sent_no_response;
    default:
      return DispatchState.response_received;
  }
}

/** A classification, spelled out field by field at every rule (no positional mix-ups). */
function result(c: Classification): Classification {
  return c;
}
