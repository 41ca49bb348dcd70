// The engine's shared state, built once per runtime: options with their defaults, the ledger and
// the few helpers every engine module needs (append, load, resolve, envelopeOf, paramsOf). The
// modules take it explicitly instead of closing over createRuntime's locals.
import { hostname } from 'node:os';
import type { classify, Classification } from '../core/classify.js';
import type { Envelope } from '../core/envelope.js';
import type { Caller } from '../core/caller.js';
import { canonicalJson } from '../core/canonical.js';
import { createIdFactory, type IdFactory } from '../core/ids.js';
import { merged } from '../core/merge.js';
import { messageFor } from '../core/messages.js';
import { systemClock, type Clock } from '../core/time.js';
import type { Transports } from '../core/transport.js';
import type { Category, OperationState, RetryDecision, RetryReason } from '../core/vocabulary.js';
import { outcomeOf, type RuleOutcome } from '../core/rule-table.js';
import type { EarlierAttempt } from '../core/operation-outcome.js';
import type { EventPayloads, NewEvent, StoredEvent } from '../ledger/events.js';
import { projectOperation, type OperationView } from '../ledger/projection.js';
import { createRedactor } from '../core/redact.js';
import type { LedgerStore } from '../ledger/store.js';
import { LedgerError } from '../ledger/ledger-error.js';
import type { Checkpointer } from '../ledger/chain/checkpointer.js';
import type { EngineAction } from './action.js';
import type { ResolveSshSecret } from './ssh-action.js';
import type { Telemetry } from '../telemetry/port.js';
import { traceEvents } from './trace.js';
import {
  openGate,
  type CredentialProvider,
  type Gate,
  type PolicyPort,
  type Redactor,
} from './ports.js';

export { UsageError } from '../core/errors.js';

/** The engine's options; the transports are given (src/runtime.ts fills in the defaults). */
export interface EngineOptions {
  ledger: LedgerStore;
  credentials: CredentialProvider;
  clock?: Clock;
  ids?: IdFactory;
  /** The one process allowed to start attempts for operations it opens. */
  owner?: string;
  actions?: ReadonlyArray<EngineAction<never, never> | EngineAction>;
  gate?: Gate;
  redactor?: Redactor;
  /** Waits between automatic retries (injected so tests never sleep for real). */
  sleep?: (ms: number) => Promise<void>;
  /** Backoff before retrying a connection that was never established. */
  backoff_ms?: (attemptNumber: number) => number;
  /**
   * Told of every automatic retry before its wait: why (the licence's reason and decision) and
   * how long the engine waits. A listener that throws changes nothing.
   */
  onRetry?: (event: RetryEvent) => void;
  agent?: string;
  /**
   * Audit: seal protected diagnostics to the auditor's public key (the gateway cannot read them
   * back), and issue signed checkpoints every N records, at session end and before a sensitive
   * action is dispatched.
   */
  audit?: { sealTo?: Uint8Array; checkpoints?: Checkpointer };
  /** The transports by kind: an action's destination kind picks the one that carries it. */
  transports: Transports;
  /** The classifier (tests swap in a wrong one to prove the matrix has teeth). */
  classify?: typeof classify;
  /** Resolves an SSH action's `secret_refs` (vault values) at attempt time, inside the runtime. */
  resolveSshSecret?: ResolveSshSecret;
  /**
   * Key of the continuation identity of secret inputs (engine/ssh-action.ts): HMAC-SHA-256 of
   * them under this key is part of an operation's intent, never the values. The composition root
   * derives it from the vault; without it each engine makes a random one, so only this engine
   * can continue an operation that carries secret inputs.
   */
  secretDigestKey?: Uint8Array;
  /**
   * Fleets: hold an ownership lease while a session is open (src/engine/ownership.ts), so other
   * gateways on the same ledger can tell this owner alive and take its operations over only once
   * the lease has lapsed.
   */
  lease?: LeaseOptions;
  /**
   * Tracing (src/telemetry): a span per operation call, a child span per attempt, the W3C
   * `traceparent` on HTTP requests. Off when not given.
   */
  telemetry?: Telemetry;
  /**
   * Policy as code (src/policy): decides every attempt before any send and before approvals.
   * Off when not given.
   */
  policy?: PolicyPort;
}

/** One automatic retry, as the loop decides it: why, under which licence, after what wait. */
export interface RetryEvent {
  operation_id: string;
  /** The number of the attempt about to be made (2 for the first retry). */
  attempt: number;
  reason: RetryReason;
  decision: RetryDecision;
  /** How long the loop waits before it: the backoff, the server's delay, or 0. */
  delay_ms: number;
}

