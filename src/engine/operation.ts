// An operation's two ends outside an attempt: opening it (the intent committed to the ledger before
// anything is dispatched) and describing it afterwards from its ledger view alone.
import { DEFAULT_ATTEMPT_BUDGET } from '../core/rules.js';
import { canonicalJson } from '../core/canonical.js';
import type { Envelope } from '../core/envelope.js';
import { idempotencyKeyFor, sha256Hex } from '../core/fingerprint.js';
import { projectOperation, type OperationView } from '../ledger/projection.js';
import { httpDestination, type EngineAction } from './action.js';
import {
  RequestUnbuildable,
  UsageError,
  type EngineContext,
  type RunOptions,
  unknownOutcome,
} from './context.js';
import { subjectRefOf } from './drive.js';
import { requestLine } from './request.js';

/** `sessionId` is only called when the caller names no session (it may open one). */
export async function openOperation<I>(
  ctx: EngineContext,
  sessionId: () => Promise<string>,
  action: EngineAction<I, unknown>,
  input: I,
  opts: RunOptions,
): Promise<OperationView> {
  const { ledger, ids, clock, redactor, owner, append } = ctx;
  const sid = opts.sessionId ?? (await sessionId());
  const operationId = ids.mint('op');
  const correlationId = opts.correlationId ?? ids.mint('cor');
  if (opts.correlationId !== undefined) {
    const used = await ledger.query({ correlation_id: correlationId });
    const other = used.find((e) => e.kind === 'operation_opened');
    if (other) {
      throw new UsageError(
        'correlation_id_reused',
        `correlation id "${correlationId}" already belongs to operation ${other.operation_id}; a correlation id is never shared by two operations`,
      );
    }
  }
  const dest = action.destination;
  let line: { method: string; target: string };
  try {
    const spec = action.request(input, {
      operation_id: operationId,
      correlation_id: correlationId,
      idempotency_key: null,
    });
    line = requestLine(dest, spec);
  } catch (error) {
    throw new RequestUnbuildable(error);
  }
  const params = redactor.redactValue(input);
  const opened = await append([
    {
      kind: 'operation_opened',
      at: clock.now(),
      session_id: sid,
      operation_id: operationId,
      correlation_id: correlationId,
      data: {
        owner,
        action: action.name,
        action_class: action.class,
        intent: {
          kind: action.name,
          subject_ref: subjectRefOf(action, input),
          params_digest: `sha256:${sha256Hex(canonicalJson(params))}`,
        },
        destination: {
          method: line.method.toUpperCase(),
          // The path template only: the method is its own field.
          route_template: dest.route_template ?? line.target.split('?')[0]!,
          authority_ref: dest.authority_ref,
        },
        idempotency_key: httpDestination(dest)?.idempotency ? idempotencyKeyFor(operationId) : null,
        supersedes_operation_id: opts.supersedes ?? null,
        attempt_budget: action.attempt_budget ?? DEFAULT_ATTEMPT_BUDGET,
        params,
      },
    },
  ]);
  if (opts.supersedes !== undefined) {
    await append([
      {
        kind: 'operation_superseded',
        at: clock.now(),
        session_id: sid,
        operation_id: opts.supersedes,
        correlation_id: null,
        data: { superseded_by: operationId, reason: 'intent changed' },
      },
    ]);
  }
  // The operation's whole history is the event just stored: project it instead of reading back.
  const view = projectOperation(opened);
  if (!view)
    throw new Error(`operation ${operationId} could not be projected right after it was opened`);
  return view;
}

export function envelopeFromView(
  ctx: EngineContext,
  action: { name: string; subject: string },
  view: OperationView,
): Envelope {
  const { envelopeOf } = ctx;
  const last = view.attempts.at(-1)?.finish;
  const state = view.state;
  if (state === 'succeeded') {
    return envelopeOf(
      action,
      view,
      { category: 'succeeded', retry: 'never', remote_effect: 'applied', retry_after_ms: null },
      null,
      last?.diagnostics_ref ?? null,
    );
  }
  if (state === 'duplicate_effect_confirmed') {
    return envelopeOf(
      action,
      view,
      {
        category: 'duplicate_effect',
        retry: 'escalate',
        remote_effect: 'applied',
        retry_after_ms: null,
      },
      null,
      null,
    );
  }
  if (last)
    return envelopeOf(action, view, { ...last, retry_after_ms: null }, null, last.diagnostics_ref);
  if (view.attempts.length > 0) {
    // Started, never finished: the bytes may have left.
    return envelopeOf(action, view, unknownOutcome('reconcile_first'), null, null);
  }
  const cat = view.resolution?.category ?? 'local_failure';
  return envelopeOf(
    action,
    view,
    { category: cat, retry: 'never', remote_effect: 'none', retry_after_ms: null },
    null,
    null,
  );
}
