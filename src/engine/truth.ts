// What the agent is told about an operation follows the operation (core/fold.ts and
// core/operation-outcome.ts), never one attempt: the facts an action offers (an honoured key, a
// lookup, a read) meet the fold of the operation's events here, for every envelope the engine
// builds — after an attempt, on a refusal, and for `operation_status`.
import type { Envelope } from '../core/envelope.js';
import {
  operationClaim,
  unknownNextStep,
  type Claim,
  type OperationFacts,
} from '../core/operation-outcome.js';
import { classRule } from '../core/rules.js';
import type { OperationView } from '../ledger/projection.js';
import { contractOf, type EngineAction } from './action.js';
import type { EngineContext, RefusalCode } from './context.js';

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

/** The envelope after an attempt that said `claim`, given the operation as it stands now. */
export function attemptEnvelope(
  ctx: EngineContext,
  action: Described | Known,
  view: OperationView,
  claim: Claim,
  extra: { data: unknown; diagnosticsRef: string | null },
): Envelope {
  const out = operationClaim(withDelay(claim), factsOf(action, view));
  return ctx.envelopeOf({
    action,
    view,
    outcome: out.claim,
    data: extra.data,
    diagnosticsRef: extra.diagnosticsRef,
    earlier: out.earlier ? { kind: out.earlier, attempt_category: claim.category } : undefined,
  });
}

/**
 * The operation as its events establish it: what `operation_status` answers, and what a refused
 * call on an existing operation reports (with the refusal's code and sentence).
 */
export function operationEnvelope(
  ctx: EngineContext,
  action: Described | Known,
  view: OperationView,
  refusal?: { code: RefusalCode; sentence: string; data?: Record<string, unknown> },
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
      outcome: out.claim,
      data: refusal ? { ...refusal.data, remote_refs: remoteRefsOf(view) } : null,
      diagnosticsRef,
      earlier: out.earlier ? { kind: out.earlier, attempt_category: claim.category } : undefined,
      refusal: refusal ? { code: refusal.code, sentence: refusal.sentence } : undefined,
    });
  };
  if (view.state === 'duplicate_effect_confirmed')
    return build({
      category: 'duplicate_effect',
      retry: 'escalate',
      remote_effect: 'applied',
      retry_after_ms: null,
    });
  if (facts.effect === 'applied')
    return build({
      category: 'succeeded',
      retry: 'never',
      remote_effect: 'applied',
      retry_after_ms: null,
    });
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
    return build({
      category: 'outcome_unknown',
      retry: unknownNextStep(facts),
      remote_effect: 'unknown',
      retry_after_ms: null,
    });
  }
  if (finish)
    return build({
      category: finish.category,
      retry: finish.retry,
      remote_effect: 'none',
      retry_after_ms: null,
      rule: finish.rule,
    });
  return build({
    category: view.resolution?.category ?? 'local_failure',
    retry: 'never',
    remote_effect: 'none',
    retry_after_ms: null,
  });
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
