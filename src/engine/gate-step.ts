// The gate before every attempt, and the witness's hold before a sensitive one: each reads the
// attempt's plan (its prepared request, licence and caller's signal) and answers null to go on,
// or the refusal envelope — which never claims "nothing happened" when an earlier attempt may
// have applied the effect.
import { classify } from '../core/classify.js';
import { contractFacts, outcomeOf } from '../core/rule-table.js';
import type { Envelope } from '../core/envelope.js';
import { contractOf, type EngineAction } from './action.js';
import type { EngineContext } from './context.js';
import { paramsDigest } from './continuation.js';
import { openGate } from './ports.js';
import type { PreparedAttempt } from './request.js';
import type { Licence } from '../core/licence.js';
import type { OperationView } from '../ledger/projection.js';
import { operationEnvelope, resolveOrOwnerLost } from './truth.js';

/**
 * One attempt, planned before anything is asked or sent: the request is prepared once, and the
 * policy, the gate's card, the write-ahead record and the dispatch all use it.
 */
export interface AttemptPlan<I = unknown> {
  action: EngineAction<I, unknown>;
  input: I;
  /** The operation as recorded before this attempt. */
  view: OperationView;
  /** What licenses this attempt as a retry (null for a first attempt). */
  licence: Licence | null;
  prepared: PreparedAttempt;
  /** The caller's signal: withdraws a pending approval, cancels the exchange. */
  signal: AbortSignal | undefined;
}

/** How `gateRefusal` consults the gate for one attempt. */
export interface GateCheckOptions {
  /** A policy asked for a person (engine/policy-step.ts): the gate asks per call. */
  policyApproval?: { policy_ids: string[]; reason: string } | null;
}

/**
 * Consults the gate before an attempt. Returns null when approved, else the refusal envelope —
 * which never claims "nothing happened" when an earlier attempt may have applied the effect.
 */
