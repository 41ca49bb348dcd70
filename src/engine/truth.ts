// What the agent is told about an operation follows the operation (core/fold.ts and
// core/operation-outcome.ts), never one attempt: the facts an action offers (an honoured key, a
// lookup, a read) meet the fold of the operation's events here, for every envelope the engine
// builds — after an attempt, on a refusal, and for `operation_status`.
import type { Envelope } from '../core/envelope.js';
import type { Category } from '../core/vocabulary.js';
import { isRuleId } from '../core/classify.js';
import { licence } from '../core/licence.js';
import {
  operationClaim,
  operationLicence,
  type Claim,
  type OperationFacts,
} from '../core/operation-outcome.js';
import { classRule, DEFAULT_ATTEMPT_BUDGET } from '../core/rules.js';
import { outcomeOf, retryOf, WORST_CASE_FACTS } from '../core/rule-table.js';
import type { OperationView } from '../ledger/projection.js';
import { contractOf, type EngineAction } from './action.js';
import type { AnyAction, EngineContext, RefusalCode, ResolvedBy } from './context.js';
import type { OwnerHold } from './ownership.js';

type Described = { name: string; subject: string };
type Known = Pick<EngineAction<never, never>, 'name' | 'subject' | 'class' | 'destination'>;

const isKnown = (a: Described | Known): a is Known => 'destination' in a && 'class' in a;

/** The facts of `view`'s operation; an action this runtime does not know offers no guarantee. */
export function factsOf(action: Described | Known, view: OperationView): OperationFacts {
  if (!isKnown(action)) {
    return {
      effect: view.remote_effect,
      idempotency_honoured: false,
      read_only: view.action_class === 'read',
      lookup: false,
    };
  }
  const contract = contractOf(action);
  return {
    effect: view.remote_effect,
    idempotency_honoured: contract.idempotency_honoured,
    read_only: classRule(action.class).read_only,
    lookup: contract.reconciliation,
  };
}

/** What an attempt said, and what its envelope carries beside the operation's state. */
export interface AttemptEnvelopeOptions {
  claim: Claim;
  data: unknown;
  diagnosticsRef: string | null;
}

/** The envelope after an attempt that said `claim`, given the operation as it stands now. */
export function attemptEnvelope(
  ctx: EngineContext,
  action: Described | Known,
  view: OperationView,
  { claim, data, diagnosticsRef }: AttemptEnvelopeOptions,
): Envelope {
  const facts = factsOf(action, view);
  const out = operationClaim(withDelay(claim), facts);
  return ctx.envelopeOf({
    action,
    view,
    outcome: nextStep(out.claim, action, view, facts),
    data,
    diagnosticsRef,
    earlier: out.earlier ? { kind: out.earlier, attempt_category: claim.category } : undefined,
  });
}

/** The named arguments of `operationEnvelope`. */
export interface OperationEnvelopeOptions {
  refusal?: { code: RefusalCode; sentence: string; data?: Record<string, unknown> } | undefined;
  /** Another gateway owns the operation (ownership.ts `ownerHold`): only it may send. */
  held?: OwnerHold | null | undefined;
}

/**
 * The operation as its events establish it: what `operation_status` answers, and what a refused
 * call on an existing operation reports (with the refusal's code and sentence).
 */
