// An operation's two ends outside an attempt: opening it (the intent committed to the ledger before
// anything is dispatched) and describing it afterwards from its ledger view alone.
import { DEFAULT_ATTEMPT_BUDGET } from '../core/rules.js';
import { canonicalJson } from '../core/canonical.js';
import type { Envelope } from '../core/envelope.js';
import { idempotencyKeyFor, sha256Hex } from '../core/fingerprint.js';
import { EVENT_VERSION, type NewEvent, type StoredEvent } from '../ledger/events.js';
import { projectOperation, type OperationView } from '../ledger/projection.js';
import { httpDestination, type EngineAction } from './action.js';
import { UsageError, type EngineContext, type RunOptions } from './context.js';
import { subjectRefOf } from './gate-step.js';
import { prepare, requestLine, type PreparedAttempt } from './request.js';
import { operationEnvelope, type OperationEnvelopeOptions } from './truth.js';
import { recordedInput, secretsDigest } from './ssh-action.js';
import { callContext } from './trace.js';

/** An operation ready to be opened: its records (not yet written) and its first request. */
export interface Opening {
  /** The operation as its records project it (sequence numbers 0 until they are written). */
  view: OperationView;
  /** `operation_opened`, then `operation_superseded` when it supersedes another operation. */
  events: NewEvent[];
  /** The first attempt's request, prepared once; null when only the full preparation failed. */
  prepared: PreparedAttempt | null;
}

/**
 * The action's request function threw before the operation was opened: nothing was recorded or
 * sent. `cause` is the function's own error (a UsageError `invalid_input` for an input its
 * templates cannot place).
 */
export interface Unbuildable {
  readonly cause: unknown;
}

/** An opening, or the request its action could not build (an outcome `run()` answers, not a fault). */
export type OpeningResult =
  | { ok: true; value: Opening; failure?: never }
  | { ok: false; failure: Unbuildable; value?: never };

/** The run an operation opens for, and how it finds a session when the run names none. */
export interface OpeningOptions {
  run: RunOptions;
  /** Called only when `run` names no session (it may open one). */
  sessionId: () => Promise<string>;
}

/**
 * Builds an operation's opening without writing it: the caller writes `events` (alone, or in
 * front of the first attempt_started). Fails (`ok: false`) when the action's request function
 * cannot build a request from this input. `sessionId` is only called when the caller names no
 * session (it may open one).
 */
export async function prepareOpening<I>(
  ctx: EngineContext,
  action: EngineAction<I, unknown>,
  input: I,
  { run: opts, sessionId }: OpeningOptions,
): Promise<OpeningResult> {
  const { ledger, ids, clock, redactor, owner } = ctx;
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
  const idempotencyKey = httpDestination(dest)?.idempotency ? idempotencyKeyFor(operationId) : null;
  // The request is built once here and serves both the recorded request line and the first
  // attempt. Only when that fails is the request function asked alone, to tell an unbuildable
  // request (nothing recorded) from a preparation step that failed after it (recorded, then
  // answered as an attempt not made).
  let prepared: PreparedAttempt | null = null;
  let line: { method: string; target: string };
  try {
    prepared = prepare(ctx, action, input, {
      operation_id: operationId,
      correlation_id: correlationId,
      idempotency_key: idempotencyKey,
    });
    line = { method: prepared.method, target: prepared.target };
  } catch {
    try {
      const spec = action.request(input, {
        operation_id: operationId,
        correlation_id: correlationId,
        idempotency_key: null,
      });
      line = requestLine(dest, spec);
    } catch (error) {
      return { ok: false, failure: { cause: error } };
    }
  }
  // Declared secret inputs are replaced by position, then the redactor searches the rest; the
  // secrets themselves enter the intent only as a keyed digest (engine/ssh-action.ts).
  const params = recordedInput(redactor, action, input);
  const secrets = secretsDigest(ctx.options, action, input);
  const events: NewEvent[] = [
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
          ...(secrets !== null ? { secrets_digest: secrets } : {}),
        },
        destination: {
          method: line.method.toUpperCase(),
          // The path template only: the method is its own field.
          route_template: dest.route_template ?? line.target.split('?')[0]!,
          authority_ref: dest.authority_ref,
        },
        idempotency_key: idempotencyKey,
        supersedes_operation_id: opts.supersedes ?? null,
        attempt_budget: action.attempt_budget ?? DEFAULT_ATTEMPT_BUDGET,
        params,
        ...(prepared ? { request_fingerprint: prepared.fingerprint } : {}),
        ...(opts.caller ? { caller: callerRecord(opts.caller) } : {}),
        ...callContext(),
      },
    },
  ];
  if (opts.supersedes !== undefined) {
    events.push({
      kind: 'operation_superseded',
      at: clock.now(),
      session_id: sid,
      operation_id: opts.supersedes,
      correlation_id: null,
      data: { superseded_by: operationId, reason: 'intent changed' },
    });
  }
  // The operation's whole history is its opening: project it instead of reading it back.
  const view = projectOperation(events.map(unwritten));
  if (!view) throw new Error(`operation ${operationId} could not be projected from its opening`);
  return { ok: true, value: { view, events, prepared } };
}

/**
 * Opens an operation now: its intent is on record (durably) when this resolves. `Runtime.open`
 * answers with an id, not an envelope, so a request its action cannot build is thrown here, with
 * the request function's error as `cause` (nothing was recorded).
 */
export async function openOperation<I>(
  ctx: EngineContext,
  action: EngineAction<I, unknown>,
  input: I,
  { run: opts, sessionId }: OpeningOptions,
): Promise<OperationView> {
  const opening = await prepareOpening(ctx, action, input, { run: opts, sessionId });
  if (!opening.ok)
    throw new Error('the request could not be built from this input', {
      cause: opening.failure.cause,
    });
  await ctx.append(opening.value.events);
  return opening.value.view;
}

/** The caller as recorded: the contract's fields only, whatever else the object carries. */
function callerRecord(c: NonNullable<RunOptions['caller']>): NonNullable<RunOptions['caller']> {
  return {
    kind: c.kind,
    subject: c.subject,
    client_id: c.client_id,
    issuer: c.issuer,
    scopes: [...c.scopes],
  };
}

/** A record as projected before it is written (no sequence number or hash yet). */
function unwritten(e: NewEvent): StoredEvent {
  // Field by field: keys added to a spread copy are a slow path in V8 (core/merge.ts).
  return {
    kind: e.kind,
    at: e.at,
    session_id: e.session_id,
    operation_id: e.operation_id,
    correlation_id: e.correlation_id,
    data: e.data,
    seq: 0,
    v: EVENT_VERSION,
    prev_hash: '',
    hash: '',
  } as StoredEvent;
}

/** The envelope an operation stands at, from its ledger view alone (engine/truth.ts). */
export function envelopeFromView(
  ctx: EngineContext,
  action: Parameters<typeof operationEnvelope>[1],
  view: OperationView,
  held: OperationEnvelopeOptions['held'] = null,
): Envelope {
  return operationEnvelope(ctx, action, view, { held });
}
