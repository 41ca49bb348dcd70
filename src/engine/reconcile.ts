// Reconciliation: instead of guessing, look at the destination. An HTTP action's lookup finds the
// records the operation may have created; the observation is recorded, and only an absent record
// under a still-honoured idempotency key licenses another attempt. SSH actions: reconcile-ssh.ts.
import type { Envelope } from '../core/envelope.js';
import type { OperationState } from '../core/vocabulary.js';
import { DEFAULT_TIMEOUTS, sendHttp } from '../http/transport.js';
import type { RequestContext } from './action.js';
import { UsageError, type EngineContext, unknownOutcome } from './context.js';
import { licensedAttempt } from './drive.js';
import { reconcileSshOperation } from './reconcile-ssh.js';

export async function reconcileOperation(
  ctx: EngineContext,
  operationId: string,
  signal?: AbortSignal,
): Promise<Envelope> {
  const { options, clock, ids, redactor, actions, observe, load, paramsOf, resolve, envelopeOf } =
    ctx;
  const view = await load(operationId);
  if (!view?.action)
    throw new UsageError('unknown_operation', `no operation ${operationId} in the ledger`);
  const action = actions.get(view.action);
  if (!action)
    throw new UsageError('unknown_action', `no action named ${view.action} is registered`);
  if (action.destination.ssh) return reconcileSshOperation(ctx, action, view);
  const lookup = action.destination.reconciliation;
  if (!lookup) {
    return envelopeOf(action, view, unknownOutcome('escalate'), null, null);
  }
  const requestCtx: RequestContext = {
    operation_id: view.operation_id,
    correlation_id: view.correlation_id ?? view.operation_id,
    idempotency_key: view.idempotency_key,
  };
  const params = await paramsOf(operationId);
  const spec = lookup.lookup(requestCtx, params);
  const cred = await options.credentials.resolve(action.destination.authority_ref, {
    origin: action.destination.origin,
    path: spec.path,
  });
  const checked = `${spec.method.toUpperCase()} ${spec.path}`;
  const checkedAt = clock.now();
  let matches: Array<{ ref: string; record: unknown }> | null = null;
  if (cred.ok) {
    for (const s of cred.secrets) redactor.addSecret(s);
    const out = await sendHttp(
      {
        origin: action.destination.origin,
        method: spec.method.toUpperCase(),
        path: spec.path,
        headers: {
          accept: 'application/json',
          'x-correlation-id': `${requestCtx.correlation_id}.lookup`,
          ...(spec.headers ?? {}),
          ...cred.headers,
        },
        attemptId: ids.mint('obs'),
        timeouts: { ...DEFAULT_TIMEOUTS, ...action.timeouts },
        ...(signal ? { signal } : {}),
        reuseConnection: true,
        ...(options.lookup ? { lookup: options.lookup } : {}),
      },
      () => clock.now(),
    );
    if (
      out.phase === 'response_complete' &&
      out.status !== undefined &&
      out.status >= 200 &&
      out.status < 300
    ) {
      try {
        matches = lookup.matches(
          JSON.parse((out.body ?? Buffer.alloc(0)).toString('utf8')),
          params,
        );
      } catch {
        matches = null;
      }
    }
  }
  if (matches === null) {
    // The lookup itself failed: nothing learned, state unchanged.
    return envelopeOf(action, view, unknownOutcome('reconcile_first'), null, null);
  }
  const refs = matches.map((m) => m.ref);
  const keyValid =
    action.destination.idempotency?.honoured === true &&
    view.opened_at !== null &&
    checkedAt - view.opened_at < action.destination.idempotency.retention_ms;
  const stateAfter: OperationState =
    refs.length === 1 ? 'succeeded' : refs.length >= 2 ? 'duplicate_effect_confirmed' : 'unknown';
  const conclusion =
    refs.length === 1
      ? 'one matching record: the operation took effect'
      : refs.length >= 2
        ? 'several matching records: the effect happened more than once'
        : keyValid
          ? 'no matching record; the idempotency key is still honoured, so a retry under the same key is safe'
          : 'no matching record; without an honoured idempotency key a retry could duplicate a late effect, so a person decides';
  await observe(view, {
    source: 'lookup',
    checked,
    checked_at: checkedAt,
    matches: refs.length,
    remote_refs: refs,
    conclusion,
    state_after: stateAfter,
  });
  if (refs.length === 1) {
    await resolve(view, 'succeeded', 'succeeded', 'reconciliation', refs);
    return envelopeOf(
      action,
      view,
      { category: 'succeeded', retry: 'never', remote_effect: 'applied', retry_after_ms: null },
      matches[0]!.record,
      null,
    );
  }
  if (refs.length >= 2) {
    await resolve(view, 'duplicate_effect_confirmed', 'duplicate_effect', 'reconciliation', refs);
    return envelopeOf(
      action,
      view,
      {
        category: 'duplicate_effect',
        retry: 'escalate',
        remote_effect: 'applied',
        retry_after_ms: null,
      },
      { remote_refs: refs },
      null,
    );
  }
  if (keyValid) {
    const licence = {
      reason: 'response_lost_after_dispatch',
      decision: 'reconciled_absent_key_valid',
    } as const;
    return licensedAttempt(
      ctx,
      action,
      params,
      (await load(operationId))!,
      licence,
      'reconciliation',
    );
  }
  return envelopeOf(action, view, unknownOutcome('escalate'), null, null);
}
