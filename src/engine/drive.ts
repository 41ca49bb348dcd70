// Driving an operation: one loop for every attempt, whoever makes it — an agent's call, recovery
// after a restart, or the retry a reconciliation licensed. Each turn plans one attempt (budget,
// the request prepared once: gate-step.ts `AttemptPlan`), asks policy, the gate and, before a
// sensitive action, the witness; makes the attempt (attempt.ts); then either settles what the
// evidence shows and answers, or — when the evidence licenses it (core/licence.ts), the budget
// allows and the caller has not gone — waits and retries, telling `onRetry` why and how long.
//
//   drive ────────────┐                        ┌─ answered / refused / held ─→ envelope
//   licensedAttempt ──┴→ plan → policy → gate ─┴→ attempt ─┬─ settled ─────→ envelope
//                        ↑                                 └─ licensed ─→ retry event, wait ─┐
//                        └──────────────────────────────────────────────────────────────────┘
import { isRuleId } from '../core/classify.js';
import { licence, type Licence, type Licensable } from '../core/licence.js';
import { classRule, DEFAULT_ATTEMPT_BUDGET } from '../core/rules.js';
import { outcomeOf } from '../core/rule-table.js';
import type { Envelope } from '../core/envelope.js';
import type { OperationView } from '../ledger/projection.js';
import { contractOf, type EngineAction } from './action.js';
import { attempt, type AttemptResult } from './attempt.js';
import {
  unknownOutcome,
  type AnyAction,
  type EngineContext,
  type RetryEvent,
  type RunOptions,
} from './context.js';
import { budgetLeft, budgetSpent, changedRequest } from './continuation.js';
import { operationLicence } from '../core/operation-outcome.js';
import { gateRefusal, witnessHold, type AttemptPlan } from './gate-step.js';
import {
  attemptEnvelope,
  factsOf,
  operationEnvelope,
  ownerLost,
  resolveOrOwnerLost,
} from './truth.js';
import { prepare, type PreparedAttempt } from './request.js';
import { policyStep } from './policy-step.js';

/** Who runs the loop, and how far it may go on its own. */
interface LoopOptions {
  /** Who settles what the attempts establish. */
  by: 'attempt' | 'recovery' | 'reconciliation';
  /** The caller's run: its caller (for policy), signal, worker. Recovery's and reconciliation's are the local operator's. */
  run: RunOptions;
  /** Retry on its own within the licence and the budget (an agent's call; never a worker's). */
  retries: boolean;
}

/** Where the loop starts: the operation, the licence of its first attempt, a request prepared already. */
interface LoopStart<I> {
  action: EngineAction<I, unknown>;
  input: I;
  view: OperationView;
  licence: Licence | null;
  prepared: PreparedAttempt | null;
}

/** What an attempt leads to: an answer, or a licensed retry. */
type Next = { envelope: Envelope } | { retry: RetryEvent; licence: Licence };

/**
 * The one loop. It ends on the first answer: a refusal or hold before an attempt, an attempt the
 * store refused (fenced), or what the evidence settles; it goes round only for a licensed retry.
 * It is bounded by the budget: every turn records an attempt or returns.
 */
async function attemptLoop<I>(
  ctx: EngineContext,
  start: LoopStart<I>,
  loop: LoopOptions,
): Promise<Envelope> {
  const { action, input } = start;
  let { view, licence: retry, prepared: preparedNext } = start;
  for (;;) {
    // The budget is a hard limit across run, reconcile and recover: nothing more is sent.
    if (budgetLeft(action, view) <= 0)
      return budgetSpent(ctx, action, view, { lookedUp: loop.by === 'reconciliation' });
    const prepared = preparedNext ?? tryPrepare(ctx, action, input, view);
    preparedNext = null;
    if (!prepared) return notAttempted(ctx, action, view);
    const plan: AttemptPlan<I> = {
      action,
      input,
      view,
      licence: retry,
      prepared,
      signal: loop.run.signal,
    };
    const refused = await beforeSend(ctx, plan, loop);
    if (refused) return refused;
    const result = await attempt(ctx, action, {
      view,
      retry,
      run: loop.run,
      settledBy: loop.by,
      prepared,
    });
    const next = await afterAttempt(ctx, plan, result, loop);
    if ('envelope' in next) return next.envelope;
    tellRetry(ctx, next.retry);
    if (next.retry.delay_ms > 0) await ctx.sleep(next.retry.delay_ms);
    const reloaded = await ctx.load(view.operation_id);
    if (!reloaded) throw new Error(`operation ${view.operation_id} vanished`);
    view = reloaded;
    retry = next.licence;
  }
}