/** A fleet runtime's ownership lease (kept by src/engine/ownership.ts). */
export interface LeaseOptions {
  /** How long a heartbeat keeps the lease (default 30 s); renewed every third of that. */
  ttl_ms?: number;
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
  /**
   * Who asked (the authenticated HTTP caller, src/core/caller.ts; the local user when absent):
   * recorded on operation_opened, and the principal policies see.
   */
  caller?: Caller;
}

export type AnyAction = EngineAction<never, never> | EngineAction;

export type { Licence } from '../core/licence.js';

export type ResolvedBy = 'attempt' | 'reconciliation' | 'operator' | 'recovery';

/** What an envelope is made of (`EngineContext.envelopeOf`). */
export interface EnvelopeParts {
  action: { name: string; subject: string };
  view: Pick<OperationView, 'operation_id' | 'correlation_id'>;
  /** The classification (or the recorded outcome) the envelope reports. */
  outcome: Pick<Classification, 'category' | 'retry' | 'remote_effect' | 'retry_after_ms'> & {
    /** The deciding rule (a RuleId, or a rule string recorded in the ledger). */
    rule?: string;
  };
  /** What the agent may see of the answer (redacted here); null when there is none. */
  data: unknown;
  diagnosticsRef: string | null;
  /** `retry_declined`: the message says a retry was asked for and not made. */
  variant?: 'retry_declined' | undefined;
  /** This attempt's own category, when earlier attempts overrule it (core/operation-outcome.ts). */
  earlier?: { kind: EarlierAttempt; attempt_category: Category } | undefined;
  /**
   * A call on an existing operation that was refused: the envelope states the operation, and the
   * refusal is `data.refusal: { code, detail }` (a stable code and a sentence of its own, which
   * also follows the message).
   */
  refusal?: { code: RefusalCode; sentence: string } | undefined;
}

/** Why a call on an existing operation was not carried out (the envelope's `data.refusal`). */
export type RefusalCode =
  | 'request_changed'
  | 'not_owner'
  | 'owner_lost'
  | 'budget_spent'
  | 'already_settled'
  | 'request_unbuildable'
  | 'caller_not_permitted'
  | 'policy_denied';

export interface EngineContext {
  /** The options as given (defaults below are resolved once, here). */
  readonly options: EngineOptions;
  /** The transports by kind (the same object as `options.transports`). */
  readonly transports: Transports;
  /** The ledger every record goes to (append-only). */
  readonly ledger: LedgerStore;
  /** Time for every record and phase (injected in tests). */
  readonly clock: Clock;
  /** Mints operation, attempt, diagnostics and observation ids. */
  readonly ids: IdFactory;
  /** Consulted before every attempt; `openGate` when none is given. */
  readonly gate: Gate;
  /** The one redaction layer over everything agent-visible or stored in clear. */
  readonly redactor: Redactor;
  /** Waits between automatic retries (tests never sleep for real). */
  readonly sleep: (ms: number) => Promise<void>;
  /** Backoff before retrying a connection that was never established, by attempt number. */
  readonly backoff: (attemptNumber: number) => number;
  /** This runtime's owner id, recorded on the operations it opens. */
  readonly owner: string;
  /** Actions by name: configured ones plus every action the runtime has been asked to run. */
  readonly actions: Map<string, AnyAction>;
  // Function-valued fields, not methods: modules destructure them, and none depends on `this`.
  /** Appends records atomically; durable when the promise resolves. */
  readonly append: (events: NewEvent[]) => Promise<StoredEvent[]>;
  /**
   * Resolves once the records this run has kept back are written (see `deferOpening`): a gate
   * that records or reads anything about the operation awaits it first.
   */
  readonly recorded: () => Promise<void>;
  /** The operation's projected view from its records, or null. */
  readonly load: (operationId: string) => Promise<OperationView | null>;
  /** The (redacted) input recorded when the operation was opened. */
  readonly paramsOf: (operationId: string) => Promise<unknown>;
  /** The envelope of a classification (message from core/messages.ts, data redacted). */
  readonly envelopeOf: (parts: EnvelopeParts) => Envelope;
  /** Records later evidence about an operation (never an attempt). */
  readonly observe: (
    view: Pick<OperationView, 'operation_id' | 'correlation_id' | 'session_id'>,
    data: Omit<EventPayloads['observation_recorded'], 'observation_id'>,
  ) => Promise<void>;
  /**
   * Records `operation_resolved`: the operation's final state and who settled it. Resolves to null
   * when written; to the store's reason when fenced (another gateway took the operation over while
   * this one worked on it: nothing is written, and the caller must not speak as if it settled it).
   */
  readonly resolve: (
    view: Pick<OperationView, 'operation_id' | 'correlation_id' | 'session_id'>,
    resolution: Resolution,
  ) => Promise<string | null>;
}

