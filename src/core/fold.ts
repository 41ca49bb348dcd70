// The operation fold (DESIGN.md §2 "Knowledge is monotone"): what is known about an operation's
// remote effect is a fold over *all* its attempts and observations, never the last attempt's word.
// This is the only copy: the engine, the three stores' projections (state, unresolved(), the
// listing), recover, the gateway, `ops`, the web view and telemetry all read it.
//
// The lattice, per operation:
//   - `applied` as soon as any evidence shows the effect (an attempt's answer, a bound lookup, a
//     late answer to a fenced owner, an operator); it never goes back.
//   - `unknown` while some attempt may have reached the destination and nothing has shown that it
//     did not: attempts in flight (started, not finished) and attempts that ended without a usable
//     answer ("unproven").
//   - `none` only while no attempt can have reached the destination, or once a lookup bound to this
//     operation proved absence after every attempt that could have applied had ended.
// A later attempt's answer (4xx, 429, 5xx, "key in use") speaks for that attempt only: it removes
// that attempt from "in flight" and never un-says an earlier one. A resolution that claims less
// than the fold knows (`failed` while unknown) does not lower it.
import type { Category, OperationState, RemoteEffect } from './vocabulary.js';

/** The fold's accumulator: small, JSON-serialisable (stores keep it beside the listing row). */
export interface OperationFold {
  /** Some evidence showed the effect applied. */
  applied: boolean;
  /** Two or more remote records (a lookup, or a confirmed duplicate). */
  duplicate: boolean;
  /** Attempts started and not finished: their bytes may be on the way. */
  inflight: string[];
  /** Attempts that ended without showing whether they applied, not yet disproved by a lookup. */
  unproven: string[];
  /** The state while the effect is `none`: still open, settled failed, or cancelled. */
  none_state: 'open' | 'failed' | 'cancelled';
}

/** Why the fold stands where it does: recorded in views and shown by `ops show`. */
export type FoldRule =
  | 'no_attempt_reached'
  | 'attempt_in_flight'
  | 'attempt_unproven'
  | 'applied_by_evidence'
  | 'duplicate_by_evidence'
  | 'absence_proven';

/**
 * The events the fold reads, structurally (core imports nothing from the ledger). Other kinds
 * leave it as it was.
 */
export type FoldEvent =
  | { kind: 'operation_opened' }
  | { kind: 'attempt_started'; data: { attempt_id: string } }
  | {
      kind: 'attempt_finished';
      data: { attempt_id: string; category: Category; remote_effect: RemoteEffect; retry: string };
    }
  | {
      kind: 'observation_recorded';
      data: { state_after: OperationState; matches: number; source?: string; verdict?: string };
    }
  | { kind: 'operation_resolved'; data: { state: OperationState } }
  | { kind: 'operation_superseded' }
  | { kind: 'owner_changed' }
  | { kind: string; data?: unknown };

export const EMPTY_FOLD: Readonly<OperationFold> = Object.freeze({
  applied: false,
  duplicate: false,
  inflight: [],
  unproven: [],
  none_state: 'open' as const,
});

const without = (list: readonly string[], id: string): string[] => list.filter((x) => x !== id);
const withId = (list: readonly string[], id: string): string[] =>
  list.includes(id) ? [...list] : [...list, id];

/**
 * The fold after one event (`null`: no event of the operation yet). Pure and total: an event it
 * does not know leaves the fold as it was.
 */
