// One attempt, in five steps: write-ahead (attempt_started is durable before a byte leaves),
// dispatch (through the destination's transport), check (the reply against the action's
// contract), classify (evidence to a claim) and record (attempt_finished with its diagnostics).
import { callContext, withTraceparent } from './trace.js';
import { DEFAULT_ATTEMPT_BUDGET } from '../core/rules.js';
import { classify, type Classification } from '../core/classify.js';
import { outcomeOf } from '../core/rule-table.js';
import type { EngineErrorCode } from '../core/error-code.js';
import type { Evidence } from '../core/evidence.js';
import { sha256Hex } from '../core/fingerprint.js';
import type { Diagnostics, Dispatched, Prepared, Transport } from '../core/transport.js';
import type { RecordedDiagnostics } from '../ledger/events.js';
import { LedgerError } from '../ledger/ledger-error.js';
import type { OperationView } from '../ledger/projection.js';
import { sealPayloadBound } from '../ledger/seal.js';
import { EXCERPT_WINDOW, redactedExcerpt } from '../core/redact.js';
import { contractOf, httpDestination, type EngineAction } from './action.js';
import { type EngineContext, type Licence, type RunOptions } from './context.js';
import type { PreparedAttempt } from './request.js';
import { CREDENTIAL_ERROR_CODE } from './ports.js';
import { sshSecretEnv } from './ssh-action.js';
import { checkResponse } from './response-check.js';
import { merged } from '../core/merge.js';
import { upstreamErrorData, upstreamErrorOf } from '../core/upstream-error.js';

export interface AttemptResult {
  classification: Classification;
  data: unknown;
  remoteRef: string | null;
  diagnosticsRef: string | null;
  /** Null when no attempt was made (the request changed since the last attempt, or the owner did). */
  attemptId: string | null;
  /** The operation was resolved together with this attempt. */
  resolved: boolean;
  /**
   * Set when the store refused the attempt because another gateway took the operation over
   * (fencing, src/ledger/lease.ts): nothing was recorded or sent. Says who owns it now.
   */
  ownerLost?: string;
  /**
   * Set when the attempt was made but the store refused to record its answer because another
   * gateway took the operation over meanwhile (fencing): the answer was recorded as an
   * observation instead, and `view` is the operation as it stands now.
   */
  fenced?: { why: string; view: OperationView };
}

export interface AttemptOptions {
  /** The operation as recorded before this attempt. */
  view: OperationView;
  /** The licence of this attempt when it is a retry (recorded on attempt_started). */
  retry: Licence | null;
  run: RunOptions;
  /** When set, a success is resolved in the same append as attempt_finished (one commit, not two). */
  settledBy?: 'attempt' | 'recovery' | 'reconciliation';
  /** This attempt's request, prepared once by the loop (drive.ts) for the gate and the send. */
  prepared: PreparedAttempt;
}

/** What `record` writes for one attempt: when it started, what it established, how it settles. */
interface RecordOptions {
  started: number;
  outcome: Outcome;
  remoteRef: string | null;
  settledBy: AttemptOptions['settledBy'];
}

/** What the dispatch, check and classify steps established; the record step writes it down. */
interface Outcome {
  evidence: Evidence;
  dispatched: Dispatched | null;
  data: unknown;
  problem: string | null;
  classification: Classification;
  /** What the agent may see of a failed answer (an upstream MCP tool's error text), or null. */
  failureData?: unknown;
}