/** What `operation_resolved` records: the final state, its category, who settled it, and how. */
export interface Resolution {
  state: OperationState;
  category: Classification['category'];
  by: ResolvedBy;
  remoteRefs: string[];
}

export function createEngineContext(options: EngineOptions): EngineContext {
  // Order matters: a default owner mints an id, and injected id factories are deterministic.
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? createIdFactory(clock);
  const ledger = options.ledger;
  const gate = options.gate ?? openGate;
  // The one redaction layer (src/core/redact.ts): exact secrets in every encoding, auth headers,
  // PEM blocks and token shapes.
  const redactor = options.redactor ?? createRedactor();
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const backoff = options.backoff_ms ?? ((n: number) => Math.min(2_000, 100 * 2 ** (n - 1)));
  const owner = options.owner ?? `${hostname()}:${process.pid}:${ids.mint('ses').slice(4, 14)}`;
  const actions = new Map<string, AnyAction>();
  for (const a of options.actions ?? []) actions.set(a.name, a);

  const append = async (events: NewEvent[]): Promise<StoredEvent[]> => {
    const stored = await ledger.append(events);
    traceEvents(stored);
    return stored;
  };

  return {
    options,
    transports: options.transports,
    ledger,
    clock,
    ids,
    gate,
    redactor,
    sleep,
    backoff,
    owner,
    actions,
    append,
    recorded: () => Promise.resolve(),

    load: async (operationId) =>
      projectOperation(await ledger.query({ operation_id: operationId })),

    paramsOf: async (operationId) => {
      const events = await ledger.query({ operation_id: operationId });
      const opened = events.find((e) => e.kind === 'operation_opened');
      return opened?.kind === 'operation_opened' ? opened.data.params : undefined;
    },

    envelopeOf: ({ action, view, outcome: c, data, diagnosticsRef, variant, earlier, refusal }) => {
      const message = messageFor(c.category, {
        subject: action.subject,
        retry_after_ms: c.retry_after_ms,
        remote_effect: c.remote_effect,
        ...(c.rule !== undefined ? { rule: c.rule } : {}),
        ...refusalOf(c.category, data),
        ...credentialDetailOf(c.category, data),
        ...(earlier ? { earlier } : {}),
        ...(variant === 'retry_declined' && c.remote_effect !== 'none'
          ? { retry_declined: { remote_effect: c.remote_effect } }
          : {}),
      });
      const refusalData = refusal
        ? {
            ...(data !== null && data !== undefined && typeof data === 'object' ? data : {}),
            refusal: { code: refusal.code, detail: refusal.sentence },
          }
        : data;
      const env: Envelope = {
        // ok is true exactly when the category is succeeded (the envelope's contract); a refused
        // call on a succeeded operation says so in data.refusal, the message and the headline.
        ok: c.category === 'succeeded',
        category: c.category,
        operation: action.name,
        operation_id: view.operation_id,
        retry: c.retry,
        remote_effect: c.remote_effect,
        correlation_id: view.correlation_id,
        message: refusal ? `${message} ${refusal.sentence}` : message,
        data:
          refusalData === undefined || refusalData === null
            ? null
            : redactor.redactValue(refusalData),
        diagnostics_ref: diagnosticsRef,
      };
      if (c.retry === 'after_delay' && c.retry_after_ms !== null)
        env.retry_after_ms = c.retry_after_ms;
      return env;
    },

    ...recorders(append, ledger, ids, { clock, owner }),
  };
}

