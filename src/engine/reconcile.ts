// Reconciliation: instead of guessing, look at the destination. Which lookup depends on what the
// destination keeps: records (an HTTP action's declared lookup, a proxied MCP tool's mapped read
// tool) go through the one algorithm of reconcile-records.ts; an SSH run's remote marker or
// convergence check through reconcile-ssh.ts. Before either, what holds for every kind:
// - an operation that never sent anything is not looked up (there is nothing to find, and its
//   state must stay "nothing was sent", never `unknown`);
// - an action without a lookup learns nothing (a person decides);
// - a lookup sends bytes carrying the credential, so it passes the gate's lock like an attempt.
import type { Envelope } from '../core/envelope.js';
import { retryOf } from '../core/rule-table.js';
import type { OperationView } from '../ledger/projection.js';
import { operationEnvelope } from './truth.js';
import { UsageError, type AnyAction, type EngineContext } from './context.js';
import { notLookedUp, reconcileRecords } from './reconcile-records.js';
import { personDecides, type Reconciled } from './reconcile-settle.js';
import { reconcileSshOperation } from './reconcile-ssh.js';

/** Whether any attempt of the operation may have reached the destination. */
export function maybeSent(view: OperationView): boolean {
  return view.attempts.some((a) => a.finish === null || a.finish.dispatch_state !== 'not_sent');
}

export async function reconcileOperation(
  ctx: EngineContext,
  operationId: string,
  signal?: AbortSignal,
): Promise<Envelope> {
  const view = await ctx.load(operationId);
  if (!view?.action)
    throw new UsageError('unknown_operation', `no operation ${operationId} in the ledger`);
  const action = ctx.actions.get(view.action);
  if (!action)
    throw new UsageError('unknown_action', `no action named ${view.action} is registered`);
  const r = await reconcileView(ctx, action, view, signal);
  const envelope = r.envelope;
  // What the lookup found adds to what was known; it never lowers a settled operation's answer.
  if (envelope.remote_effect === 'applied' || envelope.category === 'duplicate_effect')
    return envelope;
  const after = await ctx.load(operationId);
  if (after && after.remote_effect === 'applied') return operationEnvelope(ctx, action, after);
  if (after && r.lead !== undefined) {
    // One answer per state: what the lookup met, then the operation as operation_status states it.
    const op = operationEnvelope(ctx, action, after);
    return { ...op, message: `${r.lead} ${op.message}`, data: envelope.data };
  }
  return envelope;
}

export async function reconcileView(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  signal?: AbortSignal,
): Promise<Reconciled> {
  const { envelopeOf } = ctx;
  const dest = action.destination;
  if (!maybeSent(view)) {
    const last = view.attempts.at(-1)?.finish;
    const env = envelopeOf({
      action,
      view,
      outcome: {
        category: last?.category ?? 'local_failure',
        retry: retryOf('reconcile_not_sent'),
        remote_effect: 'none',
        retry_after_ms: null,
      },
      data: null,
      diagnosticsRef: last?.diagnostics_ref ?? null,
    });
    return {
      step: 'nothing_sent',
      envelope: {
        ...env,
        message: `Nothing was sent for this operation, so there is nothing to look up; ${action.subject} was not applied. Call the action again with the same operation_id to make its first attempt.`,
      },
    };
  }
  if (dest.kind !== 'ssh' && !dest.reconciliation) {
    return {
      step: 'no_lookup',
      lead: `${action.name} has no lookup, so nothing was looked up.`,
      envelope: personDecides(ctx, action, view),
    };
  }
  if (await lockedGate(ctx)) {
    return {
      step: 'gate_locked',
      envelope: notLookedUp(ctx, action, view, {
        category: 'gate_locked',
        why: 'the gate is locked',
      }),
    };
  }
  if (dest.kind === 'ssh') {
    return {
      step: 'ssh',
      envelope: await reconcileSshOperation(ctx, action, dest, { view, signal }),
    };
  }
  return reconcileRecords(ctx, action, { view, signal });
}

/** The gate's lock, asking nobody; a lock that cannot be read counts as locked. */
export async function lockedGate(ctx: EngineContext): Promise<boolean> {
  if (!ctx.gate.locked) return false;
  try {
    return await ctx.gate.locked();
  } catch {
    return true;
  }
}
