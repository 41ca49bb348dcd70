// Policy before every attempt (issue 34): evaluated before any send and before approvals, on every
// attempt of an operation (a first call and each retry alike), and recorded as `policy_decided`.
//
// Contracts:
// - `deny` ⇒ `authorization_denied`, nothing sent now, the policy ids and reason in
//   `data.policy`. A denied retry never claims "not applied": the envelope keeps what the
//   operation's attempts established (core/fold.ts) and its next step.
// - `require_approval` ⇒ the approval gate asks per call (GateContext.policy_approval); a gate that
//   cannot ask refuses it (fail closed).
// - A policy port that throws is a `deny` (fail closed); its decision is recorded all the same.
import { localCaller } from '../core/caller.js';
import type { Envelope } from '../core/envelope.js';
import { outcomeOf } from '../core/rule-table.js';
import type { OperationView } from '../ledger/projection.js';
import type { EngineAction } from './action.js';
import type { EngineContext, RunOptions } from './context.js';
import type { PolicyVerdict } from './ports.js';
import { operationEnvelope, resolveOrOwnerLost } from './truth.js';

export interface PolicyStep {
  /** The refusal envelope when the policy denied the attempt. */
  refusal: Envelope | null;
  /** When the policy asks for a person: passed to the approval gate. */
  approval: { policy_ids: string[]; reason: string } | null;
}

const NO_POLICY: PolicyStep = { refusal: null, approval: null };

/** The attempt a policy decides, and who asks for it (the local operator when absent). */
export interface PolicyStepOptions {
  view: OperationView;
  caller?: RunOptions['caller'] | undefined;
}

/** Decides one attempt of `view` by policy; records the decision before anything else happens. */
export async function policyStep<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  input: I,
  { view, caller: asker }: PolicyStepOptions,
): Promise<PolicyStep> {
  const port = ctx.options.policy;
  if (!port) return NO_POLICY;
  const caller = asker ?? localCaller();
  const last = view.attempts.at(-1);
  let verdict: PolicyVerdict;
  try {
    verdict = await port.decide({
      action: { name: action.name, class: action.class, destination: action.destination },
      args: input,
      caller,
      session_id: view.session_id,
      operation_id: view.operation_id,
      operation: {
        attempts: view.attempts.length,
        effect: view.remote_effect,
        state: view.state,
        last_category: last?.finish?.category ?? null,
      },
    });
  } catch (error) {
    verdict = {
      decision: 'deny',
      policy_ids: [],
      reason: `the policy could not be evaluated (${error instanceof Error ? error.message : String(error)}), so the call is denied`,
      context_digest: '',
      principal: `${caller.kind}:${caller.subject}`,
      counted: {},
    };
  }
  if (verdict.decision === 'require_approval' && ctx.gate.asks !== true) {
    verdict = {
      ...verdict,
      decision: 'deny',
      reason: `${verdict.reason} (a person must approve, and no approver is configured: add approvals: to candor.yaml)`,
    };
  }
  await ctx.append([
    {
      kind: 'policy_decided',
      at: ctx.clock.now(),
      session_id: view.session_id,
      operation_id: view.operation_id,
      correlation_id: view.correlation_id,
      data: {
        decision: verdict.decision,
        policy_ids: verdict.policy_ids,
        reason: verdict.reason,
        context_digest: verdict.context_digest,
        principal: verdict.principal,
        attempt: view.attempts.length + 1,
        counted: verdict.counted,
      },
    },
  ]);
  if (verdict.decision === 'allow') return NO_POLICY;
  if (verdict.decision === 'require_approval')
    return { refusal: null, approval: { policy_ids: verdict.policy_ids, reason: verdict.reason } };
  return { refusal: await denied(ctx, action, view, verdict), approval: null };
}

async function denied<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  view: OperationView,
  verdict: PolicyVerdict,
): Promise<Envelope> {
  const last = view.attempts.at(-1);
  const effect = view.remote_effect;
  const by = verdict.policy_ids.length > 0 ? ` (${verdict.policy_ids.join(', ')})` : '';
  const data = {
    policy: { decision: 'deny', policy_ids: verdict.policy_ids, reason: verdict.reason },
  };
  if (!last) {
    // Taken over meanwhile: its new owner decides (and may send), so this is not "not applied".
    const lost = await resolveOrOwnerLost(ctx, action, view, {
      state: 'cancelled',
      category: 'authorization_denied',
      by: 'operator',
    });
    if (lost) return lost;
    const env = ctx.envelopeOf({
      action,
      view,
      outcome: outcomeOf('policy_denied'),
      data,
      diagnosticsRef: null,
    });
    return {
      ...env,
      message: `Policy denied this call${by}: ${verdict.reason}; nothing was sent, so ${action.subject} was not applied.`,
    };
  }
  // A refused retry: this attempt was not made, and what earlier attempts did stays as it was —
  // the envelope states the operation (it may have applied), the denial is its refusal code.
  if (effect !== 'none')
    return operationEnvelope(ctx, action, view, {
      refusal: {
        code: 'policy_denied',
        sentence: `Policy denied this retry${by}: ${verdict.reason}; nothing was sent now.`,
        data,
      },
    });
  // Every attempt so far is known not to have applied (the others returned above).
  const env = ctx.envelopeOf({
    action,
    view,
    outcome: outcomeOf('policy_denied'),
    data,
    diagnosticsRef: last.finish?.diagnostics_ref ?? null,
  });
  const earlier =
    effect === 'none'
      ? `no earlier attempt applied ${action.subject}`
      : effect === 'applied'
        ? `an earlier attempt did apply ${action.subject}`
        : `whether an earlier attempt applied ${action.subject} is unknown`;
  return {
    ...env,
    message: `Policy denied this retry${by}: ${verdict.reason}; nothing was sent now, and ${earlier}.`,
  };
}