/** Policy first, on every attempt; then the gate; then, for a sensitive action, the witness. */
async function beforeSend<I>(
  ctx: EngineContext,
  plan: AttemptPlan<I>,
  loop: LoopOptions,
): Promise<Envelope | null> {
  const policy = await policyStep(ctx, plan.action, plan.input, {
    view: plan.view,
    caller: loop.run.caller,
  });
  if (policy.refusal) return policy.refusal;
  const refused = await gateRefusal(ctx, plan, { policyApproval: policy.approval });
  if (refused) return refused;
  // Records before a sensitive action are checkpointed first, so they cannot vanish unnoticed
  // (and, with audit.witness_required, are cosigned by the witness or the action is held).
  return classRule(plan.action.class).sensitive ? witnessHold(ctx, plan) : null;
}

/** What the attempt's evidence settles, or the licensed retry it permits. */
async function afterAttempt<I>(
  ctx: EngineContext,
  plan: AttemptPlan<I>,
  result: AttemptResult,
  loop: LoopOptions,
): Promise<Next> {
  const { action, view } = plan;
  const envelope = (e: Envelope): Next => ({ envelope: e });
  if (result.attemptId === null)
    return envelope(
      result.ownerLost !== undefined
        ? ownerLost(ctx, action, (await ctx.load(view.operation_id)) ?? view, result.ownerLost)
        : notAttempted(ctx, action, view),
    );
  if (result.fenced) return envelope(ownerLost(ctx, action, result.fenced.view, result.fenced.why));
  const c = result.classification;
  // A success is resolved in the same append as its attempt_finished (attempt.ts `settledBy`).
  if (c.category === 'succeeded')
    return envelope(
      ctx.envelopeOf({
        action,
        view,
        outcome: c,
        data: result.data,
        diagnosticsRef: result.diagnosticsRef,
      }),
    );
  // The operation as all its attempts establish it: this attempt's answer speaks for itself only.
  const after = (await ctx.load(view.operation_id)) ?? view;
  const facts = factsOf(action, after);
  const next = loop.retries ? operationLicence(licenceFor(action, c, true), facts) : null;
  const left = (action.attempt_budget ?? DEFAULT_ATTEMPT_BUDGET) - view.attempts.length - 1;
  if (next && left > 0 && !plan.signal?.aborted) {
    const delay =
      next.reason === 'connection_not_established'
        ? ctx.backoff(view.attempts.length + 1)
        : c.retry === 'after_delay' && c.retry_after_ms !== null
          ? c.retry_after_ms
          : 0;
    return {
      licence: next,
      retry: {
        operation_id: view.operation_id,
        attempt: view.attempts.length + 2,
        reason: next.reason,
        decision: next.decision,
        delay_ms: delay,
      },
    };
  }
  // Settled as failed or cancelled only while nothing may have applied; an operation an earlier
  // attempt is known to have applied is settled as done, whatever this attempt met.
  await settleAppliedEarlier(ctx, after, c, loop.by);
  // A reconciliation's retry leaves the operation open: the lookup that licensed it decided
  // nothing about a failure, and the agent's next call starts from what is recorded.
  if (facts.effect === 'none' && loop.by !== 'reconciliation') {
    // Taken over while this attempt was out: the new owner may have sent since, so this
    // attempt's answer no longer says what the operation did.
    const lost = await resolveOrOwnerLost(ctx, action, after, {
      state:
        c.category === 'gate_locked' || c.category === 'approval_denied' ? 'cancelled' : 'failed',
      category: c.category,
      by: loop.by,
    });
    if (lost) return envelope(lost);
  }
  if (c.retry === 'allowed' || c.retry === 'after_delay') {
    // Nothing more may be sent once the budget is spent: never invite a call it will refuse.
    const now = await ctx.load(view.operation_id);
    // A lookup made before this attempt says nothing about it: a lookup is the next step again.
    if (now && budgetLeft(action, now) <= 0)
      return envelope(budgetSpent(ctx, action, now, { lookedUp: false, data: result.data }));
  }
  return envelope(
    attemptEnvelope(ctx, action, after, {
      claim: c,
      // Null but for a transport's refusal (its code) or an upstream MCP tool's own error text.
      data: result.data,
      diagnosticsRef: result.diagnosticsRef,
    }),
  );
}