/** A transport's refusal code in `data.refusal.code` (the SSH wrapper's), for the message. */
function refusalOf(category: string, data: unknown): { refusal?: string } {
  if (category !== 'confirmed_failure' || typeof data !== 'object' || data === null) return {};
  const r = (data as { refusal?: unknown }).refusal;
  const code = typeof r === 'object' && r !== null ? (r as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? { refusal: code } : {};
}

/** Why a credential was not released (`data.refusal.detail` of a not-sent local_failure). */
function credentialDetailOf(category: string, data: unknown): { credential_detail?: string } {
  if (category !== 'local_failure' || typeof data !== 'object' || data === null) return {};
  const r = (data as { refusal?: unknown }).refusal;
  if (typeof r !== 'object' || r === null) return {};
  const { code, detail } = r as { code?: unknown; detail?: unknown };
  return code === 'credential_unavailable' && typeof detail === 'string'
    ? { credential_detail: detail }
    : {};
}

/** The named arguments of `recorders`. */
interface RecordersOptions {
  clock: Clock;
  owner: string;
}

/** `observe` and `resolve` over the given append (a deferred opening wraps it: see below). */
function recorders(
  append: EngineContext['append'],
  ledger: LedgerStore,
  ids: IdFactory,
  { clock, owner }: RecordersOptions,
): Pick<EngineContext, 'observe' | 'resolve'> {
  return {
    observe: async (view, data) => {
      // The same finding again (a repeated lookup or recovery run) adds no duplicate record —
      // unless an attempt came after it: then the same finding is news about a later state (a
      // lookup after attempt #4 is not the lookup before it), and the fold needs it on record.
      const events = await ledger.query({ operation_id: view.operation_id });
      const newest = events
        .filter(
          (e) =>
            e.kind === 'observation_recorded' ||
            e.kind === 'attempt_started' ||
            e.kind === 'attempt_finished',
        )
        .at(-1);
      if (newest?.kind === 'observation_recorded' && sameFinding(newest.data, data)) return;
      await append([
        {
          kind: 'observation_recorded',
          at: data.checked_at,
          session_id: view.session_id,
          operation_id: view.operation_id,
          correlation_id: view.correlation_id,
          data: { observation_id: ids.mint('obs'), ...data },
        },
      ]);
    },

    resolve: async (view, { state, category, by, remoteRefs }) => {
      try {
        await append([
          {
            kind: 'operation_resolved',
            at: clock.now(),
            session_id: view.session_id,
            operation_id: view.operation_id,
            correlation_id: view.correlation_id,
            data: { state, category, by, remote_refs: remoteRefs, writer: owner },
          },
        ]);
        return null;
      } catch (error) {
        // Fenced (ledger/lease.ts): another gateway owns the operation now, and a former owner's
        // resolution is not written; its evidence is already on record.
        if (error instanceof LedgerError && error.code === 'OWNER_CONFLICT') return error.message;
        throw error;
      }
    },
  };
}

/**
 * A run's context whose opening records (`operation_opened`, and `operation_superseded` when it
 * supersedes) are not yet written: they go out in front of the run's first record — with the
 * first `attempt_started` (one commit, still before any byte leaves), or with the refusal that
 * resolves the operation. `flush()` writes them if nothing did (a pending approval, an
 * unbuildable request): every operation the engine opened is on record when its run returns.
 */
export function deferOpening(
  ctx: EngineContext,
  opening: NewEvent[],
): { ctx: EngineContext; flush: () => Promise<void> } {
  let pending: NewEvent[] | null = opening;
  const append = (events: NewEvent[]): Promise<StoredEvent[]> => {
    if (pending === null) return ctx.append(events);
    const all = [...pending, ...events];
    pending = null;
    return ctx.append(all).then((stored) => stored.slice(all.length - events.length));
  };
  const flush = async (): Promise<void> => {
    if (pending !== null) await append([]);
  };
  return {
    // Every key replaced here is one of ctx's own, so the copy keeps ctx's shape (core/merge.ts).
    ctx: merged(
      merged(ctx, recorders(append, ctx.ledger, ctx.ids, { clock: ctx.clock, owner: ctx.owner })),
      {
        append,
        recorded: flush,
      },
    ),
    flush,
  };
}

/**
 * A claim that stays `outcome_unknown` (the remote effect is not known), with its next step: a
 * lookup (`unknown_lookup_next`) or a person (`unknown_person_decides`), rows of
 * core/rule-table.ts.
 */
export function unknownOutcome(
  rule: 'unknown_lookup_next' | 'unknown_person_decides',
): RuleOutcome {
  return outcomeOf(rule);
}

/** Two observations that say the same thing (their ids and times aside). */
function sameFinding(
  a: Omit<EventPayloads['observation_recorded'], 'observation_id'>,
  b: Omit<EventPayloads['observation_recorded'], 'observation_id'>,
): boolean {
  const strip = ({ checked_at: _at, ...rest }: typeof a): unknown => rest;
  const { observation_id: _id, ...left } = a as EventPayloads['observation_recorded'];
  return canonicalJson(strip(left)) === canonicalJson(strip(b));
}
