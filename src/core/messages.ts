// One plain sentence per outcome, for people. Agents must never need to parse it (DESIGN.md §1).
import type { EarlierAttempt } from './operation-outcome.js';
import { isEnvelopeRuleId, RULE_TABLE, type RuleMessageKey } from './rule-table.js';
import type { Category, RemoteEffect } from './vocabulary.js';

export interface MessageContext {
  /** A short noun for the effect, e.g. "the deployment" or "the command". */
  subject: string;
  retry_after_ms?: number | null;
  /** A retry was refused by a person or the gate after an earlier attempt that may have applied. */
  retry_declined?: { remote_effect: 'applied' | 'unknown' };
  /** The classification rule; `not_sent_credential_unavailable` names the credential as the cause. */
  rule?: string;
  /** The operation's remote effect (the message never contradicts it). */
  remote_effect?: RemoteEffect;
  /** What this attempt said, when earlier attempts overrule it (core/operation-outcome.ts). */
  earlier?: { kind: EarlierAttempt; attempt_category: Category };
  /** The code of a refusal by the remote SSH wrapper (it ran nothing), e.g. `marker_unsafe`. */
  refusal?: string;
  /** Why the credential was not released (names the reference, never a value). */
  credential_detail?: string;
}

/** Why the SSH wrapper refused, by its refusal code (src/ssh/wrapper.ts); it ran nothing. */
const WRAPPER_REFUSALS: Readonly<Record<string, string>> = {
  marker_unsafe:
    'the marker directory is not safe to use (a symbolic link, or a directory another user can write)',
  marker_unavailable: 'the marker directory could not be created or read',
  missing_tools: 'the host lacks a tool the wrapper needs',
  tmp_unavailable: 'no temporary directory could be made on the host',
  bad_request: 'the request reached the host incomplete',
  bad_operation_id: 'the operation id is not one the wrapper accepts',
  bad_mode: 'the request named no mode the wrapper knows',
};

function refusalSentence(code: string, subject: string): string {
  const why = Object.hasOwn(WRAPPER_REFUSALS, code) ? WRAPPER_REFUSALS[code] : undefined;
  return `The remote wrapper refused before running anything (${code}${why ? `: ${why}` : ''}); ${subject} was not applied.`;
}

const TEMPLATES: Readonly<Record<Category, (c: MessageContext) => string>> = {
  succeeded: (c) => `Done: ${c.subject} was applied.`,
  local_failure: (c) =>
    c.rule === 'not_sent_credential_unavailable'
      ? c.credential_detail !== undefined
        ? `Nothing was sent: the credential was not released (${c.credential_detail.replace(/\.$/, '')}), so ${c.subject} was not applied; a person must fix it.`
        : `Nothing was sent: the credential is unavailable (missing, not bound to this destination, or unreadable), so ${c.subject} was not applied; a person must fix it.`
      : `Nothing was sent: the connection could not be made, so ${c.subject} was not applied.`,
  authentication_failed: (c) =>
    `The destination rejected the credential; ${c.subject} was not applied and needs authorised credential recovery, not another token.`,
  authorization_denied: (c) => `The destination refused permission; ${c.subject} was not applied.`,
  rate_limited: (c) =>
    `The destination asked to slow down; ${c.subject} was not applied${c.retry_after_ms != null ? ` and may be tried again after ${Math.ceil(c.retry_after_ms / 1000)} s` : ''}.`,
  confirmed_rejection: (c) => `The destination rejected the request; ${c.subject} was not applied.`,
  confirmed_failure: (c) =>
    c.refusal !== undefined
      ? refusalSentence(c.refusal, c.subject)
      : `The destination reported that ${c.subject} failed.`,
  malformed_response: (c) =>
    c.remote_effect === 'applied'
      ? `The destination accepted ${c.subject} (it was applied), but its answer breaks its contract; look it up before relying on the details.`
      : c.remote_effect === 'none'
        ? `The destination answered in a form that breaks its contract; nothing was changed, and the answer cannot be used.`
        : `The destination answered in a form that breaks its contract; whether ${c.subject} took effect must be checked before anything else.`,
  outcome_unknown: (c) =>
    c.remote_effect === 'applied'
      ? `The destination accepted ${c.subject} (it was applied), but its answer was cut off; the details must be looked up.`
      : `The request was sent but no usable answer arrived; whether ${c.subject} was applied is unknown.`,
  approval_denied: (c) => `A person declined; ${c.subject} was not attempted.`,
  approval_pending: (c) =>
    `A person has been asked to approve ${c.subject} and has not answered yet; nothing was sent.`,
  gate_locked: (c) => `The gate is locked; ${c.subject} was not attempted.`,
  invalid_input: (c) => `The arguments break the input schema of ${c.subject}; nothing was sent.`,
  duplicate_effect: (c) =>
    `Reconciliation found ${c.subject} applied more than once; a person must decide the correction.`,
};