export async function gateRefusal<I>(
  ctx: EngineContext,
  plan: AttemptPlan<I>,
  { policyApproval = null }: GateCheckOptions = {},
): Promise<Envelope | null> {
  const { gate, envelopeOf, redactor } = ctx;
  const { action, input, view, licence: retry, prepared, signal } = plan;
  const last = view.attempts.at(-1);
  // The open gate approves everything and reads nothing: no card is rendered for it. (A policy's
  // approval never reaches it: policy-step.ts refuses what a gate that cannot ask would approve.)
  if (gate === openGate && !policyApproval) return null;
  const dest = action.destination;
  const decision = await gate.check({
    session_id: view.session_id ?? '',
    operation_id: view.operation_id,
    action: action.name,
    action_class: action.class,
    request_fingerprint: prepared.fingerprint,
    request: {
      method: prepared.method,
      target: redactor.redactString(prepared.target),
      destination:
        dest.kind === 'ssh'
          ? `ssh:${dest.host_ref}`
          : dest.kind === 'mcp'
            ? `mcp:${dest.upstream}`
            : dest.origin,
      body: prepared.body === undefined ? null : redactor.redactValue(prepared.body),
      ...(prepared.request.kind === 'http'
        ? {
            headers: redactor.redactValue({ ...prepared.request.headers }),
            credential: dest.authority_ref ?? null,
          }
        : {}),
    },
    prior_dispatch_state: last ? (last.finish?.dispatch_state ?? 'sent_no_response') : null,
    prior_attempt: last?.finish
      ? {
          category: last.finish.category,
          remote_effect: last.finish.remote_effect,
          dispatch_state: last.finish.dispatch_state,
        }
      : null,
    retry,
    correlation_id: view.correlation_id,
    // The intent of this input, which is the recorded one (callers refuse a continuation whose
    // digest differs before they get here), so the recorded digest is not computed again.
    intent: {
      ...(view.intent ?? {}),
      subject_ref: subjectRefOf(action, input),
      params_digest: view.intent?.params_digest ?? paramsDigest(ctx, action, input),
    },
    ...(signal ? { signal } : {}),
    recorded: ctx.recorded,
    ...(policyApproval ? { policy_approval: policyApproval } : {}),
  });
  if (decision.decision === 'approved') return null;
  if (decision.decision === 'pending') {
    // Nothing sent now; the operation stays open so the same operation_id continues it later.
    return envelopeOf({
      action,
      view,
      outcome: outcomeOf('approval_pending', { remote_effect: view.remote_effect }),
      data: { approval_id: decision.approval_id },
      diagnosticsRef: last?.finish?.diagnostics_ref ?? null,
    });
  }
  if (decision.decision === 'unauthorized') {
    // Not this caller's to run: refused before any byte; an earlier attempt (another caller's
    // continuation) keeps whatever effect it had, and the envelope says the operation's truth.
    if (last && view.remote_effect !== 'none')
      return operationEnvelope(ctx, action, view, {
        refusal: {
          code: 'caller_not_permitted',
          sentence: `This call sent nothing: ${decision.reason}.`,
        },
      });
    const outcome = outcomeOf('caller_not_permitted', { remote_effect: view.remote_effect });
    if (!last) {
      const lost = await resolveOrOwnerLost(ctx, action, view, {
        state: 'cancelled',
        category: 'authorization_denied',
        by: 'operator',
      });
      if (lost) return lost;
    }
    return envelopeOf({
      action,
      view,
      outcome,
      data: { refusal: { code: 'caller_not_permitted', detail: decision.reason } },
      diagnosticsRef: last?.finish?.diagnostics_ref ?? null,
    });
  }
  const category = decision.decision === 'denied' ? 'approval_denied' : 'gate_locked';
  const c = classify({ phase: 'not_sent', blocked: category }, contractOf(action));
  if (!last) {
    const lost = await resolveOrOwnerLost(ctx, action, view, {
      state: 'cancelled',
      category,
      by: 'operator',
    });
    if (lost) return lost;
    return envelopeOf({ action, view, outcome: c, data: null, diagnosticsRef: null });
  }
  // A refused retry: this attempt was not made, but an earlier one may have taken effect (the
  // operation's fold over all of them, not the last attempt's word).
  const effect = view.remote_effect;
  const outcome =
    effect === 'none'
      ? c
      : outcomeOf(category === 'approval_denied' ? 'retry_approval_denied' : 'retry_gate_locked', {
          facts: contractFacts(contractOf(action)),
          remote_effect: effect,
        });
  return envelopeOf({
    action,
    view,
    outcome,
    data: null,
    diagnosticsRef: last.finish?.diagnostics_ref ?? null,
    variant: effect === 'none' ? undefined : 'retry_declined',
  });
}

/** The intent's subject reference; a user callback that throws gives none, never an escape. */
export function subjectRefOf<I>(
  action: EngineAction<I, never> | EngineAction<I, unknown>,
  input: I,
): string | null {
  try {
    return action.subjectRef?.(input) ?? null;
  } catch {
    return null;
  }
}

/**
 * `audit.witness_required`: the checkpoint before a sensitive action must be cosigned by the
 * witness. Without a cosignature within the bound the action is held exactly as a locked gate
 * holds it (gate_locked, nothing sent, the same truth about earlier attempts), and the message
 * names the witness so a person knows what to fix.
 */
export async function witnessHold<I>(
  ctx: EngineContext,
  plan: AttemptPlan<I>,
): Promise<Envelope | null> {
  const check = await ctx.options.audit?.checkpoints?.beforeSensitive();
  if (!check?.held) return null;
  const locked = { check: () => Promise.resolve({ decision: 'gate_locked' as const }) };
  const refused = await gateRefusal({ ...ctx, gate: locked }, plan);
  if (!refused) return null;
  return {
    ...refused,
    message: `The audit witness ${check.witness} (${check.url}) did not cosign the checkpoint before this sensitive action (${check.problem}). ${refused.message}`,
  };
}