export async function attempt<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  opts: AttemptOptions,
): Promise<AttemptResult> {
  const { view, prepared } = opts;
  const prior = view.attempts.at(-1) ?? null;
  if (prior && prior.request_fingerprint !== prepared.fingerprint) {
    // Callers check continuations before the gate; a request function that changed its answer
    // since is caught here, before anything is recorded or sent.
    return { ...notMade, classification: { ...REQUEST_UNBUILDABLE, rule: 'request_changed' } };
  }
  let attemptId: string;
  try {
    attemptId = await writeAhead(ctx, action, prepared, opts);
  } catch (error) {
    // Fenced: this runtime lost the operation to another gateway while it stalled.
    if (error instanceof LedgerError && error.code === 'OWNER_CONFLICT')
      return { ...notMade, ownerLost: error.message };
    throw error;
  }
  // The attempt is on record (durably): only now may bytes leave.
  const started = ctx.clock.now();
  const outcome = await dispatchAndClassify(ctx, action, view, {
    prepared,
    attemptId,
    run: opts.run,
  });
  let remoteRef: string | null = null;
  const ok = outcome.classification.category === 'succeeded';
  if (ok && action.remoteRef) {
    try {
      remoteRef = action.remoteRef(outcome.data as O) ?? null;
    } catch (error) {
      // The response was valid; only its reference could not be read.
      outcome.problem = `remoteRef failed: ${errorName(error)}`;
    }
  }
  let recorded: { diagnosticsRef: string | null; settles: boolean };
  try {
    recorded = await record(ctx, view, attemptId, {
      started,
      outcome,
      remoteRef,
      settledBy: opts.settledBy,
    });
  } catch (error) {
    if (!(error instanceof LedgerError && error.code === 'OWNER_CONFLICT')) throw error;
    // Fenced while the request was out: what this former owner learned is evidence, recorded as
    // an observation that can only add knowledge (core/fold.ts), never as the attempt's result.
    const fenced = await lateAnswer(ctx, view, attemptId, {
      classification: outcome.classification,
      remoteRef,
    });
    return {
      classification: outcome.classification,
      data: null,
      remoteRef,
      diagnosticsRef: null,
      attemptId,
      resolved: false,
      fenced: { why: error.message, view: fenced },
    };
  }
  const { diagnosticsRef, settles } = recorded;
  return {
    classification: outcome.classification,
    data: ok ? outcome.data : (outcome.failureData ?? refusalData(outcome.data)),
    remoteRef,
    diagnosticsRef,
    attemptId,
    resolved: settles,
  };
}

/** Step 1: attempt_started, durable before anything is sent. Returns the attempt id. */
async function writeAhead(
  ctx: EngineContext,
  action: EngineAction<never, unknown> | EngineAction<unknown, unknown>,
  prepared: PreparedAttempt,
  opts: AttemptOptions,
): Promise<string> {
  const { view } = opts;
  const prior = view.attempts.at(-1) ?? null;
  const dest = action.destination;
  const attemptId = ctx.ids.mint('att');
  const budget = (action.attempt_budget ?? DEFAULT_ATTEMPT_BUDGET) - view.attempts.length - 1;
  await ctx.append([
    {
      kind: 'attempt_started',
      at: ctx.clock.now(),
      session_id: view.session_id,
      operation_id: view.operation_id,
      correlation_id: view.correlation_id,
      data: {
        attempt_id: attemptId,
        number: view.attempts.length + 1,
        worker: opts.run.worker ?? ctx.owner,
        retry_of_attempt_id: prior?.attempt_id ?? null,
        retry_reason: opts.retry?.reason ?? null,
        retry_decision: opts.retry?.decision ?? null,
        attempt_budget_remaining: Math.max(0, budget),
        request_fingerprint: prepared.fingerprint,
        prior_request_fingerprint: prior?.request_fingerprint ?? null,
        credential_ref: dest.authority_ref,
        destination: {
          method: prepared.method,
          authority_ref: dest.authority_ref,
          route_template: dest.route_template ?? prepared.target.split('?')[0]!,
        },
        ...callContext(),
      },
    },
  ]);
  return attemptId;
}

/** The named arguments of `dispatchAndClassify`. */
interface DispatchAndClassifyOptions {
  prepared: PreparedAttempt;
  attemptId: string;
  run: RunOptions;
}

/**
 * Steps 2–4: credentials, dispatch through the transport, the contract check and classification.
 * From here on a throw (ours, a transport's or a user callback's) never escapes before
 * attempt_finished is written: the envelope then says what is known.
 */
