// The operation runner: write-ahead attempts, honest classification, retry decisions,
// reconciliation and recovery. Every attempt_started is durable before a byte leaves; every outcome
// is classified from evidence; unknown writes are never repeated without a licence.
import type { LookupFunction } from 'node:net';
import { hostname } from 'node:os';
import { canonicalJson } from '../core/canonical.js';
import { classify, type Classification } from '../core/classify.js';
import type { Envelope } from '../core/envelope.js';
import { parseRetryAfter, type Evidence } from '../core/evidence.js';
import {
  idempotencyKeyFor,
  requestFingerprint,
  sha256Hex,
  SECRET_HEADERS,
} from '../core/fingerprint.js';
import { createIdFactory, type IdFactory } from '../core/ids.js';
import { messageFor } from '../core/messages.js';
import { systemClock, type Clock } from '../core/time.js';
import type { OperationState, RetryDecision, RetryReason } from '../core/vocabulary.js';
import type { NewEvent, StoredEvent } from '../ledger/events.js';
import { projectOperation, type OperationView } from '../ledger/projection.js';
import type { LedgerStore } from '../ledger/store.js';
import { DEFAULT_TIMEOUTS, sendHttp, type HttpOutcome } from '../http/transport.js';
import { contractOf, type ActionDefinition, type RequestContext } from './action.js';
import {
  openGate,
  simpleRedactor,
  type CredentialProvider,
  type Gate,
  type Redactor,
} from './ports.js';
import type { Checkpointer } from '../ledger/chain/checkpointer.js';
import { sealPayloadBound } from '../ledger/seal.js';
import { checkResponse } from './response-check.js';
import { dispatchSsh, lookupSshMarker, type SshRuntimeOptions } from './ssh-action.js';

const SENSITIVE: ReadonlySet<string> = new Set([
  'financial',
  'destructive',
  'permission_change',
  'credential_change',
  'execute',
]);

export class UsageError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface RuntimeOptions {
  ledger: LedgerStore;
  credentials: CredentialProvider;
  clock?: Clock;
  ids?: IdFactory;
  /** The one process allowed to start attempts for operations it opens. */
  owner?: string;
  actions?: ReadonlyArray<ActionDefinition<never, never> | ActionDefinition>;
  gate?: Gate;
  redactor?: Redactor;
  /** Waits between automatic retries (injected so tests never sleep for real). */
  sleep?: (ms: number) => Promise<void>;
  /** Backoff before retrying a connection that was never established. */
  backoff_ms?: (attemptNumber: number) => number;
  agent?: string;
  /** Host name resolution for every request (tests resolve `.invalid` locally). */
  lookup?: LookupFunction;
  /**
   * Audit: seal protected diagnostics to the auditor's public key (the gateway cannot read them
   * back), and issue signed checkpoints every N records, at session end and before a sensitive
   * action is dispatched.
   */
  audit?: { sealTo?: Uint8Array; checkpoints?: Checkpointer };
  /** SSH host inventory and key resolution, for SSH actions. */
  ssh?: SshRuntimeOptions;
  /** The classifier (tests swap in a wrong one to prove the matrix has teeth). */
  classify?: typeof classify;
}

export interface RunOptions {
  sessionId?: string;
  correlationId?: string;
  signal?: AbortSignal;
  /** Continue an existing operation (a retry the caller was licensed to make). */
  operationId?: string;
  /** A delegated worker making exactly one attempt for the owner. */
  worker?: string;
  supersedes?: string;
}

export interface RecoveryItem {
  operation_id: string;
  outcome: 'reconciled' | 'retried' | 'needs_person' | 'skipped';
  envelope: Envelope;
}

type AnyAction = ActionDefinition<never, never> | ActionDefinition;

