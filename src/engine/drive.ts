// Driving an operation: which retries the evidence licenses, the gate before every attempt, and
// the loop that attempts, retries within the licence and budget, and resolves what is settled.
import { classify, isRuleId } from '../core/classify.js';
import { licence, type Licence, type Licensable } from '../core/licence.js';
import { classRule, DEFAULT_ATTEMPT_BUDGET } from '../core/rules.js';
import { contractFacts, outcomeOf } from '../core/rule-table.js';
import type { Envelope } from '../core/envelope.js';
import type { OperationView } from '../ledger/projection.js';
import { contractOf, type EngineAction } from './action.js';
import { attempt } from './attempt.js';
import { unknownOutcome, type AnyAction, type EngineContext, type RunOptions } from './context.js';
import { budgetLeft, budgetSpent, changedRequest, paramsDigest } from './continuation.js';
import { openGate } from './ports.js';
import { operationLicence } from '../core/operation-outcome.js';
import {
  attemptEnvelope,
  factsOf,
  operationEnvelope,
  ownerLost,
  resolveOrOwnerLost,
} from './truth.js';
import { prepare, type PreparedAttempt } from './request.js';
import { policyStep } from './policy-step.js';

/** licence() (core/licence.ts) with the action's facts: its class and its idempotency key. */
function licenceFor(action: AnyAction, c: Licensable, automatic: boolean): Licence | null {
  return licence(
    c,
    {
      read_only: classRule(action.class).read_only,
      idempotency_honoured: contractOf(action).idempotency_honoured,
    },
    automatic,
  );
}

/** How `gateRefusal` consults the gate for one attempt. */
export interface GateCheckOptions {
  /** The operation as recorded so far. */
  view: OperationView;
  /** The licence this attempt runs under (null for a first attempt). */
  retry: Licence | null;
  signal?: AbortSignal | undefined;
  /** This attempt's request when the caller has prepared it already (prepared once per attempt). */
  prepared?: PreparedAttempt | undefined;
  /** A policy asked for a person (engine/policy-step.ts): the gate asks per call. */
  policyApproval?: { policy_ids: string[]; reason: string } | null;
}

/**
 * Consults the gate before an attempt. Returns null when approved, else the refusal envelope —
 * which never claims "nothing happened" when an earlier attempt may have applied the effect.
 */