async function dispatchAndClassify<I, O>(
  ctx: EngineContext,
  action: EngineAction<I, O>,
  view: OperationView,
  { prepared, attemptId, run }: DispatchAndClassifyOptions,
): Promise<Outcome> {
  const contract = contractOf(action);
  const out: Outcome = {
    evidence: { phase: 'not_sent', local_error: 'other' },
    dispatched: null,
    data: null,
    problem: null,
    // Replaced below on every path; a placeholder that is never recorded as it is.
    classification: REQUEST_UNBUILDABLE,
  };
  let dispatchBegan = false;
  try {
    const request = await withCredentials(ctx, action, prepared, attemptId);
    if ('blocked' in request) {
      out.evidence = request.blocked;
      // Why the credential was not released (e.g. a value too short to redact), for the agent.
      if (request.refusal) out.failureData = { refusal: request.refusal };
    } else {
      dispatchBegan = true;
      const d = await dispatch(ctx, request, run.signal);
      out.dispatched = d;
      out.evidence = d.evidence;
      out.data =
        request.kind === 'ssh'
          ? redactedOutput(ctx, d.data)
          : request.kind === 'mcp'
            ? ctx.redactor.redactValue(d.data)
            : d.data;
      const prior = view.attempts.at(-1) ?? null;
      const dest = action.destination;
      if (
        out.evidence.status === 409 &&
        prior &&
        httpDestination(dest)?.idempotency &&
        view.idempotency_key
      ) {
        // A retry under the same key met the first request still running (IETF draft: 409).
        out.evidence.idempotency_in_progress = true;
      }
      check(action, out);
    }
    out.classification = (ctx.options.classify ?? classify)(out.evidence, contract);
    if (out.dispatched && prepared.request.kind === 'mcp' && out.evidence.mcp_reply !== undefined) {
      const said = upstreamErrorOf(out.dispatched.data, out.dispatched.diagnostics['rpc_error']);
      if (said && out.classification.category !== 'succeeded')
        out.failureData = upstreamErrorData(said, ctx.redactor);
    }
  } catch (error) {
    // Our own code failed: after dispatch began the bytes may have left (execution_error).
    out.evidence = dispatchBegan
      ? {
          ...out.evidence,
          phase: out.evidence.phase === 'not_sent' ? 'request_sent' : out.evidence.phase,
          local_error: 'execution_error',
        }
      : { phase: 'not_sent', local_error: 'other' };
    delete out.evidence.contract_check;
    out.problem = `engine error: ${errorName(error)}`;
    out.classification = classify(out.evidence, contract);
    if (out.classification.category === 'succeeded')
      out.classification = classify(
        { phase: 'request_sent', local_error: 'execution_error' },
        contract,
      );
  }
  return out;
}

/**
 * The attempt's request with its id and, for HTTP, the credential headers resolved now (inside
 * the runtime, never seen by the agent). A credential that cannot be had blocks the attempt.
 */
async function withCredentials(
  ctx: EngineContext,
  action: EngineAction<never, unknown> | EngineAction<unknown, unknown>,
  prepared: PreparedAttempt,
  attemptId: string,
): Promise<
  Prepared | { blocked: Evidence<EngineErrorCode>; refusal?: { code: string; detail: string } }
> {
  const request = prepared.request;
  // MCP: the upstream's secrets are in its child environment or connection, never a request.
  if (request.kind === 'mcp') return merged(request, { id: attemptId });
  // SSH: the transport resolves the host key itself; vault values for the command's secret
  // environment are resolved here, inside the runtime, and go to the redactor first.
  if (request.kind === 'ssh') {
    const dest = action.destination;
    if (dest.kind !== 'ssh' || !dest.secret_refs) return merged(request, { id: attemptId });
    const secrets = await sshSecretEnv(
      ctx.options.resolveSshSecret,
      ctx.redactor,
      { ...dest, secret_env: () => request.secret_env ?? {} },
      undefined,
    );
    if (!secrets.ok) return { blocked: secrets.evidence };
    return { ...request, id: attemptId, ...(secrets.env ? { secret_env: secrets.env } : {}) };
  }
  const cred = await ctx.options.credentials.resolve(action.destination.authority_ref, {
    origin: request.origin,
    path: request.path,
  });
  if (!cred.ok) {
    return {
      blocked:
        cred.failure.code === 'locked'
          ? { phase: 'not_sent', blocked: 'gate_locked' }
          : {
              phase: 'not_sent',
              local_error: 'credential_unavailable',
              error_code: CREDENTIAL_ERROR_CODE[cred.failure.code],
            },
      ...(cred.failure.detail !== undefined && cred.failure.code !== 'locked'
        ? { refusal: { code: 'credential_unavailable', detail: cred.failure.detail } }
        : {}),
    };
  }
  for (const s of cred.secrets) ctx.redactor.addSecret(s);
  return merged(request, { id: attemptId, headers: merged(request.headers, cred.headers) });
}

