// Reconciliation: instead of guessing, look at the destination. An HTTP action's lookup finds the
// records the operation may have created; only records bound to the operation (its id, key or
// correlation value, or all its declared identifying fields and not older than it:
// lookup-binding.ts) count as its effect — others leave it unknown (`lookup_ambiguous`). Every
// lookup is recorded as an observation, found or not, failed included; only an absent record
// under a still-honoured idempotency key licenses another attempt. SSH actions: reconcile-ssh.ts.
//
// A lookup sends bytes carrying the credential, so it passes the gate's lock like an attempt; an
// operation that never sent anything is not looked up (there is nothing to find, and its state
// must stay "nothing was sent", never `unknown`).
import type { Envelope } from '../core/envelope.js';
import { retryOf } from '../core/rule-table.js';
import type { OperationState } from '../core/vocabulary.js';
import type { OperationView } from '../ledger/projection.js';
import type { HttpRequestSpec, RequestContext } from './action.js';
import { LOOKUP_MAX_ANSWER_BYTES } from './action.js';
import { operationEnvelope } from './truth.js';
import { UsageError, type AnyAction, type EngineContext, unknownOutcome } from './context.js';
import { licensedAttempt } from './drive.js';
import { lookupHttp } from './lookup.js';
import { bindRecords, type LookupRecord } from './lookup-binding.js';
import { reconcileMcpOperation } from './reconcile-mcp.js';
import { settleFromLookup, type Reconciled } from './reconcile-settle.js';
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

/** The named arguments of `notLookedUp`. */
interface NotLookedUpOptions {
  category: 'gate_locked' | 'outcome_unknown';
  why: string;
}

/** The envelope for a lookup that was not sent: nothing learned, the operation as it was. */
function notLookedUp(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  { category, why }: NotLookedUpOptions,
): Envelope {
  const env = ctx.envelopeOf({
    action,
    view,
    outcome: unknownOutcome('unknown_person_decides'),
    data: null,
    diagnosticsRef: null,
  });
  return {
    ...env,
    category,
    message: `The lookup was not sent (${why}); whether ${action.subject} was applied is still unknown and a person must decide.`,
  };
}

