// Projections: current state derived from immutable events (DESIGN.md §2). Pure functions only —
// the stores maintain their unresolved states (the heads, the memory store's set) and the listing
// with exactly the operation fold (core/fold.ts, through `foldStates`), so the indexed answer of
// `unresolved()` and a full re-projection can never disagree.
import {
  OperationState,
  RemoteEffect,
  type ActionClass,
  type Category,
  type Retry,
  type RetryDecision,
} from '../core/vocabulary.js';
import type { Caller } from '../core/caller.js';
import type {
  Destination,
  EventPayloads,
  Intent,
  NewEvent,
  PhaseTimes,
  ResponseSummary,
  StoredEvent,
} from './events.js';
import { LICENSING_DECISIONS } from '../core/rules.js';
import { effectOf, foldEvent, foldFromState, stateOf, type OperationFold } from '../core/fold.js';

/** States that need reconciliation, a retry or a person: what `unresolved()` lists. */
export const UNRESOLVED_STATES: ReadonlySet<OperationState> = new Set([
  OperationState.open,
  OperationState.unknown,
]);

/**
 * The state of an operation after `event`, given its state before (`null`: no event yet), from the
 * operation fold (core/fold.ts) — the only copy of what an operation's events establish. Callers
 * that keep the fold itself use `foldEvent`; this one reconstructs the most cautious fold from a
 * bare state (telemetry's running state).
 */
export function nextState(current: OperationState | null, event: NewEvent): OperationState | null {
  return stateOf(foldEvent(foldFromState(current), event));
}

/**
 * Lookup tags of an operation event: `s:` the session that wrote it, `c:` its correlation id, `k:`
 * the idempotency key of the operation. Stores keep a (tag, operation_id) set so that "operations by
 * session / correlation id / idempotency key" are indexed lookups; rebuildable from the bytes.
 */
export function operationTags(e: NewEvent): string[] {
  if (e.operation_id === null) return [];
  const tags: string[] = [];
  if (e.session_id !== null) tags.push(`s:${e.session_id}`);
  if (e.correlation_id !== null) tags.push(`c:${e.correlation_id}`);
  if (e.kind === 'operation_opened' && e.data.idempotency_key !== null) {
    tags.push(`k:${e.data.idempotency_key}`);
  }
  return tags;
}

export interface StateChange {
  operation_id: string;
  state: OperationState;
  fold: OperationFold;
}

/**
 * Folds a batch of stored events into the final state (and fold) of each operation whose state
 * changed. `lookup` gives the fold stored before the batch (`undefined`: the operation has no row
 * yet, or a store that keeps only unresolved states does not know it — `foldFromState` of the
 * stored state is the cautious answer then).
 */
export function foldStates(
  events: readonly NewEvent[],
  lookup: (operationId: string) => OperationFold | null | undefined,
): StateChange[] {
  const out = new Map<string, { before: OperationState | null; fold: OperationFold | null }>();
  for (const e of events) {
    const id = e.operation_id;
    if (id === null) continue;
    let seen = out.get(id);
    if (!seen) {
      const stored = lookup(id) ?? null;
      seen = { before: stateOf(stored), fold: stored };
      out.set(id, seen);
    }
    seen.fold = foldEvent(seen.fold, e);
  }
  const changes: StateChange[] = [];
  for (const [id, s] of out) {
    const state = stateOf(s.fold);
    if (state === null || s.fold === null || state === s.before) continue;
    changes.push({ operation_id: id, state, fold: s.fold });
  }
  return changes;
}

export interface AttemptView {
  attempt_id: string;
  number: number;
  worker: string;
  retry_of_attempt_id: string | null;
  retry_reason: EventPayloads['attempt_started']['retry_reason'];
  retry_decision: RetryDecision | null;
  attempt_budget_remaining: number;
  request_fingerprint: string;
  prior_request_fingerprint: string | null;
  credential_ref: string | null;
  destination: Destination;
  /** The W3C `traceparent` of the traced call that started it, when telemetry was on. */
  traceparent?: string;
  started_at: number;
  started_seq: number;
  /** `null` while no `attempt_finished` was recorded: the bytes may have left. */
  finish: {
    dispatch_state: EventPayloads['attempt_finished']['dispatch_state'];
    category: Category;
    retry: Retry;
    remote_effect: RemoteEffect;
    rule: string;
    phases: PhaseTimes;
    response: ResponseSummary | null;
    duration_ms: number;
    /** Protected diagnostics stay in the ledger; the view carries only their reference. */
    diagnostics_ref: string | null;
    finished_at: number;
    finished_seq: number;
  } | null;
}

export type ObservationView = EventPayloads['observation_recorded'] & { at: number; seq: number };

export interface ApprovalView {
  approval_id: string;
  scope: EventPayloads['approval_requested']['scope'];
  request_fingerprint: string | null;
  card: Record<string, unknown>;
  requested_at: number;
  decision: EventPayloads['approval_decided']['decision'] | null;
  approver: string | null;
  decided_at: number | null;
}