export async function gateRefusal<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  input: I,
  { view, retry, signal, prepared: preparedNow, policyApproval = null }: GateCheckOptions,
): Promise<Envelope | null> {
  const { gate, envelopeOf, redactor } = ctx;
  const last = view.attempts.at(-1);
  const prepared = preparedNow ?? tryPrepare(ctx, action, input, view);
  if (!prepared) return notAttempted(ctx, action, view);
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

/** The operation an agent's call drives, and how. */
export interface DriveOptions {
  view: OperationView;
  opts: RunOptions;
  /** The first attempt's request, when the opening prepared it already. */
  firstPrepared?: PreparedAttempt | null;
}

export async function drive<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  input: I,
  { view, opts, firstPrepared = null }: DriveOptions,
): Promise<Envelope> {
  const { sleep, backoff, load, envelopeOf } = ctx;
  let preparedNext = firstPrepared;
  let retry: Licence | null = null;
  // A settled operation called again answers its settled state and sends nothing.
  if (view.state === 'succeeded' || view.state === 'duplicate_effect_confirmed') {
    return operationEnvelope(ctx, action, view, {
      refusal: {
        code: 'already_settled',
        sentence: `This call sent nothing more: operation ${view.operation_id} is already settled.`,
      },
    });
  }
  if (view.attempts.length > 0) {
    const last = view.attempts.at(-1)!;
    const f = last.finish;
    // A rule this version does not know licenses nothing it would not license for any other rule.
    const lic = operationLicence(
      f
        ? licenceFor(
            action,
            { ...f, rule: isRuleId(f.rule) ? f.rule : 'unreadable_evidence' },
            false,
          )
        : null,
      factsOf(action, view),
    );
    // A delegated worker is held to the same licence: it never repeats an unknown write on its own.
    // Nothing is sent: the answer is the operation's, exactly what operation_status says.
    if (!lic) return operationEnvelope(ctx, action, view);
    retry = lic;
  }
  for (;;) {
    // The budget is a hard limit across run, reconcile and recover: nothing more is sent.
    if (budgetLeft(action, view) <= 0) return budgetSpent(ctx, action, view);
    // One preparation per attempt: the gate's card, the write-ahead record and the dispatch all
    // use this one request.
    const prepared = preparedNext ?? tryPrepare(ctx, action, input, view);
    preparedNext = null;
    if (!prepared) return notAttempted(ctx, action, view);
    // Policy first, on every attempt: before the gate, before any byte.
    const policy = await policyStep(ctx, action, input, { view, caller: opts.caller });
    if (policy.refusal) return policy.refusal;
    const refused = await gateRefusal(ctx, action, input, {
      view,
      retry,
      signal: opts.signal,
      prepared,
      policyApproval: policy.approval,
    });
    if (refused) return refused;
    // Records before a sensitive action are checkpointed first, so they cannot vanish unnoticed
    // (and, with audit.witness_required, are cosigned by the witness or the action is held).
    if (classRule(action.class).sensitive) {
      const held = await witnessHold(ctx, action, input, { view, retry, prepared });
      if (held) return held;
    }
    const result = await attempt(ctx, action, input, {
      view,
      retry,
      run: opts,
      settledBy: 'attempt',
      prepared,
    });
    if (result.attemptId === null)
      return result.ownerLost !== undefined
        ? ownerLost(ctx, action, (await load(view.operation_id)) ?? view, result.ownerLost)
        : notAttempted(ctx, action, view);
    const c = result.classification;
    if (result.fenced) return ownerLost(ctx, action, result.fenced.view, result.fenced.why);
    if (c.category === 'succeeded')
      return envelopeOf({
        action,
        view,
        outcome: c,
        data: result.data,
        diagnosticsRef: result.diagnosticsRef,
      });
    // The operation as all its attempts establish it: this attempt's answer speaks for itself only.
    const after = (await load(view.operation_id)) ?? view;
    const facts = factsOf(action, after);
    const next = opts.worker ? null : operationLicence(licenceFor(action, c, true), facts);
    const left = (action.attempt_budget ?? DEFAULT_ATTEMPT_BUDGET) - view.attempts.length - 1;
    if (next && left > 0 && !opts.signal?.aborted) {
      if (next.reason === 'connection_not_established')
        await sleep(backoff(view.attempts.length + 1));
      else if (c.retry === 'after_delay' && c.retry_after_ms !== null)
        await sleep(c.retry_after_ms);
      const reloaded = await load(view.operation_id);
      if (!reloaded) throw new Error(`operation ${view.operation_id} vanished`);
      view = reloaded;
      retry = next;
      continue;
    }
    // Settled as failed or cancelled only while nothing may have applied; an operation an earlier
    // attempt is known to have applied is settled as done, whatever this attempt met.
    await settleAppliedEarlier(ctx, after, c, 'attempt');
    if (facts.effect === 'none') {
      // Taken over while this attempt was out: the new owner may have sent since, so this
      // attempt's answer no longer says what the operation did.
      const lost = await resolveOrOwnerLost(ctx, action, after, {
        state:
          c.category === 'gate_locked' || c.category === 'approval_denied' ? 'cancelled' : 'failed',
        category: c.category,
        by: 'attempt',
      });
      if (lost) return lost;
    }
    if (c.retry === 'allowed' || c.retry === 'after_delay') {
      // Nothing more may be sent once the budget is spent: never invite a call it will refuse.
      const now = await load(view.operation_id);
      if (now && budgetLeft(action, now) <= 0)
        return budgetSpent(ctx, action, now, { lookedUp: false, data: result.data });
    }
    return attemptEnvelope(ctx, action, after, {
      claim: c,
      // Null but for a transport's refusal (its code) or an upstream MCP tool's own error text.
      data: result.data,
      diagnosticsRef: result.diagnosticsRef,
    });
  }
}

/**
 * An operation an earlier attempt is known to have applied is settled as done when a later attempt
 * (refused, failed, unanswered) did not itself show the effect: the ledger then says what the agent
 * is told, and a call again answers the settled state.
 */
async function settleAppliedEarlier(
  ctx: EngineContext,
  after: OperationView,
  c: { remote_effect: string },
  by: 'attempt' | 'recovery' | 'reconciliation',
): Promise<void> {
  if (after.remote_effect !== 'applied' || c.remote_effect === 'applied') return;
  if (after.resolution !== null) return;
  const refs = after.attempts.flatMap((a) =>
    a.finish?.response?.remote_ref ? [a.finish.response.remote_ref] : [],
  );
  await ctx.resolve(after, {
    state: 'succeeded',
    category: 'succeeded',
    by,
    remoteRefs: refs,
  });
}

/** The operation, licence and caller of an attempt outside an agent's run. */
export interface LicensedAttemptOptions {
  view: OperationView;
  /** The licence recorded on the attempt (null for a first attempt). */
  licence: Licence | null;
  by: 'recovery' | 'reconciliation';
}

/**
 * One attempt outside an agent's run (recovery, or a retry licensed by reconciliation): the budget,
 * the recorded request and the gate are checked first, the licence recorded on the attempt (none
 * for a first attempt), and the operation resolved when settled.
 */
