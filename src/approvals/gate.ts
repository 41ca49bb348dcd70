// The approval gate (DESIGN.md §2 "Approvals"), consulted by the engine before every attempt.
//
// Contracts:
// - Locked ⇒ `gate_locked`, and nobody is asked. Every lock change the gate sees (or is told of)
//   becomes one `gate_changed` ledger event.
// - `auto` (reads by default) ⇒ approved without a prompt.
// - `session` ⇒ one prompt per (session, action). The approval lives only in this gate's memory,
//   under a random instance id written on the card: it is never persisted, so it is gone when the
//   process ends. Approving `create_issue` says nothing about any other action.
// - `per_call` ⇒ one prompt per call, bound to operation id + request fingerprint, valid until the
//   card's `expires_at` (policy TTL). "Used" means an attempt that may have reached the destination:
//   a retry whose previous attempt was `not_sent` reuses it; any other retry asks again.
// - A denial ends that path: the same operation (per call) or the same (session, action) is denied
//   from then on without asking again. An answer after `expires_at` is recorded as `expired` and
//   approves nothing.
// - Sensitive classes (policy.ts) retried after an attempt whose outcome is unknown need a fresh
//   per-call approval, whatever session or per-call approval exists; its card shows the intent, the
//   dispatch state so far and the planned recovery.
// - Every prompt writes `approval_requested` (with the card) then `approval_decided`, both with the
//   operation id; `prompts()` counts them, because approval fatigue is a defect too.
// - Never hang a call: a call waits at most `wait_ms` for the answer, then the gate answers
//   `pending` (the card id) and the card stays open. The answer, whenever it comes, is recorded and
//   applies to the next call of that operation with the same request fingerprint (or, for session
//   scope, of that action). A cancelled call withdraws its per-call card (recorded `expired` by
//   `withdrawn`); `shutdown()` denies every open card (recorded `denied` by `gateway:stopped`).
// - A policy that requires a person (`ctx.policy_approval`, src/policy) makes the call `per_call`
//   whatever the action's scope; its card (`policy_required`) names the policies and the reason.
import type { GateContext, GateDecision, Gate } from '../engine/ports.js';
import { createIdFactory, type IdFactory } from '../core/ids.js';
import { systemClock, systemRandom, type Clock, type Random } from '../core/time.js';
import type { LedgerStore } from '../ledger/store.js';
import { projectOperation, type OperationView } from '../ledger/projection.js';
import {
  questionFor,
  type ApprovalCard,
  type PlannedRecovery,
  type PriorAttempt,
  type PromptReason,
} from './card.js';
import type { Approver, ApproverVerdict } from './approvers/approver.js';
import type { LockSource } from './lock.js';
import type { RequestedVia } from './identity.js';
import { defaultPolicy, type ApprovalPolicy } from './policy.js';

/**
 * The engine's context; when it carries no `prior_attempt` / `retry`, the gate reads the ledger.
 */
export type ApprovalContext = GateContext;

export interface ApprovalGateOptions {
  ledger: LedgerStore;
  approver: Approver;
  policy?: ApprovalPolicy;
  clock?: Clock;
  ids?: IdFactory;
  /** `true` when locked. A throwing check counts as locked (fail closed). */
  lock?: (() => Promise<boolean>) | LockSource;
  random?: Random;
  /** How long one call waits for an answer before `pending` (default 10 s). */
  wait_ms?: number;
  /**
   * Whether the calls this gate sees come from an agent (the MCP gateway, the default) or from a
   * person's own command (`candor recover`): written on every card and approval event.
   */
  requested_via?: RequestedVia;
}

export const DEFAULT_APPROVAL_WAIT_MS = 10_000;

export interface GateChangeInput {
  locked: boolean;
  by: string;
  at?: number;
}

export interface ApprovalGate extends Gate {
  /** Random id of this gate instance; session approvals belong to it alone. */
  readonly instance_id: string;
  check(ctx: ApprovalContext): Promise<GateDecision>;
  /** Whether the lock is in force (a change is recorded like any other); asks nobody. */
  locked(): Promise<boolean>;
  /** Prompts shown, for one session or in total. */
  prompts(sessionId?: string): number;
  /** Records a lock transition reported by its source (e.g. the vault's `onGateChange`). */
  recordGateChange(change: GateChangeInput): Promise<void>;
  /** Synchronous form for callbacks; the write is awaited by `idle()`. */
  onGateChange(change: GateChangeInput): void;
  /** Resolves when every queued ledger write finished; rejects with the first failure. */
  idle(): Promise<void>;
  /** Denies every open card (the process is stopping) and resolves once each is recorded. */
  shutdown(): Promise<void>;
  /** Cards asked and not yet answered. */
  open(): number;
}

