// Continuing an operation (DESIGN.md §2): an operation id given again only ever carries the same
// request — the same action, the same intent digest, the same secret inputs (by their keyed
// digest: engine/ssh-action.ts; never the placeholder "[REDACTED]") and, once an attempt exists,
// the same request fingerprint — whatever the operation's state (stopped by the gate before any attempt, open,
// unknown, settled). Anything else is refused before any prompt or byte, and nothing is recorded:
// a changed request is a new operation (which may supersede the old one).
//
// Also here: the attempt budget, a hard limit per operation across run, reconcile and recover.
import { canonicalJson } from '../core/canonical.js';
import type { Envelope } from '../core/envelope.js';
import { sha256Hex } from '../core/fingerprint.js';
import { outcomeOf, WORST_CASE_FACTS } from '../core/rule-table.js';
import type { OperationView } from '../ledger/projection.js';
import { hasLookup, type EngineAction } from './action.js';
import type { AnyAction, EngineContext } from './context.js';
import { prepare } from './request.js';
import { operationEnvelope } from './truth.js';
import { recordedInput, secretMismatch } from './ssh-action.js';

/** Why a continuation is not the operation's request. */
export type ChangedRequest =
  | 'other_action'
  | 'other_input'
  | 'other_secret'
  | 'secret_placeholder'
  | 'other_request'
  | 'unbuildable';

/** The intent's parameter digest, exactly as `operation_opened` records it. */
export function paramsDigest(ctx: EngineContext, action: AnyAction, input: unknown): string {
  return `sha256:${sha256Hex(canonicalJson(recordedInput(ctx.redactor, action, input)))}`;
}

/** Null when `input` for `action` continues `view`'s request; otherwise why it does not. */
export function changedRequest<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  input: I,
  view: OperationView,
): ChangedRequest | null {
  if (view.action !== action.name) return 'other_action';
  if (view.intent?.params_digest !== paramsDigest(ctx, action, input)) return 'other_input';
  // The recorded input hides secrets: only their keyed digest tells one secret from another.
  const secret = secretMismatch(ctx.options, action, input, view.intent.secrets_digest);
  if (secret) return secret;
  // The bytes the operation sent first, or, before any attempt, the ones its opening built.
  const recorded = view.attempts[0]?.request_fingerprint ?? view.opened_fingerprint;
  if (recorded === undefined) return null;
  let fingerprint: string;
  try {
    // SSH: the recorded fingerprint also binds the check and the marker location.
    fingerprint = prepare(ctx, action, input, view).fingerprint;
  } catch {
    return 'unbuildable';
  }
  // The action's definition may have changed since (a new configuration): the bytes would differ.
  return fingerprint === recorded ? null : 'other_request';
}

const WHY: Readonly<Record<ChangedRequest, string>> = {
  other_action: 'belongs to another action',
  other_input: 'was opened with other input',
  other_secret: 'was opened with other secret inputs (their keyed digests differ)',
  secret_placeholder: `cannot be continued with the placeholder "[REDACTED]" as a secret input`,
  other_request: 'was sent as a different request',
  unbuildable: 'cannot be rebuilt from this input',
};

/**
 * The refusal of a changed request: nothing was sent or recorded for it. The envelope states the
 * operation it named (what its attempts established), with the refusal as `data.refusal`.
 */
export function changedRequestEnvelope(
  ctx: EngineContext,
  action: { name: string; subject: string },
  why: ChangedRequest,
  view: OperationView,
): Envelope {
  return operationEnvelope(ctx, ctx.actions.get(view.action ?? '') ?? action, view, {
    refusal: {
      code: 'request_changed',
      sentence: `This call was refused and not sent: operation ${view.operation_id} ${WHY[why]}. A changed request is a new operation: call without operation_id to start one.`,
      data: { refused_operation_id: view.operation_id, reason: why, operation_action: view.action },
    },
  });
}

export { budgetLeft } from './truth.js';

/** The named arguments of `budgetSpent`. */
export interface BudgetSpentOptions {
  lookedUp?: boolean;
  /** The last attempt's answer to show when nothing applied (a transport's refusal code). */
  data?: unknown;
}

/**
 * The answer once the budget is spent and no further attempt may be made: what the earlier
 * attempts established, and as the next step a lookup when one exists, else a person.
 */
export function budgetSpent(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  { lookedUp = false, data = null }: BudgetSpentOptions = {},
): Envelope {
  const { envelopeOf } = ctx;
  const last = view.attempts.at(-1)?.finish ?? null;
  // What all the attempts established (core/fold.ts), not whether each one was answered.
  if (view.remote_effect === 'applied') return operationEnvelope(ctx, action, view);
  const allNone = view.attempts.length > 0 && view.remote_effect === 'none';
  const lookup = !lookedUp && hasLookup(action);
  if (last && allNone) {
    return envelopeOf({
      action,
      view,
      outcome: outcomeOf('budget_spent_not_applied', { category: last.category }),
      data,
      diagnosticsRef: last.diagnostics_ref,
    });
  }
  // Some attempt may have reached the destination: its effect is not known.
  return envelopeOf({
    action,
    view,
    outcome: outcomeOf('budget_spent_unknown', {
      facts: { ...WORST_CASE_FACTS, lookup: !allNone && lookup },
    }),
    data: null,
    diagnosticsRef: last?.diagnostics_ref ?? null,
  });
}
