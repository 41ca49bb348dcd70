// The approval card: what a person sees before deciding, and what the ledger keeps as
// `approval_requested.card`. Structured fields for tools, one plain `question` for people. A card
// holds the intent (kind, subject reference, parameter digest), fingerprints and the request this
// attempt will send, rendered from its prepared request (secrets redacted) — never a stored summary
// of an earlier request, and never credentials.
import type { Caller } from '../core/caller.js';
import type { GateRequest } from '../engine/ports.js';
import type { RequestedVia } from './identity.js';
import type { ApprovalScope } from './policy.js';

/** Why a person is being asked. */
export const PromptReason = {
  /** First use of an action in this session (scope `session`). */
  session_policy: 'session_policy',
  /** The action's policy asks for every call (scope `per_call`). */
  per_call_policy: 'per_call_policy',
  /** A sensitive action is about to be retried after an attempt whose outcome is unknown. */
  retry_after_unknown: 'retry_after_unknown',
  /** A policy (src/policy) requires a person for this call, whatever the action's scope. */
  policy_required: 'policy_required',
} as const;
export type PromptReason = (typeof PromptReason)[keyof typeof PromptReason];

/** What is known about the previous attempt of the operation (retries only). */
export interface PriorAttempt {
  number: number | null;
  dispatch_state: string | null;
  category: string | null;
  remote_effect: string | null;
}

/** What the runtime will do if the person approves a retry after an unknown outcome. */
export interface PlannedRecovery {
  action: 'retry_same_request';
  retry_reason: string;
  retry_decision: string | null;
  request_fingerprint: string;
  idempotency_key: string | null;
  /** One plain sentence. */
  summary: string;
}

export interface ApprovalCard {
  approval_id: string;
  /** `session` covers later calls of this action in this session and process; `per_call` one call. */
  scope: Exclude<ApprovalScope, 'auto'>;
  reason: PromptReason;
  /** One plain sentence a person can answer with yes or no. */
  question: string;
  session_id: string;
  operation_id: string;
  action: string;
  action_class: string;
  intent: Record<string, unknown>;
  request_fingerprint: string;
  /** What will be sent if approved (null when the engine did not say). */
  request?: GateRequest | null;
  /** The gate instance (one process) that holds the approval; it dies with the process. */
  instance_id: string;
  requested_at: number;
  /** An answer after this time does not count (`expired`). */
  expires_at: number;
  /** Retries after an unknown outcome: how far the previous attempt got. Otherwise null. */
  dispatch_state: string | null;
  prior_attempt: PriorAttempt | null;
  planned_recovery: PlannedRecovery | null;
  /** `policy_required`: the policies that asked for a person, and their reason. */
  policy?: { policy_ids: string[]; reason: string } | null;
  /** Who asked for the call (the operation's recorded caller); null when not recorded. */
  requested_by?: Caller | null;
  /** Whether an agent (MCP tool call) or a person (an operator's command) made the call. */
  requested_via?: RequestedVia;
}

export function questionFor(
  c: Pick<
    ApprovalCard,
    | 'scope'
    | 'reason'
    | 'action'
    | 'action_class'
    | 'operation_id'
    | 'intent'
    | 'planned_recovery'
    | 'policy'
  >,
): string {
  const subject =
    typeof c.intent['subject_ref'] === 'string' ? ` on ${c.intent['subject_ref']}` : '';
  if (c.reason === 'policy_required') {
    const ids = c.policy?.policy_ids.join(', ') ?? 'a policy';
    const recovery = c.planned_recovery ? ` ${c.planned_recovery.summary}` : '';
    return `Policy ${ids} requires a person (${c.policy?.reason ?? 'no reason given'}): allow this one ${c.action} (${c.action_class}) call${subject}, operation ${c.operation_id}?${recovery}`;
  }
  if (c.reason === 'retry_after_unknown') {
    return `The last attempt of ${c.action} (${c.action_class})${subject} may already have taken effect; approve one retry for operation ${c.operation_id}? ${c.planned_recovery?.summary ?? ''}`.trim();
  }
  if (c.scope === 'session')
    return `Allow ${c.action} (${c.action_class})${subject} for the rest of this agent session?`;
  return `Allow this one ${c.action} (${c.action_class}) call${subject}, operation ${c.operation_id}?`;
}

/** A few lines for a terminal or console listing. */
export function cardLines(card: ApprovalCard, now: number): string[] {
  const lines = [
    card.question,
    `  approval ${card.approval_id} (${card.scope}, ${card.reason})`,
    `  action ${card.action} [${card.action_class}]  operation ${card.operation_id}`,
    `  intent ${JSON.stringify(card.intent)}`,
  ];
  const request = requestLine(card);
  if (request) lines.push(`  request ${request}`);
  if (card.reason === 'retry_after_unknown') {
    lines.push(
      `  dispatch state so far: ${card.dispatch_state ?? 'unknown'}` +
        (card.prior_attempt?.category ? ` (${card.prior_attempt.category})` : ''),
    );
    if (card.planned_recovery) lines.push(`  planned recovery: ${card.planned_recovery.summary}`);
  }
  const left = Math.max(0, Math.round((card.expires_at - now) / 1000));
  lines.push(`  expires in ${left}s`);
  return lines;
}

/** The request that will be sent, on one line: `POST http://host/v1/payments {"amount":100}`. */
export function requestLine(card: Pick<ApprovalCard, 'request'>): string | null {
  const r = card.request;
  if (!r) return null;
  const where =
    r.method === 'SSH' ? `${r.destination}: ${r.target}` : `${r.destination}${r.target}`;
  return `${r.method} ${where}${r.body === null ? '' : ` ${JSON.stringify(r.body)}`}`;
}
