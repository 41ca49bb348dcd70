// One attempt: the write-ahead attempt_started record, then the dispatch (HTTP or SSH), the
// classification of what came back, and the attempt_finished record with its diagnostics.
import { classify, type Classification } from '../core/classify.js';
import type { Evidence } from '../core/evidence.js';
import { sha256Hex } from '../core/fingerprint.js';
import type { OperationView } from '../ledger/projection.js';
import { DEFAULT_TIMEOUTS, sendHttp, type HttpOutcome } from '../http/transport.js';
import { sealPayloadBound } from '../ledger/seal.js';
import { contractOf, type ActionDefinition } from './action.js';
import { type EngineContext, type Licence, type RunOptions } from './context.js';
import { evidenceOf, prepare, withoutSecretHeaders } from './request.js';
import { checkResponse } from './response-check.js';
import { EXCERPT_WINDOW, redactedExcerpt } from '../vault/redact.js';
import { dispatchSsh, sshFingerprint } from './ssh-action.js';

export interface AttemptResult {
  classification: Classification;
  data: unknown;
  remoteRef: string | null;
  diagnosticsRef: string | null;
  /** Null when no attempt was made (its request could not even be built). */
  attemptId: string | null;
  /** The operation was resolved together with this attempt. */
  resolved: boolean;
}