export interface Runtime {
  readonly owner: string;
  sessionId(): Promise<string>;
  register(action: AnyAction): void;
  run<I, O>(action: ActionDefinition<I, O>, input: I, options?: RunOptions): Promise<Envelope>;
  /**
   * Opens an operation without dispatching it (the owner commits to an intent), e.g. to delegate
   * its attempts to a worker: `run(action, input, { operationId, worker })`.
   */
  open<I>(action: ActionDefinition<I, unknown>, input: I, options?: RunOptions): Promise<string>;
  reconcile(operationId: string, options?: { signal?: AbortSignal }): Promise<Envelope>;
  recover(): Promise<RecoveryItem[]>;
  supersede<I>(operationId: string, newInput: I, options?: RunOptions): Promise<Envelope>;
  status(operationId: string): Promise<{ view: OperationView; envelope: Envelope } | null>;
  endSession(reason?: string): Promise<void>;
}

export function createRuntime(options: RuntimeOptions): Runtime {
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? createIdFactory(clock);
  const ledger = options.ledger;
  const gate = options.gate ?? openGate;
  const redactor = options.redactor ?? simpleRedactor();
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const backoff = options.backoff_ms ?? ((n: number) => Math.min(2_000, 100 * 2 ** (n - 1)));
  const owner = options.owner ?? `${hostname()}:${process.pid}:${ids.mint('ses').slice(4, 14)}`;
  const actions = new Map<string, AnyAction>();
  for (const a of options.actions ?? []) actions.set(a.name, a);
  let session: Promise<string> | null = null;

  const append = (events: NewEvent[]): Promise<StoredEvent[]> => ledger.append(events);

  function sessionId(): Promise<string> {
    session ??= (async () => {
      const id = ids.mint('ses');
      await append([
        {
          kind: 'session_started',
          at: clock.now(),
          session_id: id,
          operation_id: null,
          correlation_id: null,
          data: { owner, instance_id: id, pid: process.pid, agent: options.agent ?? null },
        },
      ]);
      return id;
    })();
    return session;
  }

  async function load(operationId: string): Promise<OperationView | null> {
    return projectOperation(await ledger.query({ operation_id: operationId }));
  }

  function envelopeOf(
    action: { name: string; subject: string },
    view: Pick<OperationView, 'operation_id' | 'correlation_id'>,
    c: Pick<Classification, 'category' | 'retry' | 'remote_effect' | 'retry_after_ms'>,
    data: unknown,
    diagnosticsRef: string | null,
    variant?: 'retry_declined',
  ): Envelope {
    const env: Envelope = {
      ok: c.category === 'succeeded',
      category: c.category,
      operation: action.name,
      operation_id: view.operation_id,
      retry: c.retry,
      remote_effect: c.remote_effect,
      correlation_id: view.correlation_id,
      message: messageFor(c.category, {
        subject: action.subject,
        retry_after_ms: c.retry_after_ms,
        ...(variant === 'retry_declined' && c.remote_effect !== 'none'
          ? { retry_declined: { remote_effect: c.remote_effect } }
          : {}),
      }),
      data: data === undefined ? null : redactor.redactValue(data),
      diagnostics_ref: diagnosticsRef,
    };
    if (c.retry === 'after_delay' && c.retry_after_ms !== null)
      env.retry_after_ms = c.retry_after_ms;
    return env;
  }

  async function resolve(
    view: Pick<OperationView, 'operation_id' | 'correlation_id' | 'session_id'>,
    state: OperationState,
    category: Classification['category'],
    by: 'attempt' | 'reconciliation' | 'operator' | 'recovery',
    remoteRefs: string[],
  ): Promise<void> {
    await append([
      {
        kind: 'operation_resolved',
        at: clock.now(),
        session_id: view.session_id,
        operation_id: view.operation_id,
        correlation_id: view.correlation_id,
        data: { state, category, by, remote_refs: remoteRefs },
      },
    ]);
  }

  async function openOperation<I>(
    action: ActionDefinition<I, unknown>,
    input: I,
    opts: RunOptions,
  ): Promise<OperationView> {
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
    const spec = action.request(input, {
      operation_id: operationId,
      correlation_id: correlationId,
      idempotency_key: null,
    });
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
            subject_ref: action.subjectRef?.(input) ?? null,
            params_digest: `sha256:${sha256Hex(canonicalJson(params))}`,
          },
          destination: {
            method: spec.method.toUpperCase(),
            // The path template only: the method is its own field.
            route_template: dest.route_template ?? spec.path.split('?')[0]!,
            authority_ref: dest.authority_ref,
          },
          idempotency_key: dest.idempotency ? idempotencyKeyFor(operationId) : null,
          supersedes_operation_id: opts.supersedes ?? null,
          attempt_budget: action.attempt_budget ?? 3,
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

  interface AttemptResult {
    classification: Classification;
    data: unknown;
    remoteRef: string | null;
    diagnosticsRef: string | null;
    attemptId: string;
  }

  /** The request of the next attempt and its fingerprint (secrets and volatile headers excluded). */
  function prepare<I, O>(action: ActionDefinition<I, O>, input: I, view: OperationView) {
    const ctx: RequestContext = {
      operation_id: view.operation_id,
      correlation_id: view.correlation_id ?? view.operation_id,
      idempotency_key: view.idempotency_key,
    };
    const spec = action.request(input, ctx);
    const dest = action.destination;
    const headers: Record<string, string> = {
      accept: 'application/json',
      'x-correlation-id': ctx.correlation_id,
      'x-candor-call-id': ctx.correlation_id,
      ...(spec.headers ?? {}),
    };
    let body: string | undefined;
    if (spec.body !== undefined) {
      body = JSON.stringify(spec.body);
      headers['content-type'] ??= 'application/json';
    }
    if (dest.idempotency && view.idempotency_key)
      headers[dest.idempotency.header.toLowerCase()] = view.idempotency_key;
    const fingerprint = requestFingerprint({
      method: spec.method,
      authority_ref: dest.authority_ref,
      target: spec.path,
      headers,
      body: spec.body,
    });
    return { spec, headers, body, fingerprint };
  }

  async function attempt<I, O>(
    action: ActionDefinition<I, O>,
    input: I,
    view: OperationView,
    retry: { reason: RetryReason; decision: RetryDecision } | null,
    opts: RunOptions,
  ): Promise<AttemptResult> {
    const { spec, headers, body, fingerprint } = prepare(action, input, view);
    const dest = action.destination;
    const prior = view.attempts.at(-1) ?? null;
    if (prior && prior.request_fingerprint !== fingerprint) {
      throw new UsageError(
        'fingerprint_changed',
        `the request for operation ${view.operation_id} changed; a changed request is a new operation (use supersede), not a retry`,
      );
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
    let evidence: Evidence;
    let outcome: HttpOutcome | null = null;
    let sshDiagnostics: Record<string, unknown> | null = null;
    let sshData: unknown = null;
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
      const sent = await dispatchSsh(
        options.ssh,
        dest.ssh,
        spec.path,
        action.class,
        view.operation_id,
        input,
        opts.signal,
        () => clock.now(),
      );
      evidence = sent.evidence;
      sshData = sent.data;
      sshDiagnostics = { evidence, ...sent.diagnostics };
    } else {
      for (const s of cred.secrets) redactor.addSecret(s);
      const sendHeaders = { ...headers, ...cred.headers };
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
    let data: unknown = sshData;
    let problem: string | null = null;
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
    const classification = (options.classify ?? classify)(evidence, contract);
    const ok = classification.category === 'succeeded';
    const remoteRef = ok && action.remoteRef ? action.remoteRef(data as O) : null;
    const diagnosticsRef = outcome || problem || sshDiagnostics ? ids.mint('diag') : null;
    const diagnostics = sshDiagnostics
      ? redactor.redactValue(sshDiagnostics)
      : diagnosticsRef
        ? redactor.redactValue({
            evidence,
            problem,
            status: outcome?.status ?? null,
            headers: outcome?.headers ? withoutSecretHeaders(outcome.headers) : null,
            framing: outcome?.framing ?? null,
            body_excerpt: outcome?.body ? outcome.body.subarray(0, 2048).toString('utf8') : null,
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
    ]);
    return { classification, data: ok ? data : null, remoteRef, diagnosticsRef, attemptId };
  }

  /** Which automatic retry, if any, the evidence licenses (closed reasons and decisions). */
  /**
   * `automatic`: the engine retrying on its own within one run. Rate limits are never waited out
   * automatically — the agent gets `after_delay` and decides — but a caller continuing the same
   * operation after the delay is licensed.
   */
  function licence(
    action: AnyAction,
    c: Classification,
    automatic: boolean,
  ): { reason: RetryReason; decision: RetryDecision } | null {
    if (
      c.retry === 'after_delay' &&
      c.category === 'outcome_unknown' &&
      action.destination.idempotency?.honoured
    ) {
      return {
        reason: 'response_lost_after_dispatch',
        decision: 'destination_idempotency_confirmed',
      };
    }
    if (c.retry === 'after_delay' && c.remote_effect === 'none' && !automatic) {
      return { reason: 'rate_limited', decision: 'destination_refused_not_applied' };
    }
    if (c.retry !== 'allowed') return null;
    if (c.dispatch_state === 'not_sent')
      return { reason: 'connection_not_established', decision: 'not_sent' };
    if (c.category !== 'outcome_unknown') return null;
    const reason: RetryReason = c.rule.startsWith('http_5xx')
      ? 'destination_5xx'
      : 'response_lost_after_dispatch';
    if (action.class === 'read') return { reason, decision: 'read_only' };
    if (action.destination.idempotency?.honoured)
      return { reason, decision: 'destination_idempotency_confirmed' };
    return null;
  }

  /**
   * Consults the gate before an attempt. Returns null when approved, else the refusal envelope —
   * which never claims "nothing happened" when an earlier attempt may have applied the effect.
   */
  async function gateRefusal<I, O>(
    action: ActionDefinition<I, O>,
    input: I,
    view: OperationView,
    retry: { reason: RetryReason; decision: RetryDecision } | null,
  ): Promise<Envelope | null> {
    const last = view.attempts.at(-1);
    const decision = await gate.check({
      session_id: view.session_id ?? '',
      operation_id: view.operation_id,
      action: action.name,
      action_class: action.class,
      request_fingerprint: prepare(action, input, view).fingerprint,
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
      intent: { ...(view.intent ?? {}) },
    });
    if (decision.decision === 'approved') return null;
    const category = decision.decision === 'denied' ? 'approval_denied' : 'gate_locked';
    const c = classify({ phase: 'not_sent', blocked: category }, contractOf(action));
    if (!last) {
      await resolve(view, 'cancelled', category, 'operator', []);
      return envelopeOf(action, view, c, null, null);
    }
    // A refused retry: this attempt was not made, but the earlier one may have taken effect.
    const effect = last.finish?.remote_effect ?? 'unknown';
    const retryNext =
      effect === 'none'
        ? c.retry
        : contractOf(action).reconciliation
          ? 'reconcile_first'
          : 'escalate';
    return envelopeOf(
      action,
      view,
      { ...c, remote_effect: effect, retry: retryNext },
      null,
      last.finish?.diagnostics_ref ?? null,
      effect === 'none' ? undefined : 'retry_declined',
    );
  }

  async function drive<I, O>(
    action: ActionDefinition<I, O>,
    input: I,
    view: OperationView,
    opts: RunOptions,
  ): Promise<Envelope> {
    let retry: { reason: RetryReason; decision: RetryDecision } | null = null;
    if (view.attempts.length > 0) {
      const last = view.attempts.at(-1)!;
      const lic = last.finish
        ? licence(action, { ...last.finish, retry_after_ms: null }, false)
        : null;
      // A delegated worker is held to the same licence: it never repeats an unknown write on its own.
      if (!lic) {
        const c = last.finish;
        return envelopeOf(
          action,
          view,
          c
            ? {
                category: c.category,
                retry: c.retry === 'allowed' ? 'reconcile_first' : c.retry,
                remote_effect: c.remote_effect,
                retry_after_ms: null,
              }
            : {
                category: 'outcome_unknown',
                retry: contractOf(action).reconciliation ? 'reconcile_first' : 'escalate',
                remote_effect: 'unknown',
                retry_after_ms: null,
              },
          null,
          c?.diagnostics_ref ?? null,
        );
      }
      retry = lic;
    }
    for (;;) {
      const refused = await gateRefusal(action, input, view, retry);
      if (refused) return refused;
      // Records before a sensitive action are checkpointed first, so they cannot vanish unnoticed.
      if (SENSITIVE.has(action.class)) await options.audit?.checkpoints?.checkpoint();
      const result = await attempt(action, input, view, retry, opts);
      const c = result.classification;
      if (c.category === 'succeeded') {
        await resolve(
          view,
          'succeeded',
          c.category,
          'attempt',
          result.remoteRef ? [result.remoteRef] : [],
        );
        return envelopeOf(action, view, c, result.data, result.diagnosticsRef);
      }
      const next = opts.worker ? null : licence(action, c, true);
      const budgetLeft = (action.attempt_budget ?? 3) - view.attempts.length - 1;
      if (next && budgetLeft > 0 && !opts.signal?.aborted) {
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
      if (
        c.remote_effect === 'none' &&
        c.category !== 'gate_locked' &&
        c.category !== 'approval_denied'
      ) {
        await resolve(view, 'failed', c.category, 'attempt', []);
      } else if (c.category === 'gate_locked' || c.category === 'approval_denied') {
        await resolve(view, 'cancelled', c.category, 'attempt', []);
      }
      const shown =
        next && budgetLeft <= 0 && c.remote_effect !== 'none'
          ? { ...c, retry: 'escalate' as const }
          : c;
      return envelopeOf(action, view, shown, null, result.diagnosticsRef);
    }
  }

  const runtime: Runtime = {
    owner,
    sessionId,
    register(action) {
      actions.set(action.name, action);
    },

    async run<I, O>(
      action: ActionDefinition<I, O>,
      input: I,
      opts: RunOptions = {},
    ): Promise<Envelope> {
      actions.set(action.name, action);
      const parsed = action.input.safeParse(input);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new UsageError(
          'invalid_input',
          `input for ${action.name}: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
        );
      }
      let view: OperationView | null;
      if (opts.operationId !== undefined) {
        view = await load(opts.operationId);
        if (!view)
          throw new UsageError(
            'unknown_operation',
            `no operation ${opts.operationId} in the ledger`,
          );
        if (view.owner !== owner && opts.worker === undefined) {
          throw new UsageError(
            'not_owner',
            `operation ${opts.operationId} is owned by ${view.owner}; only its owner decides a retry`,
          );
        }
      } else {
        view = await openOperation(action as ActionDefinition<I, unknown>, parsed.data, opts);
      }
      const envelope = await drive(action, parsed.data, view, opts);
      await options.audit?.checkpoints?.maybe();
      return envelope;
    },

    async open<I>(
      action: ActionDefinition<I, unknown>,
      input: I,
      opts: RunOptions = {},
    ): Promise<string> {
      actions.set(action.name, action);
      const parsed = action.input.safeParse(input);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new UsageError(
          'invalid_input',
          `input for ${action.name}: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
        );
      }
      return (await openOperation(action, parsed.data, opts)).operation_id;
    },

    async reconcile(operationId, opts = {}) {
      const envelope = await reconcileOperation(operationId, opts.signal);
      await options.audit?.checkpoints?.maybe();
      return envelope;
    },

    async recover() {
      const out: RecoveryItem[] = [];
      for (const id of await ledger.unresolved()) {
        const view = await load(id);
        if (!view) continue;
        const action = view.action ? actions.get(view.action) : undefined;
        if (!action) {
          out.push({
            operation_id: id,
            outcome: 'needs_person',
            envelope: {
              ok: false,
              category: 'outcome_unknown',
              operation: view.action ?? 'unknown',
              operation_id: id,
              retry: 'escalate',
              remote_effect: 'unknown',
              correlation_id: view.correlation_id,
              message: `No action named "${view.action ?? '?'}" is configured here, so the operation cannot be checked; a person must decide.`,
              data: null,
              diagnostics_ref: null,
            },
          });
          continue;
        }
        if (action.destination.reconciliation) {
          out.push({
            operation_id: id,
            outcome: 'reconciled',
            envelope: await reconcileOperation(id),
          });
          continue;
        }
        const last = view.attempts.at(-1);
        const neverSent = view.attempts.every((a) => a.finish?.dispatch_state === 'not_sent');
        if (action.destination.idempotency?.honoured || action.class === 'read' || neverSent) {
          const params = await paramsOf(id);
          const env = await driveRecovery(action, view, params, last === undefined || neverSent);
          out.push({ operation_id: id, outcome: 'retried', envelope: env });
          continue;
        }
        out.push({
          operation_id: id,
          outcome: 'needs_person',
          envelope: envelopeOf(
            action,
            view,
            {
              category: 'outcome_unknown',
              retry: 'escalate',
              remote_effect: 'unknown',
              retry_after_ms: null,
            },
            null,
            last?.finish?.diagnostics_ref ?? null,
          ),
        });
      }
      return out;
    },

    async supersede(operationId, newInput, opts = {}) {
      const view = await load(operationId);
      if (!view?.action)
        throw new UsageError('unknown_operation', `no operation ${operationId} in the ledger`);
      const action = actions.get(view.action);
      if (!action)
        throw new UsageError('unknown_action', `no action named ${view.action} is registered`);
      return runtime.run(action, newInput, {
        ...opts,
        supersedes: operationId,
      });
    },

    async status(operationId) {
      const view = await load(operationId);
      if (!view) return null;
      const action = {
        name: view.action ?? 'unknown',
        subject: actions.get(view.action ?? '')?.subject ?? 'the operation',
      };
      return { view, envelope: envelopeFromView(action, view) };
    },

    async endSession(reason = 'finished') {
      if (!session) return;
      const sid = await session;
      await append([
        {
          kind: 'session_ended',
          at: clock.now(),
          session_id: sid,
          operation_id: null,
          correlation_id: null,
          data: { reason },
        },
      ]);
      session = null;
      await options.audit?.checkpoints?.checkpoint();
    },
  };

  async function paramsOf(operationId: string): Promise<unknown> {
    const events = await ledger.query({ operation_id: operationId });
    const opened = events.find((e) => e.kind === 'operation_opened');
    return opened?.kind === 'operation_opened' ? opened.data.params : undefined;
  }

  /**
   * One attempt outside an agent's run (recovery, or a retry licensed by reconciliation): the gate
   * is consulted, the licence recorded on the attempt, and the operation resolved when settled.
   */
  async function licensedAttempt(
    action: AnyAction,
    params: unknown,
    view: OperationView,
    licence: { reason: RetryReason; decision: RetryDecision },
    by: 'recovery' | 'reconciliation',
  ): Promise<Envelope> {
    const a = action as unknown as ActionDefinition<unknown, unknown>;
    const refused = await gateRefusal(a, params, view, licence);
    if (refused) return refused;
    const result = await attempt(a, params, view, licence, {});
    const c = result.classification;
    const refs = result.remoteRef ? [result.remoteRef] : [];
    if (c.category === 'succeeded') await resolve(view, 'succeeded', c.category, by, refs);
    else if (c.remote_effect === 'none' && by === 'recovery')
      await resolve(view, 'failed', c.category, by, []);
    return envelopeOf(a, view, c, result.data, result.diagnosticsRef);
  }

  async function driveRecovery(
    action: AnyAction,
    view: OperationView,
    params: unknown,
    neverSent: boolean,
  ): Promise<Envelope> {
    const a = action as unknown as ActionDefinition<unknown, unknown>;
    const decision: RetryDecision = neverSent
      ? 'not_sent'
      : a.class === 'read'
        ? 'read_only'
        : 'destination_idempotency_confirmed';
    const licence = {
      reason: neverSent ? 'connection_not_established' : 'response_lost_after_dispatch',
      decision,
    } as const;
    return licensedAttempt(a, params, view, licence, 'recovery');
  }

  function envelopeFromView(
    action: { name: string; subject: string },
    view: OperationView,
  ): Envelope {
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
      return envelopeOf(
        action,
        view,
        { ...last, retry_after_ms: null },
        null,
        last.diagnostics_ref,
      );
    if (view.attempts.length > 0) {
      // Started, never finished: the bytes may have left.
      return envelopeOf(
        action,
        view,
        {
          category: 'outcome_unknown',
          retry: 'reconcile_first',
          remote_effect: 'unknown',
          retry_after_ms: null,
        },
        null,
        null,
      );
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

  async function reconcileOperation(operationId: string, signal?: AbortSignal): Promise<Envelope> {
    const view = await load(operationId);
    if (!view?.action)
      throw new UsageError('unknown_operation', `no operation ${operationId} in the ledger`);
    const action = actions.get(view.action);
    if (!action)
      throw new UsageError('unknown_action', `no action named ${view.action} is registered`);
    if (action.destination.ssh) return reconcileSshOperation(action, view);
    const lookup = action.destination.reconciliation;
    if (!lookup) {
      return envelopeOf(
        action,
        view,
        {
          category: 'outcome_unknown',
          retry: 'escalate',
          remote_effect: 'unknown',
          retry_after_ms: null,
        },
        null,
        null,
      );
    }
    const ctx: RequestContext = {
      operation_id: view.operation_id,
      correlation_id: view.correlation_id ?? view.operation_id,
      idempotency_key: view.idempotency_key,
    };
    const params = await paramsOf(operationId);
    const spec = lookup.lookup(ctx, params);
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
            'x-correlation-id': `${ctx.correlation_id}.lookup`,
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
      return envelopeOf(
        action,
        view,
        {
          category: 'outcome_unknown',
          retry: 'reconcile_first',
          remote_effect: 'unknown',
          retry_after_ms: null,
        },
        null,
        null,
      );
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
    await append([
      {
        kind: 'observation_recorded',
        at: checkedAt,
        session_id: view.session_id,
        operation_id: view.operation_id,
        correlation_id: view.correlation_id,
        data: {
          observation_id: ids.mint('obs'),
          source: 'lookup',
          checked,
          checked_at: checkedAt,
          matches: refs.length,
          remote_refs: refs,
          conclusion,
          state_after: stateAfter,
        },
      },
    ]);
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
      return licensedAttempt(action, params, (await load(operationId))!, licence, 'reconciliation');
    }
    return envelopeOf(
      action,
      view,
      {
        category: 'outcome_unknown',
        retry: 'escalate',
        remote_effect: 'unknown',
        retry_after_ms: null,
      },
      null,
      null,
    );
  }

  /** SSH: the remote marker is the evidence. Absent -> safe to run under the same operation id. */
  async function convergenceCheck(
    action: AnyAction,
    view: OperationView,
    decl: NonNullable<AnyAction['destination']['ssh']>,
    checkedAt: number,
  ): Promise<Envelope> {
    const unknown = {
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      retry_after_ms: null,
    } as const;
    if (!decl.check) return envelopeOf(action, view, { ...unknown, retry: 'escalate' }, null, null);
    const params = await paramsOf(view.operation_id);
    const checkCommand = decl.check(params);
    const sent = await dispatchSsh(
      options.ssh,
      { host_ref: decl.host_ref, deadline_ms: decl.deadline_ms },
      checkCommand,
      'read',
      view.operation_id,
      params,
      undefined,
      () => clock.now(),
    );
    const exit = sent.evidence.phase === 'response_complete' ? sent.evidence.exit_status : null;
    if (exit === null || exit === undefined) {
      return envelopeOf(action, view, { ...unknown, retry: 'reconcile_first' }, null, null);
    }
    const converged = exit === 0;
    await append([
      {
        kind: 'observation_recorded',
        at: checkedAt,
        session_id: view.session_id,
        operation_id: view.operation_id,
        correlation_id: view.correlation_id,
        data: {
          observation_id: ids.mint('obs'),
          source: 'post_write_check',
          checked: `ssh ${decl.host_ref} convergence check`,
          checked_at: checkedAt,
          matches: converged ? 1 : 0,
          remote_refs: [],
          conclusion: converged
            ? 'the desired state holds'
            : 'the desired state does not hold; the interrupted command may still have had partial effects, so a person decides',
          state_after: converged ? 'succeeded' : 'unknown',
        },
      },
    ]);
    if (converged) {
      await resolve(view, 'succeeded', 'succeeded', 'reconciliation', []);
      return envelopeOf(
        action,
        view,
        { category: 'succeeded', retry: 'never', remote_effect: 'applied', retry_after_ms: null },
        { exit_status: 0, stdout: '' },
        null,
      );
    }
    return envelopeOf(action, view, { ...unknown, retry: 'escalate' }, null, null);
  }

  async function reconcileSshOperation(action: AnyAction, view: OperationView): Promise<Envelope> {
    const decl = action.destination.ssh!;
    const checkedAt = clock.now();
    // set_state runs without a marker (it converges): an absent marker proves nothing there, so
    // the evidence is the convergence check, run as a read — never a second run of the command.
    if (action.class === 'set_state') return convergenceCheck(action, view, decl, checkedAt);
    const found = await lookupSshMarker(options.ssh, decl, view.operation_id);
    if (!found.ok) {
      return envelopeOf(
        action,
        view,
        {
          category: 'outcome_unknown',
          retry: 'reconcile_first',
          remote_effect: 'unknown',
          retry_after_ms: null,
        },
        null,
        null,
      );
    }
    const m = found.marker;
    const c = classify(found.evidence, contractOf(action));
    const stateAfter: OperationState =
      m.state === 'completed'
        ? c.category === 'succeeded'
          ? 'succeeded'
          : c.remote_effect === 'none'
            ? 'failed'
            : 'unknown'
        : 'unknown';
    const conclusion =
      m.state === 'completed'
        ? `the marker records completion with exit status ${m.exit_status}`
        : m.state === 'absent'
          ? 'no marker: the command never started; running it under the same operation id is safe (the marker prevents a second execution)'
          : m.state === 'started'
            ? `the marker records a start without completion; the process is ${m.process}`
            : 'the marker was claimed but the command did not start';
    await append([
      {
        kind: 'observation_recorded',
        at: checkedAt,
        session_id: view.session_id,
        operation_id: view.operation_id,
        correlation_id: view.correlation_id,
        data: {
          observation_id: ids.mint('obs'),
          source: 'marker',
          checked: `ssh ${decl.host_ref} marker ${view.operation_id}`,
          checked_at: checkedAt,
          matches: m.state === 'absent' ? 0 : 1,
          remote_refs: [],
          conclusion,
          state_after: stateAfter,
        },
      },
    ]);
    if (m.state === 'completed') {
      if (stateAfter !== 'unknown')
        await resolve(view, stateAfter, c.category, 'reconciliation', []);
      // The marker is the final word: a completed run that failed is for a person, not another lookup.
      return envelopeOf(
        action,
        view,
        c.category === 'succeeded' ? c : { ...c, retry: 'escalate' },
        c.category === 'succeeded' ? { exit_status: m.exit_status, stdout: found.stdout } : null,
        null,
      );
    }
    if (m.state === 'absent') {
      const params = await paramsOf(view.operation_id);
      const licence = {
        reason: 'response_lost_after_dispatch',
        decision: 'reconciled_absent_key_valid',
      } as const;
      return licensedAttempt(
        action,
        params,
        (await load(view.operation_id))!,
        licence,
        'reconciliation',
      );
    }
    const alive = m.state === 'started' && m.process === 'alive';
    return envelopeOf(
      action,
      view,
      {
        category: 'outcome_unknown',
        retry: alive ? 'reconcile_first' : 'escalate',
        remote_effect: 'unknown',
        retry_after_ms: null,
      },
      null,
      null,
    );
  }

  return runtime;
}

function evidenceOf(o: HttpOutcome, nowMs: number): Evidence {
  const e: Evidence = { phase: o.phase };
  if (o.local_error !== undefined) e.local_error = o.local_error;
  if (o.error_code !== undefined) e.error_code = o.error_code;
  if (o.misframed) e.response_misframed = true;
  if (o.status !== undefined) e.status = o.status;
  const h = o.headers ?? {};
  if (h['www-authenticate'] !== undefined) e.www_authenticate = true;
  const ra = parseRetryAfter(h['retry-after'], nowMs);
  if (ra !== undefined) e.retry_after_ms = ra;
  const replay =
    h['idempotent-replayed'] ?? h['idempotency-replayed'] ?? h['x-idempotent-replayed'];
  if (replay !== undefined && replay.toLowerCase() === 'true') e.idempotent_replay = true;
  return e;
}

function withoutSecretHeaders(h: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) out[k] = SECRET_HEADERS.has(k) ? '[REDACTED]' : v;
  return out;
}
