// Recovery after a restart: every unresolved operation is worked through — never under a new
// operation id — and each report line says what was really done:
// - nothing was ever sent: its first attempt is made through the gate, as `run` would (never a
//   lookup: there is nothing to find, and the operation must not turn `unknown`), or it is marked
//   for a person, saying nothing was sent;
// - an attempt may have been sent: looked up where the destination offers a lookup, retried under
//   an honoured idempotency key (or as a read), or marked for a person with the reason.
// A lookup or attempt that cannot be sent (gate locked, credential unavailable, budget spent)
// leaves the operation for a person. Operations are worked through concurrently (bounded), so one
// slow destination does not serialize every deadline.
import { DEFAULT_ATTEMPT_BUDGET } from '../core/rules.js';
import type { Envelope } from '../core/envelope.js';
import { outcomeOf } from '../core/rule-table.js';
import { REDACTED } from '../core/redact.js';
import type { OperationView } from '../ledger/projection.js';
import { UNRESOLVED_STATES } from '../ledger/projection.js';
import { contractOf, hasLookup } from './action.js';
import type { AnyAction, EngineContext, Licence } from './context.js';
import { budgetLeft } from './continuation.js';
import { licensedAttempt } from './drive.js';
import { lockedGate, maybeSent, reconcileView } from './reconcile.js';
import { identifyCall, traced } from './trace.js';
import type { OwnerHold } from './ownership.js';
import { operationEnvelope } from './truth.js';

/** What recovery did with one operation. */
export const RecoveryOutcome = {
  /** A lookup found the one record the operation created: succeeded. */
  found_by_lookup: 'found_by_lookup',
  /** Sent again under the operation's honoured idempotency key (or as a read), and settled. */
  retried_under_key: 'retried_under_key',
  /** Nothing had been sent; the first attempt was made now, and it settled the operation. */
  first_attempt_made: 'first_attempt_made',
  /** Still unresolved (or needing a decision): a person must decide; `detail` says why. */
  needs_person: 'needs_person',
  /**
   * Another gateway owns it and its lease is live (or it holds no lease that could lapse): left
   * to that owner, nothing sent or looked up from here (`candor recover`; a sweep says nothing).
   */
  left_to_owner: 'left_to_owner',
} as const;
export type RecoveryOutcome = (typeof RecoveryOutcome)[keyof typeof RecoveryOutcome];

export interface RecoveryItem {
  operation_id: string;
  /** The operation's action name as recorded. */
  action: string | null;
  outcome: RecoveryOutcome;
  /** One plain sentence: what was done and, for a person, why. */
  detail: string;
  /** Whether the operation is still open or unknown after recovery. */
  unresolved: boolean;
  envelope: Envelope;
}

/** Operations worked through at once. */
export const RECOVERY_CONCURRENCY = 4;

/**
 * `claim` makes this runtime the owner of an operation another process owns (src/engine/
 * ownership.ts) and answers its view, or null when that owner is alive (or another gateway won):
 * such an operation is left alone: a sweep gives it no report line, `candor recover` reports it
 * as \`left_to_owner\` (it is still unresolved, and no one here may send for it).
 */
export type Claimed = { view: OperationView } | { view: null; why: string; held?: OwnerHold };

export async function recover(
  ctx: EngineContext,
  claim?: (view: OperationView) => Promise<Claimed>,
  othersOnly = false,
): Promise<RecoveryItem[]> {
  const ids = await ctx.ledger.unresolved();
  const out: Array<RecoveryItem | null> = new Array<RecoveryItem | null>(ids.length).fill(null);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < ids.length) {
      const i = next++;
      // One trace per operation worked through (src/engine/trace.ts).
      out[i] = await traced(
        ctx.options.telemetry,
        'recover',
        () => recoverOne(ctx, ids[i]!, claim, othersOnly),
        { envelope: (item) => item?.envelope ?? null, lazy: true },
      );
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(RECOVERY_CONCURRENCY, ids.length) }, () => worker()),
  );
  return out.filter((x): x is RecoveryItem => x !== null);
}