export function foldEvent(f: OperationFold | null, e: FoldEvent): OperationFold | null {
  switch (e.kind) {
    case 'operation_opened':
      return f ?? { ...EMPTY_FOLD, inflight: [], unproven: [] };
    case 'attempt_started': {
      const d = (e as Extract<FoldEvent, { kind: 'attempt_started' }>).data;
      const base = f ?? EMPTY_FOLD;
      return { ...base, inflight: withId(base.inflight, d.attempt_id) };
    }
    case 'attempt_finished': {
      const d = (e as Extract<FoldEvent, { kind: 'attempt_finished' }>).data;
      const base = f ?? EMPTY_FOLD;
      // An attempt that was not in flight (its start belongs to a former owner, now fenced, or
      // was never seen) can only add knowledge: `none` from it proves nothing about the others.
      const wasInFlight = base.inflight.includes(d.attempt_id);
      const next: OperationFold = { ...base, inflight: without(base.inflight, d.attempt_id) };
      if (d.remote_effect === 'applied') {
        next.applied = true;
        if (d.category === 'duplicate_effect') next.duplicate = true;
      } else if (d.remote_effect === 'unknown') {
        next.unproven = withId(base.unproven, d.attempt_id);
      } else if (!wasInFlight) {
        // A late "not applied" for an attempt already counted as unproven stays unproven.
      } else {
        next.none_state = d.retry === 'never' || d.retry === 'escalate' ? 'failed' : 'open';
      }
      return next;
    }
    case 'observation_recorded': {
      const d = (e as Extract<FoldEvent, { kind: 'observation_recorded' }>).data;
      const base = f ?? EMPTY_FOLD;
      if (d.state_after === 'succeeded') return { ...base, applied: true };
      if (d.state_after === 'duplicate_effect_confirmed' || d.matches > 1)
        return { ...base, applied: true, duplicate: true };
      // Absence is proven by a lookup whose verdict is `absent` (a found-but-unbound, ambiguous or
      // failed lookup proves nothing either way), or, for evidence recorded without a verdict, by
      // its settled `state_after` — a lookup only when it matched nothing (a marker observation
      // counts the marker it read, and says what it showed in `state_after`).
      if (d.state_after === 'unknown') return base;
      if (d.verdict !== undefined && d.verdict !== 'absent') return base;
      if (d.verdict === undefined && d.source === 'lookup' && d.matches > 0) return base;
      // Absence proven by a lookup bound to this operation: every attempt that ended before it
      // did not apply. Attempts still in flight may land afterwards and keep the effect unknown.
      if (base.applied) return base;
      const noneState =
        d.state_after === 'open' || d.state_after === 'cancelled' ? d.state_after : 'failed';
      return { ...base, unproven: [], none_state: noneState };
    }
    case 'operation_resolved': {
      const d = (e as Extract<FoldEvent, { kind: 'operation_resolved' }>).data;
      const base = f ?? EMPTY_FOLD;
      switch (d.state) {
        case 'succeeded':
          return { ...base, applied: true };
        case 'duplicate_effect_confirmed':
          return { ...base, applied: true, duplicate: true };
        case 'failed':
        case 'cancelled':
        case 'open':
          // Only ever the state *while* nothing may have applied; it never lowers the effect.
          return { ...base, none_state: d.state };
        default:
          return base;
      }
    }
    case 'operation_superseded': {
      const base = f ?? EMPTY_FOLD;
      return base.none_state === 'open' ? { ...base, none_state: 'cancelled' } : base;
    }
    case 'owner_changed': {
      // The former owner is fenced from here on: its attempts in flight have ended as far as the
      // ledger can know, without a usable answer. What it learns late arrives as an observation.
      if (!f || f.inflight.length === 0) return f;
      return {
        ...f,
        inflight: [],
        unproven: [...f.unproven, ...f.inflight.filter((id) => !f.unproven.includes(id))],
      };
    }
    default:
      return f;
  }
}

/** The remote effect the fold knows. */
export function effectOf(f: OperationFold | null): RemoteEffect {
  if (f === null) return 'none';
  if (f.applied) return 'applied';
  return f.inflight.length > 0 || f.unproven.length > 0 ? 'unknown' : 'none';
}

/** The operation state the fold stands at (`null`: no event yet). Never `failed` when unknown. */
export function stateOf(f: OperationFold | null): OperationState | null {
  if (f === null) return null;
  if (f.duplicate) return 'duplicate_effect_confirmed';
  if (f.applied) return 'succeeded';
  if (f.inflight.length > 0 || f.unproven.length > 0) return 'unknown';
  return f.none_state;
}