/**
 * What a failed attempt shows the agent: only a transport's refusal (the SSH wrapper's code and
 * what it names, e.g. `{ refusal: { code: 'marker_unsafe' } }`), so the refusal reads as itself.
 */
function refusalData(data: unknown): unknown {
  if (typeof data !== 'object' || data === null || !('refusal' in data)) return null;
  return data.refusal === undefined ? null : { refusal: data.refusal };
}

/** The agent sees an SSH command's stdout: a secret the command printed is hidden from it too. */
function redactedOutput(ctx: EngineContext, data: unknown): unknown {
  if (typeof data !== 'object' || data === null || !('stdout' in data)) return data;
  const { stdout } = data;
  return typeof stdout === 'string' ? { ...data, stdout: ctx.redactor.redactString(stdout) } : data;
}

/** Hands a prepared request to the transport of its kind (lookups go through lookup.ts). */
export async function dispatch(
  ctx: Pick<EngineContext, 'transports'>,
  prepared: Prepared,
  signal: AbortSignal | undefined,
): Promise<Dispatched> {
  const transport = ctx.transports[prepared.kind] as Transport | undefined;
  if (!transport) throw new TransportMissing(prepared.kind);
  // The traceparent is added after the request fingerprint was taken: it is not part of the intent.
  return transport.dispatch(withTraceparent(prepared), { signal });
}

/** No transport of the destination's kind is registered in the runtime. */
export class TransportMissing extends Error {
  readonly code = 'transport_missing';
  constructor(kind: string) {
    super(`no ${kind} transport is registered`);
  }
}

/** Step 3: a complete, well-framed reply is read against the action's response contract. */
function check(
  action: EngineAction<never, unknown> | EngineAction<unknown, unknown>,
  out: Outcome,
): void {
  const reply = out.dispatched?.reply;
  if (
    out.evidence.phase !== 'response_complete' ||
    reply?.status === undefined ||
    out.evidence.response_misframed
  )
    return;
  const dest = action.destination;
  const c = checkResponse(
    reply.status,
    reply.headers ?? {},
    asBuffer(reply.body ?? new Uint8Array(0)),
    {
      framing: reply.framing,
      success: action.response,
      failure: httpDestination(dest)?.failure_body,
    },
  );
  out.evidence.contract_check = c.check;
  out.data = c.data;
  out.problem = c.problem;
}

/** Step 5: attempt_finished (and, when it settles the operation, operation_resolved). */
async function record(
  ctx: EngineContext,
  view: OperationView,
  attemptId: string,
  opts: RecordOptions,
): Promise<{ diagnosticsRef: string | null; settles: boolean }> {
  const { started, outcome } = opts;
  const { classification, evidence, dispatched } = outcome;
  const reply = dispatched?.reply;
  const diagnosticsRef = dispatched || outcome.problem ? ctx.ids.mint('diag') : null;
  const diagnostics = diagnosticsRef ? ctx.redactor.redactValue(diagnosticsOf(ctx, outcome)) : null;
  const finishedAt = ctx.clock.now();
  const sealTo = ctx.options.audit?.sealTo;
  const stored: RecordedDiagnostics | null =
    diagnostics && sealTo
      ? sealPayloadBound(sealTo, JSON.stringify(diagnostics), `attempt=${attemptId}`)
      : diagnostics;
  const settles = opts.settledBy !== undefined && classification.category === 'succeeded';
  await ctx.append([
    {
      kind: 'attempt_finished',
      at: finishedAt,
      session_id: view.session_id,
      operation_id: view.operation_id,
      correlation_id: view.correlation_id,
      data: {
        attempt_id: attemptId,
        dispatch_state: classification.dispatch_state,
        category: classification.category,
        retry: classification.retry,
        remote_effect: classification.remote_effect,
        rule: classification.rule,
        phases: dispatched?.phases ?? { started_at: started, finished_at: finishedAt },
        response:
          reply?.status !== undefined
            ? {
                status: reply.status,
                fingerprint: reply.body ? `sha256:${sha256Hex(reply.body)}` : null,
                remote_ref: opts.remoteRef,
                replay: evidence.idempotent_replay === true,
              }
            : null,
        duration_ms: finishedAt - started,
        diagnostics_ref: diagnosticsRef,
        diagnostics: stored,
        writer: ctx.owner,
      },
    },
    ...(settles
      ? [
          {
            kind: 'operation_resolved' as const,
            at: finishedAt,
            session_id: view.session_id,
            operation_id: view.operation_id,
            correlation_id: view.correlation_id,
            data: {
              state: 'succeeded' as const,
              category: classification.category,
              by: opts.settledBy!,
              remote_refs: opts.remoteRef ? [opts.remoteRef] : [],
              writer: ctx.owner,
            },
          },
        ]
      : []),
  ]);
  return { diagnosticsRef, settles };
}