async function recoverOne(
  ctx: EngineContext,
  id: string,
  claim?: (view: OperationView) => Promise<Claimed>,
  othersOnly = false,
): Promise<RecoveryItem | null> {
  const loaded = await ctx.load(id);
  if (!loaded) return null;
  // A sweep never touches the operations this runtime opened: a call may be driving them right
  // now. Those it took over by a sweep or recovery (no call of its own drives them) are looked at
  // again on every pass until settled: a takeover whose lookup failed is retried, one pass apart.
  if (othersOnly && loaded.owner === ctx.owner && !takenOverUnattended(ctx, loaded)) return null;
  // Settled by another gateway since the list was read: nothing to do.
  if (loaded.state !== null && !UNRESOLVED_STATES.has(loaded.state)) return null;
  const claimed = loaded.owner !== ctx.owner && claim ? await claim(loaded) : { view: loaded };
  if (claimed.view === null) {
    if (othersOnly || !('why' in claimed)) return null;
    const known = loaded.action ? ctx.actions.get(loaded.action) : undefined;
    return {
      operation_id: id,
      action: loaded.action,
      outcome: 'left_to_owner',
      detail: `left to its owner: it is ${claimed.why}, so nothing was sent or looked up from here`,
      unresolved: true,
      envelope: operationEnvelope(
        ctx,
        known ?? { name: loaded.action ?? 'unknown', subject: 'the operation' },
        loaded,
        {
          refusal: {
            code: 'not_owner',
            sentence: `Recovery sent nothing for operation ${id}: it is ${claimed.why}.`,
          },
          held: claimed.held ?? null,
        },
      ),
    };
  }
  const view = claimed.view;
  // Settled while it was being claimed: the list and the first load can predate the owner's last
  // answer (a 4xx that proved nothing was applied), and a retry now would go against that answer.
  if (view.state !== null && !UNRESOLVED_STATES.has(view.state)) return null;
  identifyCall(view);
  const sent = maybeSent(view);
  const action = view.action ? ctx.actions.get(view.action) : undefined;
  const person = (detail: string, envelope: Envelope): RecoveryItem => ({
    operation_id: id,
    action: view.action,
    outcome: 'needs_person',
    detail,
    unresolved: true,
    envelope,
  });
  const sentNote = sent ? 'an attempt may have reached the destination' : 'nothing was sent';
  if (!action) {
    return person(
      `no action named "${view.action ?? '?'}" is configured here, so it cannot be checked; ${sentNote}`,
      unconfigured(view, sent),
    );
  }
  if (await lockedGate(ctx)) {
    return person(
      `the gate is locked, so nothing was sent or looked up; ${sentNote}`,
      lockedEnvelope(ctx, action, view, sent),
    );
  }
  if (!sent) return firstAttempt(ctx, action, view, person);

  if (hasLookup(action)) {
    const r = await reconcileView(ctx, action, view);
    const after = await settledAfter(ctx, id);
    const e = r.envelope;
    if (r.step === 'found' || (r.step === 'ssh' && e.ok && !after.unresolved)) {
      return item(view, 'found_by_lookup', 'found by lookup: the operation took effect', {
        envelope: e,
        after,
      });
    }
    if (r.step === 'absent_retried' && e.ok && !after.unresolved) {
      return item(
        view,
        'retried_under_key',
        'the lookup found no record; retried under the idempotency key, which settled it',
        { envelope: e, after },
      );
    }
    return person(lookupWhy(r.step, e), e);
  }
  if (contractOf(action).idempotency_honoured || action.class === 'read') {
    const how = action.class === 'read' ? 'retried as a read' : 'retried under the idempotency key';
    const licence: Licence = {
      reason: 'response_lost_after_dispatch',
      decision: action.class === 'read' ? 'read_only' : 'destination_idempotency_confirmed',
    };
    const blocked = cannotAttempt(action, view);
    if (blocked) return person(`${blocked}; ${sentNote}`, unknownEnvelope(ctx, action, view));
    const params = await ctx.paramsOf(id);
    const e = await licensedAttempt(ctx, action, params, { view, licence, by: 'recovery' });
    const after = await settledAfter(ctx, id);
    if (!after.unresolved && (e.ok || e.remote_effect === 'none'))
      return item(view, 'retried_under_key', `${how}: ${e.message}`, { envelope: e, after });
    return person(`${how}, still not settled: ${e.message}`, e);
  }
  return person(
    'an attempt may have reached the destination and there is neither a lookup nor an honoured idempotency key, so a retry could repeat the effect',
    unknownEnvelope(ctx, action, view),
  );
}

/** Nothing was sent: the first attempt, through the gate, under the budget, as `run` would. */
async function firstAttempt(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  person: (detail: string, envelope: Envelope) => RecoveryItem,
): Promise<RecoveryItem> {
  const nothing = notSentEnvelope(ctx, action, view);
  const blocked = cannotAttempt(action, view);
  if (blocked) return person(`${blocked}; nothing was sent`, nothing);
  const params = await ctx.paramsOf(view.operation_id);
  if (containsRedaction(params)) {
    return person(
      'the recorded input was redacted (it held a secret), so the request cannot be rebuilt; nothing was sent',
      nothing,
    );
  }
  // A first attempt after earlier not-sent ones is a retry of a request that never left.
  const licence: Licence | null =
    view.attempts.length > 0
      ? { reason: 'connection_not_established', decision: 'not_sent' }
      : null;
  const e = await licensedAttempt(ctx, action, params, { view, licence, by: 'recovery' });
  const after = await settledAfter(ctx, view.operation_id);
  if (e.category === 'gate_locked' || e.category === 'approval_denied') {
    const why = e.category === 'gate_locked' ? 'the gate is locked' : 'a person declined';
    return {
      ...person(`${why}, so the first attempt was not made; nothing was sent`, e),
      unresolved: after.unresolved,
    };
  }
  if (after.unresolved) return person(`first attempt made, still not settled: ${e.message}`, e);
  return item(view, 'first_attempt_made', `first attempt made: ${e.message}`, {
    envelope: e,
    after,
  });
}