/** A policy decision before one attempt (`policy_decided`). */
export type PolicyDecisionView = EventPayloads['policy_decided'] & { at: number; seq: number };

export interface OperationView {
  operation_id: string;
  session_id: string | null;
  owner: string | null;
  action: string | null;
  action_class: ActionClass | null;
  intent: Intent | null;
  destination: Destination | null;
  idempotency_key: string | null;
  supersedes_operation_id: string | null;
  superseded_by: string | null;
  correlation_id: string | null;
  state: OperationState | null;
  /** What the operation's events establish about its remote effect (core/fold.ts). */
  remote_effect: RemoteEffect;
  /** The fold itself (attempts in flight or unproven), for callers that explain it. */
  fold: OperationFold | null;
  opened_at: number | null;
  /** Who asked for it (operation_opened; absent in records written before callers were recorded). */
  caller?: Caller;
  /** The request fingerprint its opening built (operation_opened; absent in older records). */
  opened_fingerprint?: string;
  attempts: AttemptView[];
  observations: ObservationView[];
  approvals: ApprovalView[];
  /** Approval prompts shown for this operation (approval fatigue is a defect too). */
  prompts: number;
  /** Policy decisions, one per attempt the policies gated, oldest first. */
  policies: PolicyDecisionView[];
  resolution: (EventPayloads['operation_resolved'] & { at: number; seq: number }) | null;
  /** Takeovers by other gateways (`owner_changed`), oldest first; `owner` is the newest `to`. */
  owner_changes: (EventPayloads['owner_changed'] & { at: number; seq: number })[];
  /**
   * W3C `traceparent`s of the traced calls that opened the operation and started its attempts
   * (distinct, oldest first): what a later call settling it links to. Empty without telemetry.
   */
  traceparents: string[];
  first_seq: number;
  last_seq: number;
}

/** Projects one operation from its events (in seq order; events of other operations ignored). */
export function projectOperation(events: readonly StoredEvent[]): OperationView | null {
  const first = events.find((e) => e.operation_id !== null);
  if (!first || first.operation_id === null) return null;
  const id = first.operation_id;
  const v: OperationView = {
    operation_id: id,
    session_id: null,
    owner: null,
    action: null,
    action_class: null,
    intent: null,
    destination: null,
    idempotency_key: null,
    supersedes_operation_id: null,
    superseded_by: null,
    correlation_id: null,
    state: null,
    remote_effect: RemoteEffect.none,
    fold: null,
    opened_at: null,
    attempts: [],
    observations: [],
    approvals: [],
    prompts: 0,
    policies: [],
    resolution: null,
    owner_changes: [],
    traceparents: [],
    first_seq: first.seq,
    last_seq: first.seq,
  };
  for (const e of events) {
    if (e.operation_id !== id) continue;
    v.fold = foldEvent(v.fold, e);
    v.last_seq = e.seq;
    v.session_id ??= e.session_id;
    v.correlation_id ??= e.correlation_id;
    applyEvent(v, e);
  }
  v.state = stateOf(v.fold);
  v.remote_effect = effectOf(v.fold);
  return v;
}

function applyEvent(v: OperationView, e: StoredEvent): void {
  if (e.kind === 'operation_opened' || e.kind === 'attempt_started') {
    const tp = e.data.traceparent;
    if (typeof tp === 'string' && !v.traceparents.includes(tp)) v.traceparents.push(tp);
  }
  switch (e.kind) {
    case 'operation_opened':
      v.owner = e.data.owner;
      v.action = e.data.action;
      v.action_class = e.data.action_class;
      v.intent = e.data.intent;
      v.destination = e.data.destination;
      v.idempotency_key = e.data.idempotency_key;
      v.supersedes_operation_id = e.data.supersedes_operation_id;
      v.opened_at = e.at;
      if (e.data.caller) v.caller = e.data.caller;
      if (e.data.request_fingerprint !== undefined)
        v.opened_fingerprint = e.data.request_fingerprint;
      if (e.session_id !== null) v.session_id = e.session_id;
      return;
    case 'attempt_started': {
      const { destination, ...rest } = e.data;
      v.attempts.push({ ...rest, destination, started_at: e.at, started_seq: e.seq, finish: null });
      return;
    }
    case 'attempt_finished': {
      const a = v.attempts.find((x) => x.attempt_id === e.data.attempt_id);
      const { attempt_id: _id, diagnostics: _diagnostics, ...finish } = e.data;
      if (a) a.finish = { ...finish, finished_at: e.at, finished_seq: e.seq };
      return;
    }
    case 'observation_recorded':
      v.observations.push({ ...e.data, at: e.at, seq: e.seq });
      return;
    case 'approval_requested':
      v.prompts += 1;
      v.approvals.push({
        approval_id: e.data.approval_id,
        scope: e.data.scope,
        request_fingerprint: e.data.request_fingerprint,
        card: e.data.card,
        requested_at: e.at,
        decision: null,
        approver: null,
        decided_at: null,
      });
      return;
    case 'approval_decided': {
      const ap = v.approvals.find((x) => x.approval_id === e.data.approval_id);
      if (ap)
        Object.assign(ap, {
          decision: e.data.decision,
          approver: e.data.approver,
          decided_at: e.at,
        });
      return;
    }
    case 'policy_decided':
      v.policies.push({ ...e.data, at: e.at, seq: e.seq });
      return;
    case 'operation_resolved':
      v.resolution = { ...e.data, at: e.at, seq: e.seq };
      return;
    case 'operation_superseded':
      v.superseded_by = e.data.superseded_by;
      return;
    case 'owner_changed':
      // The one process allowed to start attempts is now the gateway that took it over.
      v.owner = e.data.to;
      v.owner_changes.push({ ...e.data, at: e.at, seq: e.seq });
      return;
    default:
      return;
  }
}