/**
 * The protected diagnostics of an attempt (before redaction): the final evidence, what failed and
 * the transport's own fields. A reply's body excerpt is redacted before it is cut (issue 12: a
 * cut first leaves a secret's prefix behind).
 */
function diagnosticsOf(ctx: EngineContext, outcome: Outcome): Diagnostics {
  const { evidence, problem, dispatched } = outcome;
  const reply = dispatched?.reply;
  if (!dispatched) {
    // Nothing was dispatched (our own code failed first): the shape HTTP attempts always had.
    return {
      evidence,
      problem,
      status: null,
      headers: null,
      framing: null,
      body_excerpt: null,
      error_code: null,
    };
  }
  if (!reply) return { evidence, ...dispatched.diagnostics, ...(problem ? { problem } : {}) };
  return {
    evidence,
    problem,
    ...dispatched.diagnostics,
    body_excerpt: reply.body
      ? redactedExcerpt(
          ctx.redactor,
          asBuffer(reply.body)
            .subarray(0, 2048 + EXCERPT_WINDOW)
            .toString('utf8'),
          2048,
        )
      : null,
  };
}

/** The request function failed before any attempt: nothing was sent; a person must look. */
const unbuilt = outcomeOf('request_unbuildable');
const REQUEST_UNBUILDABLE: Classification = {
  category: unbuilt.category,
  retry: unbuilt.retry,
  remote_effect: unbuilt.remote_effect,
  retry_after_ms: null,
  dispatch_state: 'not_sent',
  rule: 'request_unbuildable',
};

const notMade: AttemptResult = {
  classification: REQUEST_UNBUILDABLE,
  data: null,
  remoteRef: null,
  diagnosticsRef: null,
  attemptId: null,
  resolved: false,
};

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
}

/** A short, message-free name for an error (messages may carry request data). */
function errorName(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'exception';
}

/** The named arguments of `lateAnswer`. */
interface LateAnswerOptions {
  classification: Classification;
  remoteRef: string | null;
}

/**
 * A fenced former owner's late answer, as an observation: `applied` adds that knowledge; anything
 * else proves nothing about the operation (the new owner's attempts may have applied it) and is
 * recorded for the investigator only. Returns the operation as it stands afterwards.
 */
async function lateAnswer(
  ctx: EngineContext,
  view: OperationView,
  attemptId: string,
  { classification: c, remoteRef }: LateAnswerOptions,
): Promise<OperationView> {
  const applied = c.remote_effect === 'applied';
  await ctx.observe(view, {
    source: 'late_answer',
    checked: `attempt ${attemptId}`,
    checked_at: ctx.clock.now(),
    matches: applied ? 1 : 0,
    remote_refs: remoteRef ? [remoteRef] : [],
    conclusion: applied
      ? `a late answer to attempt ${attemptId} of a former owner (${ctx.owner}) shows the effect applied (${c.category})`
      : `a late answer to attempt ${attemptId} of a former owner (${ctx.owner}): ${c.category}; it speaks for that attempt only`,
    state_after: applied ? 'succeeded' : 'unknown',
  });
  return (await ctx.load(view.operation_id)) ?? view;
}