export async function reconcileView(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  signal?: AbortSignal,
): Promise<Reconciled> {
  const { options, clock, ids, redactor, observe, load, paramsOf, envelopeOf } = ctx;
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
      envelope: envelopeOf({
        action,
        view,
        outcome: unknownOutcome('unknown_person_decides'),
        data: null,
        diagnosticsRef: null,
      }),
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
  if (dest.kind === 'mcp') return reconcileMcpOperation(ctx, action, dest, { view, signal });
  const lookup = dest.reconciliation!;
  const requestCtx: RequestContext = {
    operation_id: view.operation_id,
    correlation_id: view.correlation_id ?? view.operation_id,
    idempotency_key: view.idempotency_key,
  };
  const params = await paramsOf(view.operation_id);
  let spec: HttpRequestSpec;
  try {
    spec = lookup.lookup(requestCtx, params);
  } catch {
    return {
      step: 'lookup_failed',
      envelope: notLookedUp(ctx, action, view, {
        category: 'outcome_unknown',
        why: 'the lookup could not be built',
      }),
    };
  }
  const cred = await options.credentials.resolve(dest.authority_ref, {
    origin: dest.origin,
    path: spec.path,
  });
  if (!cred.ok) {
    const locked = cred.failure.code === 'locked';
    return {
      step: locked ? 'gate_locked' : 'credential_unavailable',
      envelope: notLookedUp(ctx, action, view, {
        category: locked ? 'gate_locked' : 'outcome_unknown',
        why: locked ? 'the vault is locked' : 'credential unavailable',
      }),
    };
  }
  const method = spec.method.toUpperCase();
  const checked = `${method} ${spec.path}`;
  const request = lookup.route ?? `${method} ${spec.path.split('?')[0]!}`;
  const checkedAt = clock.now();
  let matches: LookupRecord[] | null = null;
  for (const s of cred.secrets) redactor.addSecret(s);
  const maxAnswerBytes = lookup.maxAnswerBytes ?? LOOKUP_MAX_ANSWER_BYTES;
  const looked = await lookupHttp(
    ctx,
    {
      kind: 'http',
      id: ids.mint('obs'),
      origin: dest.origin,
      method,
      path: spec.path,
      headers: {
        accept: 'application/json',
        'x-correlation-id': `${requestCtx.correlation_id}.lookup`,
        ...(spec.headers ?? {}),
        ...cred.headers,
      },
      ...(action.timeouts ? { timeouts: action.timeouts } : {}),
      reuse_connection: true,
      // Bounded like every answer read from outside: a huge body costs the cap, not its length.
      max_body_bytes: maxAnswerBytes,
      // A get-by-id that says "no such record": a negative observation, like an empty list.
      absent_on_404: lookup.shape === 'one',
    },
    signal,
  );
  const tooLarge = looked.verdict === 'failed' && looked.over_limit === true;
  const status =
    looked.verdict === 'found'
      ? looked.found.status
      : looked.verdict === 'absent'
        ? (looked.evidence.status ?? null)
        : (looked.status ?? null);
  if (looked.verdict === 'absent') {
    matches = [];
  } else if (looked.verdict === 'found') {
    try {
      // A user callback: a throw means "no usable answer", never an escape.
      const text = Buffer.from(looked.found.body).toString('utf8');
      matches = lookup.matches(JSON.parse(text), params);
      if (!Array.isArray(matches)) matches = null;
    } catch {
      matches = null;
    }
  }
  const stateNow: OperationState = view.state ?? 'unknown';
  if (matches === null) {
    // The lookup itself failed: nothing learned, state unchanged — but it is evidence that a
    // lookup was tried (and what it met), so it is recorded too. Its verdict `failed` moves the
    // fold nowhere (core/fold.ts): an unknown operation stays unknown.
    const met = tooLarge
      ? `it answered ${status ?? '?'} with a body over the limit of ${maxAnswerBytes} bytes`
      : status === null
        ? `it got no answer (${looked.evidence.phase})`
        : `it answered ${status} with no usable list of records`;
    await observe(view, {
      source: 'lookup',
      checked,
      checked_at: checkedAt,
      matches: 0,
      remote_refs: [],
      conclusion: tooLarge
        ? `lookup_answer_too_large: the lookup answered ${status ?? '?'} with a body over the limit of ${maxAnswerBytes} bytes, cut off there: nothing learned`
        : status === null
          ? 'the lookup got no answer: nothing learned'
          : `the lookup answered ${status} with no usable list of records: nothing learned`,
      state_after: stateNow,
      verdict: 'failed',
      request,
      status,
    });
    const data = { lookup: { verdict: 'failed', request, status, met } };
    const lead = `The lookup failed (${met}), so it learned nothing about this operation.`;
    const env = envelopeOf({
      action,
      view,
      outcome: unknownOutcome('unknown_lookup_next'),
      data,
      diagnosticsRef: null,
    });
    return { step: 'lookup_failed', lead, envelope: { ...env, message: `${lead} ${env.message}` } };
  }
  const { bound, unbound } = bindRecords(lookup, matches, requestCtx, {
    input: params,
    openedAt: view.opened_at,
  });
  const refs = bound.map((m) => m.ref);
  const keyValid =
    dest.idempotency?.honoured === true &&
    view.opened_at !== null &&
    checkedAt - view.opened_at < dest.idempotency.retention_ms;
  const ambiguous = refs.length === 0 && unbound.length > 0;
  const stateAfter: OperationState =
    refs.length === 1 ? 'succeeded' : refs.length >= 2 ? 'duplicate_effect_confirmed' : 'unknown';
  const conclusion =
    refs.length === 1
      ? 'one record bound to this operation: the operation took effect'
      : refs.length >= 2
        ? 'several records bound to this operation: the effect happened more than once'
        : ambiguous
          ? `${unbound.length} record(s) matched the lookup but none is bound to this operation (none carries its id, key or correlation value${lookup.identify ? ', or its identifying fields differ or it is older than the operation' : ''}): it may be another's, so whether this operation took effect is still unknown`
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
    verdict: refs.length > 0 ? 'found' : ambiguous ? 'ambiguous' : 'absent',
    request,
    status,
    unbound: unbound.length,
  });
  if (ambiguous) {
    const env = envelopeOf({
      action,
      view,
      outcome: unknownOutcome('unknown_person_decides'),
      data: {
        escalation: {
          code: 'lookup_ambiguous',
          reason: 'records matched the lookup, but none is bound to this operation',
        },
        unbound_refs: unbound.map((m) => m.ref),
      },
      diagnosticsRef: null,
    });
    return {
      step: 'ambiguous',
      lead: `The lookup found ${unbound.length === 1 ? 'a record' : `${unbound.length} records`} like ${action.subject}, but none carries this operation's id, key or correlation value, so it may be another's (lookup_ambiguous).`,
      envelope: {
        ...env,
        message: `The lookup found ${unbound.length === 1 ? 'a record' : `${unbound.length} records`} like ${action.subject}, but none carries this operation's id, key or correlation value, so it may be another's (lookup_ambiguous); whether ${action.subject} was applied is still unknown and a person must decide.`,
      },
    };
  }
  const settled = await settleFromLookup(ctx, action, view, {
    refs,
    firstRecord: bound[0]?.record,
  });
  if (settled) return settled;
  if (keyValid) {
    const licence = {
      reason: 'response_lost_after_dispatch',
      decision: 'reconciled_absent_key_valid',
    } as const;
    return {
      step: 'absent_retried',
      envelope: await licensedAttempt(ctx, action, params, {
        view: (await load(view.operation_id))!,
        licence,
        by: 'reconciliation',
      }),
    };
  }
  return {
    step: 'absent',
    lead: `The lookup found no record of this operation, but without an idempotency key the destination still honours that does not rule out a late effect.`,
    envelope: envelopeOf({
      action,
      view,
      outcome: unknownOutcome('unknown_person_decides'),
      data: null,
      diagnosticsRef: null,
    }),
  };
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