export function operationEnvelope(
  ctx: EngineContext,
  action: Described | Known,
  view: OperationView,
  { refusal, held }: OperationEnvelopeOptions = {},
): Envelope {
  const facts = factsOf(action, view);
  const last = view.attempts.at(-1) ?? null;
  const finish = last?.finish ?? null;
  const diagnosticsRef = finish?.diagnostics_ref ?? null;
  // The last attempt's own claim, raised to the operation (core/operation-outcome.ts).
  const build = (claim: Claim): Envelope => {
    const out = operationClaim(withDelay(claim), facts);
    return ctx.envelopeOf({
      action,
      view,
      outcome: heldBack(nextStep(out.claim, action, view, facts), held ?? null, ctx.clock.now()),
      data: refusal ? { ...refusal.data, remote_refs: remoteRefsOf(view) } : null,
      diagnosticsRef,
      earlier: out.earlier ? { kind: out.earlier, attempt_category: claim.category } : undefined,
      refusal: refusal ? { code: refusal.code, sentence: refusal.sentence } : undefined,
    });
  };
  if (view.state === 'duplicate_effect_confirmed') return build(outcomeOf('reconciled_duplicates'));
  // An answer that showed the effect but not its details (a cut 2xx) keeps asking for the lookup
  // until a lookup (or a later answer) gave the record.
  if (
    facts.effect === 'applied' &&
    finish?.remote_effect === 'applied' &&
    finish.retry !== 'never' &&
    remoteRefsOf(view).length === 0
  )
    return build({
      category: finish.category,
      retry: finish.retry,
      remote_effect: 'applied',
      retry_after_ms: null,
      rule: finish.rule,
    });
  if (facts.effect === 'applied') return build(outcomeOf('operation_applied'));
  if (facts.effect === 'unknown') {
    if (finish && finish.remote_effect !== 'applied')
      return build({
        category: finish.category,
        retry: finish.retry,
        remote_effect: finish.remote_effect,
        retry_after_ms: null,
        rule: finish.rule,
      });
    // Started and never finished (the bytes may have left), or known only from an earlier one.
    return build(
      outcomeOf('operation_unknown', { facts: { ...WORST_CASE_FACTS, lookup: facts.lookup } }),
    );
  }
  if (finish)
    return build({
      category: finish.category,
      retry: finish.retry,
      remote_effect: 'none',
      retry_after_ms: null,
      rule: finish.rule,
    });
  return build(
    outcomeOf('operation_not_applied', { category: view.resolution?.category ?? 'local_failure' }),
  );
}

function remoteRefsOf(view: OperationView): string[] {
  const refs = new Set<string>();
  for (const a of view.attempts)
    if (a.finish?.response?.remote_ref) refs.add(a.finish.response.remote_ref);
  for (const o of view.observations) for (const r of o.remote_refs) refs.add(r);
  for (const r of view.resolution?.remote_refs ?? []) refs.add(r);
  return [...refs];
}

/**
 * `after_delay` always carries its delay: a claim rebuilt from the ledger (which records the
 * directive, not the delay) says 0 — the delay the destination asked for was counted from an
 * earlier answer.
 */
function withDelay(claim: Claim): Claim {
  return claim.retry === 'after_delay' && claim.retry_after_ms === null
    ? { ...claim, retry_after_ms: 0 }
    : claim;
}

/**
 * Attempts left for the operation (never below 0). The hard limit counts the attempts that may
 * have reached the destination (started and not proven `not_sent`): it bounds how many times the
 * intent may have been delivered. One run still stops its own retries after `attempt_budget`
 * attempts of any kind.
 */
export function budgetLeft(
  action: Pick<AnyAction, 'attempt_budget'>,
  view: Pick<OperationView, 'attempts'>,
): number {
  const delivered = view.attempts.filter(
    (a) => a.finish === null || a.finish.dispatch_state !== 'not_sent',
  ).length;
  return Math.max(0, (action.attempt_budget ?? DEFAULT_ATTEMPT_BUDGET) - delivered);
}

/**
 * A lookup after the last attempt that answered and found nothing bound to the operation (absent
 * without a usable key, or ambiguous): asking it again shows the same, so a person decides.
 */
function lookedUpInVain(view: OperationView): boolean {
  const last = view.attempts.at(-1);
  const after = last ? (last.finish?.finished_seq ?? last.started_seq) : 0;
  const lookup = view.observations.filter((o) => o.source === 'lookup' && o.seq > after).at(-1);
  return lookup?.verdict === 'absent' || lookup?.verdict === 'ambiguous';
}

/**
 * One answer per state: the next step the operation stands at is what a call with its
 * operation_id would do now — the same for the call that got here, for `operation_status`, for a
 * refusal and for `reconcile_operation`. An invitation to call again (\`allowed\`,
 * \`after_delay\`) stands only while such a call would send: the licence raised to the operation
 * (core/operation-outcome.ts) and the attempt budget allow it; otherwise it is a lookup, or a person.
 */