/** Groups events by operation (first-seen order) and projects each. */
export function projectOperations(events: readonly StoredEvent[]): OperationView[] {
  const groups = new Map<string, StoredEvent[]>();
  for (const e of events) {
    if (e.operation_id === null) continue;
    const g = groups.get(e.operation_id);
    if (g) g.push(e);
    else groups.set(e.operation_id, [e]);
  }
  const out: OperationView[] = [];
  for (const g of groups.values()) {
    const v = projectOperation(g);
    if (v) out.push(v);
  }
  return out;
}

/** How many times the intent may have reached the destination, and whether that was licensed. */
export const DeliveryVerdict = {
  no_attempt: 'no_attempt',
  single_delivery: 'single_delivery',
  retry_deduplicated: 'retry_deduplicated',
  retry_licensed: 'retry_licensed',
  unlicensed_retry: 'unlicensed_retry',
  duplicate_effect: 'duplicate_effect',
} as const;
export type DeliveryVerdict = (typeof DeliveryVerdict)[keyof typeof DeliveryVerdict];

/**
 * Tells "retried correctly and the target deduplicated" apart from "sent twice and got lucky":
 * every attempt after the first possibly-delivered one needs a licensing retry decision (and, for
 * `destination_idempotency_confirmed`, the same request fingerprint); more than one remote record
 * is a duplicate effect whatever the decisions said.
 */
export function deliveryVerdict(v: OperationView): { code: DeliveryVerdict; line: string } {
  if (v.attempts.length === 0) return { code: 'no_attempt', line: 'no attempt was started' };
  const delivered = v.attempts.filter((a) => a.finish?.dispatch_state !== 'not_sent');
  const refs = [
    ...new Set(
      v.attempts.flatMap((a) =>
        a.finish?.response?.remote_ref ? [a.finish.response.remote_ref] : [],
      ),
    ),
  ];
  const unlicensed = delivered.slice(1).filter((a, i) => {
    const prev = delivered[i]!;
    if (a.retry_decision === null || !LICENSING_DECISIONS.has(a.retry_decision)) return true;
    return (
      a.retry_decision === 'destination_idempotency_confirmed' &&
      a.request_fingerprint !== prev.request_fingerprint
    );
  });
  const unlicensedText = unlicensed
    .map((a) => `attempt ${a.number} was sent with retry decision ${a.retry_decision ?? 'none'}`)
    .join('; ');
  const lookupDuplicates = v.observations.some((o) => o.matches > 1);
  if (v.state === 'duplicate_effect_confirmed' || refs.length > 1 || lookupDuplicates) {
    const parts = [`DUPLICATE EFFECT: ${Math.max(refs.length, 2)} remote records`];
    if (refs.length > 0) parts.push(`(${refs.join(', ')})`);
    if (unlicensed.length > 0) parts.push(`— not licensed: ${unlicensedText}`);
    return { code: 'duplicate_effect', line: parts.join(' ') };
  }
  if (delivered.length <= 1) {
    const notSent = v.attempts.length - delivered.length;
    return {
      code: 'single_delivery',
      line:
        delivered.length === 0
          ? 'no attempt reached the destination'
          : `sent once${notSent > 0 ? ` (${notSent} earlier attempt(s) never left)` : ''}`,
    };
  }
  if (unlicensed.length > 0) {
    return {
      code: 'unlicensed_retry',
      line: `SENT ${delivered.length} TIMES WITHOUT LICENCE: ${unlicensedText}; ${refs.length} remote ref(s) seen — a single record would be luck, not safety`,
    };
  }
  const later = delivered.slice(1);
  const decisions = [...new Set(later.map((a) => a.retry_decision))].join(', ');
  if (later.every((a) => a.finish?.response?.replay === true) && refs.length <= 1) {
    return {
      code: 'retry_deduplicated',
      line: `retried under ${decisions}; the destination deduplicated (replay on attempt ${later
        .map((a) => a.number)
        .join(', ')}; ${refs.length === 1 ? `one remote ref ${refs[0]}` : 'no remote ref'})`,
    };
  }
  return {
    code: 'retry_licensed',
    line: `sent ${delivered.length} times, each retry licensed (${decisions}); ${refs.length} remote ref(s)`,
  };
}