export async function attempt<I, O>(
  ctx: EngineContext,
  action: ActionDefinition<I, O>,
  input: I,
  view: OperationView,
  retry: Licence | null,
  opts: RunOptions,
  /** When set, a success is resolved in the same append as attempt_finished (one commit, not two). */
  settledBy?: 'attempt' | 'recovery' | 'reconciliation',
): Promise<AttemptResult> {
  const { options, ids, clock, redactor, owner, append } = ctx;
  let prepared: ReturnType<typeof prepare<I, O>>;
  try {
    prepared = prepare(action, input, view);
  } catch {
    // The action's request function failed: nothing recorded as an attempt, nothing sent.
    return notMade;
  }
  const { spec, headers, body } = prepared;
  // SSH: the fingerprint also binds the check and the marker location (engine/ssh-action.ts).
  const fingerprint = sshFingerprint(options.ssh, action, input, prepared.fingerprint);
  const dest = action.destination;
  const prior = view.attempts.at(-1) ?? null;
  if (prior && prior.request_fingerprint !== fingerprint) {
    // Callers check continuations before the gate; a request function that changed its answer
    // since is caught here, before anything is recorded or sent.
    return { ...notMade, classification: { ...REQUEST_UNBUILDABLE, rule: 'request_changed' } };
  }
  const attemptId = ids.mint('att');
  const budget = (action.attempt_budget ?? 3) - view.attempts.length - 1;
  const sid = view.session_id;
  await append([
    {
      kind: 'attempt_started',
      at: clock.now(),
      session_id: sid,
      operation_id: view.operation_id,
      correlation_id: view.correlation_id,
      data: {
        attempt_id: attemptId,
        number: view.attempts.length + 1,
        worker: opts.worker ?? owner,
        retry_of_attempt_id: prior?.attempt_id ?? null,
        retry_reason: retry?.reason ?? null,
        retry_decision: retry?.decision ?? null,
        attempt_budget_remaining: Math.max(0, budget),
        request_fingerprint: fingerprint,
        prior_request_fingerprint: prior?.request_fingerprint ?? null,
        credential_ref: dest.authority_ref,
        destination: {
          method: spec.method.toUpperCase(),
          authority_ref: dest.authority_ref,
          route_template: dest.route_template ?? spec.path.split('?')[0]!,
        },
      },
    },
  ]);
  // The attempt is on record (durably): only now may bytes leave.
  const started = clock.now();
  const contract = contractOf(action);
  let evidence: Evidence = { phase: 'not_sent', local_error: 'other' };
  let outcome: HttpOutcome | null = null;
  let sshDiagnostics: Record<string, unknown> | null = null;
  let sshData: unknown = null;
  let data: unknown = null;
  let problem: string | null = null;
  let classification: Classification;
  let remoteRef: string | null = null;
  // From here on a throw (ours, a transport's or a user callback's) never escapes before
  // attempt_finished is written: the envelope then says what is known.
  let dispatchBegan = false;
  try {
    const cred = dest.ssh
      ? ({ ok: true, headers: {}, secrets: [] } as const)
      : await options.credentials.resolve(dest.authority_ref, {
          origin: dest.origin,
          path: spec.path,
        });
    if (!cred.ok) {
      evidence =
        cred.failure.code === 'locked'
          ? { phase: 'not_sent', blocked: 'gate_locked' }
          : {
              phase: 'not_sent',
              local_error: 'credential_unavailable',
              error_code: cred.failure.code,
            };
    } else if (dest.ssh) {
      dispatchBegan = true;
      const sent = await dispatchSsh({
        options: options.ssh,
        decl: dest.ssh,
        command: spec.path,
        family: action.class,
        operationId: view.operation_id,
        input,
        signal: opts.signal,
        now: () => clock.now(),
        redactor,
      });
      evidence = sent.evidence;
      sshData = sent.data;
      sshDiagnostics = { evidence, ...sent.diagnostics };
    } else {
      for (const s of cred.secrets) redactor.addSecret(s);
      const sendHeaders = { ...headers, ...cred.headers };
      dispatchBegan = true;
      outcome = await sendHttp(
        {
          origin: dest.origin,
          method: spec.method.toUpperCase(),
          path: spec.path,
          headers: sendHeaders,
          ...(body !== undefined ? { body } : {}),
          attemptId,
          timeouts: { ...DEFAULT_TIMEOUTS, ...action.timeouts },
          ...(opts.signal ? { signal: opts.signal } : {}),
          reuseConnection: action.class === 'read',
          ...(options.lookup ? { lookup: options.lookup } : {}),
        },
        () => clock.now(),
      );
      evidence = evidenceOf(outcome, clock.now());
      if (evidence.status === 409 && prior && dest.idempotency && view.idempotency_key) {
        // A retry under the same key met the first request still running (IETF draft: 409).
        evidence.idempotency_in_progress = true;
      }
    }
    data = sshData;
    if (
      outcome?.phase === 'response_complete' &&
      outcome.status !== undefined &&
      !outcome.misframed
    ) {
      const check = checkResponse(
        outcome.status,
        outcome.headers ?? {},
        outcome.body ?? Buffer.alloc(0),
        outcome.framing,
        action.response,
        dest.failure_body,
      );
      evidence.contract_check = check.check;
      data = check.data;
      problem = check.problem;
    }
    classification = (options.classify ?? classify)(evidence, contract);
  } catch (error) {
    // Our own code failed: after dispatch began the bytes may have left (execution_error).
    evidence = dispatchBegan
      ? {
          ...evidence,
          phase: evidence.phase === 'not_sent' ? 'request_sent' : evidence.phase,
          local_error: 'execution_error',
        }
      : { phase: 'not_sent', local_error: 'other' };
    delete evidence.contract_check;
    problem = `engine error: ${errorName(error)}`;
    classification = classify(evidence, contract);
    if (classification.category === 'succeeded')
      classification = classify(
        { phase: 'request_sent', local_error: 'execution_error' },
        contract,
      );
  }
  const ok = classification.category === 'succeeded';
  if (ok && action.remoteRef) {
    try {
      remoteRef = action.remoteRef(data as O) ?? null;
    } catch (error) {
      // The response was valid; only its reference could not be read.
      problem = `remoteRef failed: ${errorName(error)}`;
    }
  }
  const diagnosticsRef = outcome || problem || sshDiagnostics ? ids.mint('diag') : null;
  const diagnostics = sshDiagnostics
    ? redactor.redactValue({ ...sshDiagnostics, ...(problem ? { problem } : {}) })
    : diagnosticsRef
      ? redactor.redactValue({
          evidence,
          problem,
          status: outcome?.status ?? null,
          headers: outcome?.headers ? withoutSecretHeaders(outcome.headers) : null,
          framing: outcome?.framing ?? null,
          // Redacted before the cut (issue 12): a cut first leaves a secret's prefix behind.
          body_excerpt: outcome?.body
            ? redactedExcerpt(
                redactor,
                outcome.body.subarray(0, 2048 + EXCERPT_WINDOW).toString('utf8'),
                2048,
              )
            : null,
          error_code: outcome?.error_code ?? null,
        })
      : null;
  const finishedAt = clock.now();
  const sealTo = options.audit?.sealTo;
  const stored =
    diagnostics && sealTo
      ? (sealPayloadBound(
          sealTo,
          JSON.stringify(diagnostics),
          `attempt=${attemptId}`,
        ) as unknown as Record<string, unknown>)
      : diagnostics;
  const settles = settledBy !== undefined && classification.category === 'succeeded';
  await append([
    {
      kind: 'attempt_finished',
      at: finishedAt,
      session_id: sid,
      operation_id: view.operation_id,
      correlation_id: view.correlation_id,
      data: {
        attempt_id: attemptId,
        dispatch_state: classification.dispatch_state,
        category: classification.category,
        retry: classification.retry,
        remote_effect: classification.remote_effect,
        rule: classification.rule,
        phases: outcome
          ? {
              started_at: outcome.phases.started_at,
              ...(outcome.phases.request_sent_at !== undefined
                ? { request_sent_at: outcome.phases.request_sent_at }
                : {}),
              ...(outcome.phases.headers_at !== undefined
                ? { headers_at: outcome.phases.headers_at }
                : {}),
              finished_at: outcome.phases.finished_at,
            }
          : { started_at: started, finished_at: finishedAt },
        response:
          outcome?.status !== undefined
            ? {
                status: outcome.status,
                fingerprint: outcome.body ? `sha256:${sha256Hex(outcome.body)}` : null,
                remote_ref: remoteRef,
                replay: evidence.idempotent_replay === true,
              }
            : null,
        duration_ms: finishedAt - started,
        diagnostics_ref: diagnosticsRef,
        diagnostics: stored,
      },
    },
    ...(settles
      ? [
          {
            kind: 'operation_resolved' as const,
            at: finishedAt,
            session_id: sid,
            operation_id: view.operation_id,
            correlation_id: view.correlation_id,
            data: {
              state: 'succeeded' as const,
              category: classification.category,
              by: settledBy,
              remote_refs: remoteRef ? [remoteRef] : [],
            },
          },
        ]
      : []),
  ]);
  return {
    classification,
    data: ok ? data : null,
    remoteRef,
    diagnosticsRef,
    attemptId,
    resolved: settles,
  };
}

/** The request function failed before any attempt: nothing was sent; a person must look. */
const REQUEST_UNBUILDABLE: Classification = {
  category: 'local_failure',
  retry: 'escalate',
  remote_effect: 'none',
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

/** A short, message-free name for an error (messages may carry request data). */
function errorName(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'exception';
}