/** Which rule of the lattice the fold stands on. */
export function foldRule(f: OperationFold | null): FoldRule {
  if (f === null) return 'no_attempt_reached';
  if (f.duplicate) return 'duplicate_by_evidence';
  if (f.applied) return 'applied_by_evidence';
  if (f.inflight.length > 0) return 'attempt_in_flight';
  if (f.unproven.length > 0) return 'attempt_unproven';
  return f.none_state === 'failed' ? 'absence_proven' : 'no_attempt_reached';
}

/** Folds a whole history (events of one operation, in order). */
export function foldAll(events: Iterable<FoldEvent>): OperationFold | null {
  let f: OperationFold | null = null;
  for (const e of events) f = foldEvent(f, e);
  return f;
}

/**
 * The accumulator of a row written before stores kept the fold (only its state is known): the
 * most cautious fold with that state. An `unknown` row keeps one placeholder unproven attempt, so
 * only a proving lookup (or positive evidence) moves it.
 */
export function foldFromState(state: OperationState | null): OperationFold | null {
  if (state === null) return null;
  switch (state) {
    case 'succeeded':
      return { ...EMPTY_FOLD, applied: true, inflight: [], unproven: [] };
    case 'duplicate_effect_confirmed':
      return { ...EMPTY_FOLD, applied: true, duplicate: true, inflight: [], unproven: [] };
    case 'unknown':
      return { ...EMPTY_FOLD, inflight: [], unproven: ['(recorded before the fold)'] };
    default:
      return { ...EMPTY_FOLD, inflight: [], unproven: [], none_state: state };
  }
}

/** The stored text of a fold (compact JSON; keys in a fixed order). */
export function encodeFold(f: OperationFold | null): string | null {
  if (f === null) return null;
  return JSON.stringify([
    f.applied ? 1 : 0,
    f.duplicate ? 1 : 0,
    f.inflight,
    f.unproven,
    f.none_state,
  ]);
}

/** A stored fold back; null (or unreadable text) falls back to the row's state. */
export function decodeFold(text: unknown, state: OperationState | null): OperationFold | null {
  if (typeof text !== 'string' || text === '') return foldFromState(state);
  try {
    const v = JSON.parse(text) as unknown;
    if (
      Array.isArray(v) &&
      (v as unknown[]).length === 5 &&
      Array.isArray(v[2]) &&
      Array.isArray(v[3]) &&
      (v[4] === 'open' || v[4] === 'failed' || v[4] === 'cancelled')
    ) {
      return {
        applied: v[0] === 1,
        duplicate: v[1] === 1,
        inflight: (v[2] as unknown[]).map(String),
        unproven: (v[3] as unknown[]).map(String),
        none_state: v[4] as OperationFold['none_state'],
      };
    }
  } catch {
    // fall through: the state is the cautious answer
  }
  return foldFromState(state);
}

/**
 * What one attempt's line may say about its remote effect (`ops show`, the web view's operation
 * page). An attempt's own `none` stands only when nothing of it left (`not_sent`) or when the
 * operation's fold is `none` too: a refusal of a later attempt (429, 4xx, "key in use" under the
 * same key) speaks for that answer alone and never says the effect is absent while an earlier
 * attempt may have applied it (or did).
 */
export function attemptEffectText(
  attempt: { remote_effect: RemoteEffect; dispatch_state: string },
  operation: RemoteEffect,
): string {
  if (attempt.remote_effect !== 'none') return attempt.remote_effect;
  if (attempt.dispatch_state === 'not_sent' || operation === 'none') return 'none';
  return operation === 'applied'
    ? 'not shown by this answer (an earlier attempt applied it: the operation is applied)'
    : 'not known from this answer (an earlier attempt may have applied it: the operation is unknown)';
}