export async function licensedAttempt(
  ctx: EngineContext,
  action: AnyAction,
  params: unknown,
  { view, licence, by }: LicensedAttemptOptions,
): Promise<Envelope> {
  const { resolve, envelopeOf } = ctx;
  const a = action as unknown as EngineAction<unknown, unknown>;
  if (budgetLeft(action, view) <= 0)
    return budgetSpent(ctx, action, view, { lookedUp: by === 'reconciliation' });
  if (changedRequest(ctx, a, params, view)) {
    // The recorded input no longer rebuilds the operation's request (redacted, or the action's
    // definition changed): sending it would be another request under this operation's name.
    return nothingSentNow(ctx, a, view, {
      rule: 'request_changed',
      message: (sent) =>
        `The recorded input no longer rebuilds the request of this operation, so nothing was sent; ${sent ? `whether ${a.subject} was applied is unknown and ` : ''}a person must decide.`,
    });
  }
  const prepared = tryPrepare(ctx, a, params, view);
  if (!prepared) return notAttempted(ctx, a, view);
  // Recovery and reconciliation are run by the local operator: the policy sees the local caller.
  const policy = await policyStep(ctx, a, params, { view });
  if (policy.refusal) return policy.refusal;
  const refused = await gateRefusal(ctx, a, params, {
    view,
    retry: licence,
    prepared,
    policyApproval: policy.approval,
  });
  if (refused) return refused;
  const result = await attempt(ctx, a, params, {
    view,
    retry: licence,
    run: {},
    settledBy: by,
    prepared,
  });
  if (result.attemptId === null)
    return result.ownerLost !== undefined
      ? ownerLost(ctx, a, (await ctx.load(view.operation_id)) ?? view, result.ownerLost)
      : notAttempted(ctx, a, view);
  const c = result.classification;
  if (result.fenced) return ownerLost(ctx, a, result.fenced.view, result.fenced.why);
  if (c.category === 'succeeded' && !result.resolved) {
    await resolve(view, {
      state: 'succeeded',
      category: c.category,
      by,
      remoteRefs: result.remoteRef ? [result.remoteRef] : [],
    });
  }
  if (c.category === 'succeeded')
    return envelopeOf({
      action: a,
      view,
      outcome: c,
      data: result.data,
      diagnosticsRef: result.diagnosticsRef,
    });
  const after = (await ctx.load(view.operation_id)) ?? view;
  await settleAppliedEarlier(ctx, after, c, by);
  if (after.remote_effect === 'none' && by === 'recovery') {
    const lost = await resolveOrOwnerLost(ctx, a, after, {
      state: 'failed',
      category: c.category,
      by,
    });
    if (lost) return lost;
  }
  return attemptEnvelope(ctx, a, after, {
    claim: c,
    data: null,
    diagnosticsRef: result.diagnosticsRef,
  });
}

/**
 * The action's request function failed, so no attempt was made: nothing was sent now, and what
 * earlier attempts did stays as it was. Not retryable by the agent; a person must look.
 */
function notAttempted(
  ctx: EngineContext,
  action: AnyAction | EngineAction<never, never>,
  view: OperationView,
): Envelope {
  return nothingSentNow(ctx, action, view, {
    rule: 'request_unbuildable',
    message: (sent) =>
      `The request for ${action.subject} could not be built (the action's request function failed), so nothing was sent now; ${sent ? `whether an earlier attempt applied it is unknown and ` : ''}a person must look.`,
  });
}

/**
 * Nothing was sent now and a person must look: \`escalate\`, with \`outcome_unknown\` when an earlier
 * attempt may have reached the destination, else \`local_failure\` with no remote effect.
 */
function nothingSentNow(
  ctx: EngineContext,
  action: AnyAction | EngineAction<never, never>,
  view: OperationView,
  {
    rule,
    message,
  }: {
    /** Why nothing was sent: the request changed, or could not be built. */
    rule: 'request_changed' | 'request_unbuildable';
    message: (earlierSent: boolean) => string;
  },
): Envelope {
  // What the operation's attempts established (core/fold.ts), not whether one was answered.
  const effect = view.remote_effect;
  const sent = effect !== 'none';
  const env = ctx.envelopeOf({
    action,
    view,
    outcome:
      effect === 'applied'
        ? outcomeOf('operation_applied')
        : sent
          ? unknownOutcome('unknown_person_decides')
          : outcomeOf(rule),
    data: null,
    diagnosticsRef: null,
  });
  return {
    ...env,
    message:
      effect === 'applied'
        ? `${action.subject[0]!.toUpperCase()}${action.subject.slice(1)} was applied by an earlier attempt; nothing was sent now.`
        : message(sent),
  };
}

/** The attempt's request, or null when the action's request function cannot build it now. */
function tryPrepare<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  input: I,
  view: OperationView,
): PreparedAttempt | null {
  try {
    return prepare(ctx, action, input, view);
  } catch {
    return null;
  }
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
async function witnessHold<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  input: I,
  {
    view,
    retry,
    prepared,
  }: { view: OperationView; retry: Licence | null; prepared: PreparedAttempt },
): Promise<Envelope | null> {
  const check = await ctx.options.audit?.checkpoints?.beforeSensitive();
  if (!check?.held) return null;
  const locked = { check: () => Promise.resolve({ decision: 'gate_locked' as const }) };
  const refused = await gateRefusal({ ...ctx, gate: locked }, action, input, {
    view,
    retry,
    prepared,
  });
  if (!refused) return null;
  return {
    ...refused,
    message: `The audit witness ${check.witness} (${check.url}) did not cosign the checkpoint before this sensitive action (${check.problem}). ${refused.message}`,
  };
}