interface CallGrant {
  approval_id: string;
  request_fingerprint: string;
  expires_at: number;
  /** Decided after the asking call returned `pending`: not yet used by any attempt. */
  fresh: boolean;
}

/** A card being asked: its answer arrives in the background and outlives the call that asked. */
interface OpenCard {
  card: ApprovalCard;
  answer: Promise<ApproverVerdict>;
  withdraw: AbortController;
}

const APPROVED: GateDecision = { decision: 'approved' };
const DENIED: GateDecision = { decision: 'denied' };
const LOCKED: GateDecision = { decision: 'gate_locked' };
const WITHDRAWN = 'withdrawn';
const SHUTDOWN = 'shutdown';

export function createApprovalGate(options: ApprovalGateOptions): ApprovalGate {
  const { ledger, approver } = options;
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? createIdFactory(clock);
  const policy = options.policy ?? defaultPolicy();
  const lockSource: LockSource | null =
    options.lock === undefined
      ? null
      : typeof options.lock === 'function'
        ? { name: 'lock', isLocked: options.lock }
        : options.lock;
  const instanceId = Buffer.from((options.random ?? systemRandom).bytes(12)).toString('hex');
  const waitMs = options.wait_ms ?? DEFAULT_APPROVAL_WAIT_MS;
  const requestedVia: RequestedVia = options.requested_via ?? 'agent';
  /** Open per-call cards by operation id, and open session cards by (session, action). */
  // Promises, set before the first await, so concurrent checks share one card.
  const openCalls = new Map<string, Promise<OpenCard>>();
  const openSessions = new Map<string, Promise<OpenCard>>();
  const allOpen = new Set<OpenCard>();

  const sessionGranted = new Map<string, string>(); // (session, action) -> approval id
  const sessionDenied = new Set<string>();
  const callGrants = new Map<string, CallGrant>(); // operation id -> grant
  const callDenied = new Set<string>();
  const promptCount = new Map<string, number>();
  let lastLocked: boolean | null = null;
  let lockChain: Promise<unknown> = Promise.resolve();
  const queued: Array<Promise<void>> = [];

  /** Serialises lock observations and reported changes so one transition gives one event. */
  function serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = lockChain.then(fn, fn);
    lockChain = next.catch(() => undefined);
    return next;
  }

  async function writeGateChanged(locked: boolean, by: string, at: number): Promise<void> {
    await ledger.append([
      {
        kind: 'gate_changed',
        at,
        session_id: null,
        operation_id: null,
        correlation_id: null,
        data: { locked, by },
      },
    ]);
  }

  function observeLock(): Promise<boolean> {
    if (!lockSource) return Promise.resolve(false);
    return serial(async () => {
      let locked: boolean;
      try {
        locked = await lockSource.isLocked();
      } catch {
        locked = true;
      }
      // The first observation is a change only when it finds the gate locked: an open gate is the
      // state every process starts from.
      const changed = lastLocked === null ? locked : locked !== lastLocked;
      if (changed) {
        const holder =
          locked && lockSource.holder ? await lockSource.holder().catch(() => null) : null;
        const by = holder ? `${lockSource.name}:${holder.by}` : `observed:${lockSource.name}`;
        await writeGateChanged(locked, by, clock.now());
      }
      lastLocked = locked;
      return locked;
    });
  }

  const sessionKey = (ctx: GateContext): string => `${ctx.session_id}\u0000${ctx.action}`;

  async function loadView(operationId: string): Promise<OperationView | null> {
    return projectOperation(await ledger.query({ operation_id: operationId }));
  }

  /**
   * Writes `approval_requested` and asks in the background; the answer is recorded as
   * `approval_decided` and handed to `settle` whether or not a call still waits for it.
   */
  async function ask(
    ctx: ApprovalContext,
    scope: ApprovalCard['scope'],
    reason: PromptReason,
    view: OperationView | null,
    retry: { prior: PriorAttempt; recovery: PlannedRecovery } | null,
    settle: (verdict: ApproverVerdict, card: ApprovalCard) => void,
  ): Promise<OpenCard> {
    const approvalId = ids.mint('apr');
    const now = clock.now();
    const base = {
      approval_id: approvalId,
      scope,
      reason,
      session_id: ctx.session_id,
      operation_id: ctx.operation_id,
      action: ctx.action,
      action_class: ctx.action_class,
      intent: { ...ctx.intent },
      request_fingerprint: ctx.request_fingerprint,
      request: ctx.request ?? null,
      instance_id: instanceId,
      requested_at: now,
      expires_at: now + policy.per_call_ttl_ms,
      dispatch_state: retry?.prior.dispatch_state ?? null,
      prior_attempt: retry?.prior ?? null,
      planned_recovery: retry?.recovery ?? null,
      ...(reason === 'policy_required' && ctx.policy_approval
        ? { policy: { ...ctx.policy_approval } }
        : {}),
      requested_by: view?.caller ? { ...view.caller, scopes: [...view.caller.scopes] } : null,
      requested_via: requestedVia,
    };
    const card: ApprovalCard = { ...base, question: questionFor(base) };
    const meta = {
      session_id: ctx.session_id || null,
      operation_id: ctx.operation_id,
      correlation_id: view?.correlation_id ?? null,
    };
    await ledger.append([
      {
        kind: 'approval_requested',
        at: now,
        ...meta,
        data: {
          approval_id: approvalId,
          scope,
          request_fingerprint: scope === 'per_call' ? ctx.request_fingerprint || null : null,
          card: { ...card },
          requested_by: card.requested_by ?? null,
          requested_via: requestedVia,
        },
      },
    ]);
    promptCount.set(ctx.session_id, (promptCount.get(ctx.session_id) ?? 0) + 1);
    const withdraw = new AbortController();
    const answer = (async (): Promise<ApproverVerdict> => {
      let verdict: ApproverVerdict;
      try {
        verdict = await approver.ask(card, { signal: withdraw.signal });
      } catch {
        // Nobody could be asked: not an approval.
        verdict = { decision: 'denied', by: `${approver.name}:unreachable` };
      }
      // The gate, not the adapter, says why a withdrawn card ended.
      if (withdraw.signal.aborted)
        verdict =
          withdraw.signal.reason === SHUTDOWN
            ? { decision: 'denied', by: 'gateway:stopped' }
            : { decision: 'expired', by: WITHDRAWN };
      if (verdict.decision === 'approved' && clock.now() > card.expires_at)
        verdict = { ...verdict, decision: 'expired' };
      // An approval given for another request approves nothing (DESIGN.md §2: per call is bound to
      // operation id + request fingerprint).
      if (
        verdict.decision === 'approved' &&
        verdict.request_fingerprint !== undefined &&
        verdict.request_fingerprint !== card.request_fingerprint
      )
        verdict = { ...verdict, decision: 'denied' };
      await ledger.append([
        {
          kind: 'approval_decided',
          at: clock.now(),
          ...meta,
          data: {
            approval_id: approvalId,
            decision: verdict.decision,
            approver: verdict.by,
            decided_by: verdict.identity ?? null,
            reason: verdict.reason ?? null,
            request_fingerprint: verdict.request_fingerprint ?? card.request_fingerprint,
            requested_by: card.requested_by ?? null,
            requested_via: requestedVia,
          },
        },
      ]);
      settle(verdict, card);
      return verdict;
    })();
    const open: OpenCard = { card, answer, withdraw };
    allOpen.add(open);
    void answer.finally(() => allOpen.delete(open)).catch(() => undefined);
    return open;
  }

  /**
   * Waits for the card's answer at most `wait_ms`; a cancelled call withdraws a per-call card.
   * `null` when the wait ran out (the card stays open).
   */
  async function waitFor(
    open: OpenCard,
    signal: AbortSignal | undefined,
    withdrawOnCancel: boolean,
  ): Promise<ApproverVerdict | null> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const timeout = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), waitMs);
      timer.unref?.();
    });
    const cancelled = new Promise<null>((resolve) => {
      if (!signal) return;
      onAbort = () => {
        if (withdrawOnCancel) open.withdraw.abort(WITHDRAWN);
        resolve(null);
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const first = await Promise.race([open.answer, timeout, cancelled]);
      // A withdrawn card has its answer recorded before the call goes on.
      if (first === null && withdrawOnCancel && open.withdraw.signal.aborted)
        return await open.answer;
      return first;
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
  }

  /** After a person approved, a lock that closed meanwhile still wins. */
  async function afterApproval(): Promise<GateDecision> {
    return (await observeLock()) ? LOCKED : APPROVED;
  }

  async function perCall(
    ctx: ApprovalContext,
    reason: PromptReason,
    view: OperationView | null,
    retry: { prior: PriorAttempt; recovery: PlannedRecovery } | null,
  ): Promise<GateDecision> {
    let opening = openCalls.get(ctx.operation_id);
    const existing = opening ? await opening.catch(() => null) : null;
    if (existing && existing.card.request_fingerprint !== ctx.request_fingerprint) {
      // A different request under the same operation: the open card does not cover it.
      existing.withdraw.abort(WITHDRAWN);
      await existing.answer;
      if (openCalls.get(ctx.operation_id) === opening) openCalls.delete(ctx.operation_id);
      opening = undefined;
    }
    if (!opening || !existing) {
      let mine: Promise<OpenCard> | undefined = undefined;
      mine = ask(ctx, 'per_call', reason, view, retry, (verdict, card) => {
        if (openCalls.get(ctx.operation_id) === mine) openCalls.delete(ctx.operation_id);
        if (verdict.decision === 'denied' && verdict.by !== 'gateway:stopped')
          callDenied.add(ctx.operation_id);
        if (verdict.decision === 'approved')
          callGrants.set(ctx.operation_id, {
            approval_id: card.approval_id,
            request_fingerprint: card.request_fingerprint,
            expires_at: card.expires_at,
            fresh: true,
          });
      });
      opening = mine;
      openCalls.set(ctx.operation_id, mine);
    }
    const open = await opening;
    const verdict = await waitFor(open, ctx.signal, true);
    if (verdict === null) return { decision: 'pending', approval_id: open.card.approval_id };
    if (verdict.decision !== 'approved') return DENIED;
    const grant = callGrants.get(ctx.operation_id);
    if (grant) grant.fresh = false;
    return afterApproval();
  }

  async function session(ctx: ApprovalContext): Promise<GateDecision> {
    const key = sessionKey(ctx);
    if (sessionDenied.has(key)) return DENIED;
    if (sessionGranted.has(key)) return APPROVED;
    let opening = openSessions.get(key);
    if (!opening) {
      opening = loadView(ctx.operation_id).then((view) =>
        ask(ctx, 'session', 'session_policy', view, null, (verdict, card) => {
          openSessions.delete(key);
          if (verdict.decision === 'denied' && verdict.by !== 'gateway:stopped')
            sessionDenied.add(key);
          if (verdict.decision === 'approved') sessionGranted.set(key, card.approval_id);
        }),
      );
      openSessions.set(key, opening);
    }
    const open = await opening;
    // A session card is shared by every call of the action: one caller's cancel does not withdraw it.
    const verdict = await waitFor(open, ctx.signal, false);
    if (verdict === null) return { decision: 'pending', approval_id: open.card.approval_id };
    if (verdict.decision !== 'approved') return DENIED;
    return afterApproval();
  }

  const gate: ApprovalGate = {
    instance_id: instanceId,
    asks: true,

    async check(ctx) {
      if (await observeLock()) return LOCKED;
      const scope = policy.scopeFor(ctx.action, ctx.action_class);
      // Beyond an automatic approval the gate reads and records about the operation: it must be
      // on record first (the engine may hold its opening back to write it with the attempt).
      // A policy that asks for a person makes this call per_call, whatever the action's scope.
      const byPolicy = ctx.policy_approval ? true : false;
      if (byPolicy || scope !== 'auto' || policy.isSensitive(ctx.action_class))
        await ctx.recorded?.();
      if (policy.isSensitive(ctx.action_class)) {
        const view = await loadView(ctx.operation_id);
        const retry = retryAfterUnknown(ctx, view);
        if (retry) {
          if (callDenied.has(ctx.operation_id)) return DENIED;
          const fresh = callGrants.get(ctx.operation_id);
          callGrants.delete(ctx.operation_id);
          // Approved after the asking call returned pending, for this very request: use it once.
          if (
            fresh?.fresh &&
            fresh.request_fingerprint === ctx.request_fingerprint &&
            clock.now() <= fresh.expires_at
          )
            return afterApproval();
          return perCall(ctx, 'retry_after_unknown', view, retry);
        }
      }
      if (!byPolicy && scope === 'auto') return APPROVED;
      if (!byPolicy && scope === 'session') return session(ctx);
      if (callDenied.has(ctx.operation_id)) return DENIED;
      const grant = callGrants.get(ctx.operation_id);
      if (grant) {
        callGrants.delete(ctx.operation_id);
        const unused = grant.fresh || ctx.prior_dispatch_state === 'not_sent';
        if (
          unused &&
          grant.request_fingerprint === ctx.request_fingerprint &&
          clock.now() <= grant.expires_at
        ) {
          callGrants.set(ctx.operation_id, { ...grant, fresh: false });
          return afterApproval();
        }
      }
      if (byPolicy) {
        const view = await loadView(ctx.operation_id);
        return perCall(ctx, 'policy_required', view, retryAfterUnknown(ctx, view));
      }
      return perCall(ctx, 'per_call_policy', await loadView(ctx.operation_id), null);
    },

    locked() {
      return observeLock();
    },

    prompts(sessionId) {
      if (sessionId !== undefined) return promptCount.get(sessionId) ?? 0;
      let n = 0;
      for (const v of promptCount.values()) n += v;
      return n;
    },

    recordGateChange(change) {
      return serial(async () => {
        await writeGateChanged(change.locked, change.by, change.at ?? clock.now());
        lastLocked = change.locked;
      });
    },

    onGateChange(change) {
      queued.push(gate.recordGateChange(change));
    },

    async idle() {
      const all = queued.splice(0);
      await Promise.all(all);
    },

    async shutdown() {
      const open = [...allOpen];
      for (const o of open) o.withdraw.abort(SHUTDOWN);
      await Promise.allSettled(open.map((o) => o.answer));
    },

    open() {
      return allOpen.size;
    },
  };
  return gate;
}

/**
 * For a retry: what is known of the previous attempt and the planned recovery, when its outcome is
 * unknown (sent without a usable response, our own failure after dispatch, a response that left the
 * effect unknown, or started and never finished). Null for first attempts and known outcomes.
 */
function retryAfterUnknown(
  ctx: ApprovalContext,
  view: OperationView | null,
): { prior: PriorAttempt; recovery: PlannedRecovery } | null {
  const last = view?.attempts.at(-1) ?? null;
  const finish = last?.finish ?? null;
  const dispatch =
    ctx.prior_dispatch_state ??
    (last === null ? null : (finish?.dispatch_state ?? 'sent_no_response'));
  if (dispatch === null || dispatch === 'not_sent') return null;
  const remoteEffect = ctx.prior_attempt?.remote_effect ?? finish?.remote_effect ?? 'unknown';
  const unknown =
    dispatch === 'sent_no_response' || dispatch === 'execution_error' || remoteEffect === 'unknown';
  if (!unknown) return null;
  const prior: PriorAttempt = {
    number: last?.number ?? null,
    dispatch_state: dispatch,
    category: ctx.prior_attempt?.category ?? finish?.category ?? null,
    remote_effect: remoteEffect,
  };
  const fingerprint = ctx.request_fingerprint || last?.request_fingerprint || '';
  const key = view?.idempotency_key ?? null;
  const reason =
    ctx.retry?.reason ??
    (finish?.rule.startsWith('http_5xx') ? 'destination_5xx' : 'response_lost_after_dispatch');
  const summary =
    key !== null
      ? `Resend the identical request (${fingerprint}) under idempotency key ${key}; a destination that honours the key returns the first result instead of acting again.`
      : `Resend the identical request (${fingerprint}) without an idempotency key; if the first attempt took effect, this repeats it.`;
  return {
    prior,
    recovery: {
      action: 'retry_same_request',
      retry_reason: reason,
      retry_decision: ctx.retry?.decision ?? null,
      request_fingerprint: fingerprint,
      idempotency_key: key,
      summary,
    },
  };
}