/**
 * Sentences of rules whose meaning the category alone does not carry (the rule table's message
 * keys, core/rule-table.ts): reads say found / failed, never "applied"; an upstream tool that
 * failed after the request was written says so, and where its own words are. Each applies only
 * while the claim still has the category it was written for.
 */
const RULE_TEMPLATES: Readonly<
  Record<RuleMessageKey, { category: Category; text: (c: MessageContext) => string }>
> = {
  caller_not_permitted: {
    category: 'authorization_denied',
    text: (c) =>
      c.remote_effect === 'applied'
        ? `This gateway does not grant the caller ${c.subject}; nothing more was sent, and an earlier attempt did apply it.`
        : c.remote_effect === 'unknown'
          ? `This gateway does not grant the caller ${c.subject}; nothing more was sent, and whether an earlier attempt applied it is unknown.`
          : `This gateway does not grant the caller ${c.subject}; nothing was sent.`,
  },
  mcp_read_result: {
    category: 'succeeded',
    text: (c) => `Found: ${c.subject} answered; its answer is in data.`,
  },
  mcp_read_error: {
    category: 'confirmed_failure',
    text: (c) =>
      `The read ${c.subject} failed; nothing was changed. The upstream's error is in data.upstream_error.`,
  },
  mcp_tool_error: {
    category: 'outcome_unknown',
    text: (c) =>
      `The upstream tool reported an error after the request was sent (data.upstream_error); whether ${c.subject} took effect before it failed is unknown.`,
  },
  mcp_rpc_internal_error: {
    category: 'outcome_unknown',
    text: (c) =>
      `The upstream server failed while handling the request (data.upstream_error); whether ${c.subject} took effect is unknown.`,
  },
  mcp_rpc_error: {
    category: 'confirmed_rejection',
    text: (c) =>
      `The upstream server refused the request before running the tool (data.upstream_error); ${c.subject} was not applied.`,
  },
};

export function messageFor(category: Category, context: MessageContext): string {
  const earlier = context.earlier;
  if (earlier) {
    const said = earlier.attempt_category.replace(/_/g, ' ');
    return earlier.kind === 'earlier_attempt_applied'
      ? `Done: an earlier attempt applied ${context.subject}; this later attempt was answered ${said}, which does not undo it.`
      : `This attempt was answered ${said}, but an earlier attempt may have applied ${context.subject}: whether it was applied is unknown.`;
  }
  const key =
    context.rule !== undefined && isEnvelopeRuleId(context.rule)
      ? RULE_TABLE[context.rule].message
      : 'by_category';
  const byRule = key === 'by_category' ? undefined : RULE_TEMPLATES[key];
  if (byRule?.category === category && !context.retry_declined) return byRule.text(context);
  const declined = context.retry_declined;
  if (declined && (category === 'approval_denied' || category === 'gate_locked')) {
    const who =
      category === 'approval_denied'
        ? 'A person declined the retry'
        : 'The gate is locked, so the retry was not made';
    return declined.remote_effect === 'applied'
      ? `${who}; the earlier attempt did apply ${context.subject}.`
      : `${who}; whether the earlier attempt applied ${context.subject} is unknown.`;
  }
  return TEMPLATES[category](context);
}