function nextStep(
  claim: Claim,
  action: Described | Known,
  view: OperationView,
  facts: OperationFacts,
): Claim {
  const unknown = claim.remote_effect === 'unknown';
  if (claim.retry === 'reconcile_first' && unknown && lookedUpInVain(view))
    return { ...claim, retry: retryOf('looked_up_in_vain') };
  if (claim.retry !== 'allowed' && claim.retry !== 'after_delay') return claim;
  if (!isKnown(action) || claim.remote_effect === 'applied') return claim;
  const f = view.attempts.at(-1)?.finish;
  if (!f) return claim;
  const contract = contractOf(action);
  const lic = operationLicence(
    licence(
      { ...f, rule: isRuleId(f.rule) ? f.rule : 'unreadable_evidence' },
      {
        read_only: classRule(action.class).read_only,
        idempotency_honoured: contract.idempotency_honoured,
      },
      false,
    ),
    facts,
  );
  const left = budgetLeft(action as unknown as AnyAction, view);
  if (lic && left > 0) return claim;
  return {
    ...claim,
    retry: retryOf('retry_unlicensed', {
      ...WORST_CASE_FACTS,
      lookup: unknown && facts.lookup && !lookedUpInVain(view),
    }),
    retry_after_ms: null,
  };
}

/**
 * A call with this operation_id on a gateway that does not own it sends nothing until the
 * owner's lease lapses (then that gateway takes it over): an invitation to call again waits out
 * the lease's real remainder; an owner that holds no lease that could lapse is never displaced by
 * a call, so a person (or \`candor recover\` with the owner's configuration) decides.
 */
function heldBack(claim: Claim, held: OwnerHold | null, now: number): Claim {
  if (!held || (claim.retry !== 'allowed' && claim.retry !== 'after_delay')) return claim;
  if (held.until === null)
    return { ...claim, retry: retryOf('owner_holds_unleased'), retry_after_ms: null };
  return { ...claim, retry: retryOf('owner_holds'), retry_after_ms: Math.max(1, held.until - now) };
}

/**
 * The store refused this gateway's write (fencing): another gateway took the operation over while
 * this one stalled or waited on an answer, so nothing more was sent from here and this gateway does
 * not settle it. What it learned is on record (as its attempt's result, or as an observation when
 * the attempt's own record was refused); the new owner may have sent since, so the envelope states
 * the operation as the ledger holds it, never this attempt's answer alone.
 */
export function ownerLost(
  ctx: EngineContext,
  action: AnyAction | EngineAction<never, never>,
  view: OperationView,
  why: string,
): Envelope {
  return operationEnvelope(ctx, action, view, {
    refusal: {
      code: 'owner_lost',
      sentence: `This gateway no longer owns operation ${view.operation_id} (${why}), so it sent nothing more and does not settle it; what it learned is on record, and operation_status says what is known.`,
    },
  });
}

/** The named arguments of `resolveOrOwnerLost`. */
export interface ResolveOrOwnerLostOptions {
  state: 'failed' | 'cancelled';
  category: Category;
  by: ResolvedBy;
}

/**
 * Records that nothing was applied (`failed` or `cancelled`). Null when written; when the store
 * fenced it (another gateway took the operation over meanwhile, and may have sent since), the
 * `owner_lost` envelope to answer instead, stating the operation as the ledger holds it now.
 */
export async function resolveOrOwnerLost(
  ctx: EngineContext,
  action: AnyAction | EngineAction<never, never>,
  view: OperationView,
  { state, category, by }: ResolveOrOwnerLostOptions,
): Promise<Envelope | null> {
  const fenced = await ctx.resolve(view, { state, category, by, remoteRefs: [] });
  if (fenced === null) return null;
  return ownerLost(ctx, action, (await ctx.load(view.operation_id)) ?? view, fenced);
}