/** Why no attempt may be made (the budget is spent), or null. */
function cannotAttempt(action: AnyAction, view: OperationView): string | null {
  if (budgetLeft(action, view) <= 0)
    return `the attempt budget (${action.attempt_budget ?? DEFAULT_ATTEMPT_BUDGET}) is spent`;
  return null;
}

async function settledAfter(ctx: EngineContext, id: string): Promise<{ unresolved: boolean }> {
  const v = await ctx.load(id);
  return { unresolved: v?.state == null || UNRESOLVED_STATES.has(v.state) };
}

/** The named arguments of `item`. */
interface ItemOptions {
  envelope: Envelope;
  after: { unresolved: boolean };
}

function item(
  view: OperationView,
  outcome: RecoveryOutcome,
  detail: string,
  { envelope, after }: ItemOptions,
): RecoveryItem {
  return {
    operation_id: view.operation_id,
    action: view.action,
    outcome: after.unresolved ? 'needs_person' : outcome,
    detail,
    unresolved: after.unresolved,
    envelope,
  };
}

function lookupWhy(step: string, e: Envelope): string {
  switch (step) {
    case 'duplicates':
      return 'the lookup found more than one record: the effect happened more than once';
    case 'absent':
      return 'the lookup found no record, and without an honoured idempotency key a retry could duplicate a late effect';
    case 'absent_retried':
      return `the lookup found no record; the retry under the idempotency key did not settle it: ${e.message}`;
    case 'ambiguous':
      return "the lookup found records like this one, but none is bound to this operation (lookup_ambiguous): they may be another's, so the outcome is still unknown";
    case 'lookup_failed':
      return 'the lookup got no usable answer; the outcome is still unknown';
    case 'gate_locked':
      return 'the lookup was not sent: the gate is locked; the outcome is still unknown';
    case 'credential_unavailable':
      return 'the lookup was not sent: credential unavailable; the outcome is still unknown';
    default:
      return `checked, still not settled: ${e.message}`;
  }
}

/** Whether a recorded value holds a redaction marker anywhere (the real value is not known). */
function containsRedaction(value: unknown): boolean {
  if (typeof value === 'string') return value.includes(REDACTED);
  if (Array.isArray(value)) return value.some(containsRedaction);
  if (value !== null && typeof value === 'object')
    return Object.values(value).some(containsRedaction);
  return false;
}

function notSentEnvelope(ctx: EngineContext, action: AnyAction, view: OperationView): Envelope {
  const env = ctx.envelopeOf({
    action,
    view,
    outcome: outcomeOf('recovery_not_sent'),
    data: null,
    diagnosticsRef: null,
  });
  return {
    ...env,
    message: `Nothing was sent; ${action.subject} was not applied. A person must decide.`,
  };
}

function unknownEnvelope(ctx: EngineContext, action: AnyAction, view: OperationView): Envelope {
  return ctx.envelopeOf({
    action,
    view,
    outcome: outcomeOf('unknown_person_decides'),
    data: null,
    diagnosticsRef: view.attempts.at(-1)?.finish?.diagnostics_ref ?? null,
  });
}

function lockedEnvelope(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  sent: boolean,
): Envelope {
  const env = ctx.envelopeOf({
    action,
    view,
    outcome: outcomeOf('recovery_gate_locked', { remote_effect: sent ? 'unknown' : 'none' }),
    data: null,
    diagnosticsRef: null,
  });
  return {
    ...env,
    message: sent
      ? `The gate is locked, so nothing was sent; whether ${action.subject} was applied is unknown.`
      : `The gate is locked, so nothing was sent; ${action.subject} was not applied.`,
  };
}

function unconfigured(view: OperationView, sent: boolean): Envelope {
  const row = outcomeOf(sent ? 'action_unconfigured_sent' : 'action_unconfigured_not_sent');
  return {
    ok: false,
    category: row.category,
    operation: view.action ?? 'unknown',
    operation_id: view.operation_id,
    retry: row.retry,
    remote_effect: row.remote_effect,
    correlation_id: view.correlation_id,
    message: `No action named "${view.action ?? '?'}" is configured here, so the operation cannot be checked; ${sent ? 'an attempt may have reached the destination' : 'nothing was sent'}, and a person must decide.`,
    data: null,
    diagnostics_ref: null,
  };
}

/** This runtime took the operation over by a sweep or a recovery, and no call of its own since. */
function takenOverUnattended(ctx: EngineContext, view: OperationView): boolean {
  const last = view.owner_changes.at(-1);
  return (
    last !== undefined && last.to === ctx.owner && (last.by === 'sweep' || last.by === 'recovery')
  );
}