/** Hands a retry to the `onRetry` listener; a listener that throws changes nothing. */
function tellRetry(ctx: EngineContext, event: RetryEvent): void {
  try {
    // An async listener's rejection is caught too (it would otherwise end the process).
    const told: unknown = ctx.options.onRetry?.(event);
    if (typeof (told as PromiseLike<unknown> | null)?.then === 'function')
      Promise.resolve(told).catch(() => undefined);
  } catch {
    // A listener is told, never asked: the loop goes on.
  }
}

/** The operation an agent's call drives, and how. */
export interface DriveOptions {
  view: OperationView;
  opts: RunOptions;
  /** The first attempt's request, when the opening prepared it already. */
  firstPrepared?: PreparedAttempt | null;
}

/** An agent's call: its operation's next attempts, under the licence the last one left. */
export async function drive<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  input: I,
  { view, opts, firstPrepared = null }: DriveOptions,
): Promise<Envelope> {
  // A settled operation called again answers its settled state and sends nothing.
  if (view.state === 'succeeded' || view.state === 'duplicate_effect_confirmed') {
    return operationEnvelope(ctx, action, view, {
      refusal: {
        code: 'already_settled',
        sentence: `This call sent nothing more: operation ${view.operation_id} is already settled.`,
      },
    });
  }
  let retry: Licence | null = null;
  if (view.attempts.length > 0) {
    const f = view.attempts.at(-1)!.finish;
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
  return attemptLoop(
    ctx,
    { action, input, view, licence: retry, prepared: firstPrepared },
    { by: 'attempt', run: opts, retries: !opts.worker },
  );
}

/** The operation, licence and caller of an attempt outside an agent's run. */
export interface LicensedAttemptOptions {
  view: OperationView;
  /** The licence recorded on the attempt (null for a first attempt). */
  licence: Licence | null;
  by: 'recovery' | 'reconciliation';
  /** The signal of the call that asked (a reconcile_operation call): cancels the attempt. */
  signal?: AbortSignal | undefined;
}

/**
 * One attempt outside an agent's run (recovery, or a retry licensed by reconciliation), made from
 * the recorded input: refused first when that input no longer rebuilds the operation's request,
 * then the same loop as an agent's call, without automatic retries.
 */
export async function licensedAttempt(
  ctx: EngineContext,
  action: AnyAction,
  params: unknown,
  { view, licence, by, signal }: LicensedAttemptOptions,
): Promise<Envelope> {
  const a = action as unknown as EngineAction<unknown, unknown>;
  if (budgetLeft(action, view) > 0 && changedRequest(ctx, a, params, view)) {
    // The recorded input no longer rebuilds the operation's request (redacted, or the action's
    // definition changed): sending it would be another request under this operation's name.
    return nothingSentNow(ctx, a, view, {
      rule: 'request_changed',
      message: (sent) =>
        `The recorded input no longer rebuilds the request of this operation, so nothing was sent; ${sent ? `whether ${a.subject} was applied is unknown and ` : ''}a person must decide.`,
    });
  }
  return attemptLoop(
    ctx,
    { action: a, input: params, view, licence, prepared: null },
    { by, run: signal ? { signal } : {}, retries: false },
  );
}

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
