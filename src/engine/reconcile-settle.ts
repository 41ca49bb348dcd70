// What a reconciliation did, what a lookup that found the effect settles, and the answer that
// leaves the operation unknown for a person: shared by the reconciliation of every transport
// (reconcile-records.ts for HTTP and proxied MCP tools, reconcile-ssh.ts for SSH), kept apart
// so that neither imports the other.
import type { OperationView } from '../ledger/projection.js';
import type { Envelope } from '../core/envelope.js';
import { outcomeOf } from '../core/rule-table.js';
import { unknownOutcome, type AnyAction, type EngineContext } from './context.js';

/** What a reconciliation really did, for callers that must report it (recover). */
export type ReconcileStep =
  | 'found'
  | 'duplicates'
  | 'absent_retried'
  | 'absent'
  | 'lookup_failed'
  /** Records matched, none bound to the operation (lookup_ambiguous): still unknown. */
  | 'ambiguous'
  | 'gate_locked'
  | 'credential_unavailable'
  | 'nothing_sent'
  | 'no_lookup'
  | 'ssh';

export interface Reconciled {
  step: ReconcileStep;
  envelope: Envelope;
  /**
   * What the lookup itself met, for a step that learned nothing decisive (failed, absent without
   * a usable key, ambiguous, no lookup): `reconcile_operation` says it before the operation's own
   * answer, which is then exactly what `operation_status` says.
   */
  lead?: string;
}

/** The named arguments of `settleFromLookup`. */
export interface SettleFromLookupOptions {
  refs: string[];
  firstRecord: unknown;
}

/**
 * What a lookup that found the effect settles, for every transport: one record → `succeeded`
 * (its record is the data), several → `duplicate_effect` for a person; none → null (the caller
 * decides what an absent effect means for its transport).
 */
export async function settleFromLookup(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  { refs, firstRecord }: SettleFromLookupOptions,
): Promise<Reconciled | null> {
  if (refs.length === 1)
    return {
      step: 'found',
      envelope: await settleApplied(ctx, action, view, {
        category: 'succeeded',
        refs,
        data: firstRecord,
      }),
    };
  if (refs.length >= 2)
    return {
      step: 'duplicates',
      envelope: await settleApplied(ctx, action, view, {
        category: 'duplicate_effect',
        refs,
        data: {
          remote_refs: refs,
        },
      }),
    };
  return null;
}

/** The named arguments of `settleApplied`. */
export interface SettleAppliedOptions {
  category: 'succeeded' | 'duplicate_effect';
  refs: string[];
  data: unknown;
}

/**
 * Resolves an operation that reconciliation showed applied — once (`succeeded`, nothing more to
 * do) or more than once (`duplicate_effect`, for a person) — and answers its envelope. Every
 * transport's reconciliation settles through here.
 */
export async function settleApplied(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  { category, refs, data }: SettleAppliedOptions,
): Promise<Envelope> {
  const once = category === 'succeeded';
  await ctx.resolve(view, {
    state: once ? 'succeeded' : 'duplicate_effect_confirmed',
    category,
    by: 'reconciliation',
    remoteRefs: refs,
  });
  return ctx.envelopeOf({
    action,
    view,
    // Found by a lookup: applied, whatever the action's class (the row is the lookup's finding).
    outcome: {
      ...outcomeOf(once ? 'reconciled_found' : 'reconciled_duplicates'),
      category,
      remote_effect: 'applied',
    },
    data,
    diagnosticsRef: null,
  });
}

/** The operation as it stands, unknown, for a person to decide (`data` says what was met). */
export function personDecides(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  data: unknown = null,
): Envelope {
  return ctx.envelopeOf({
    action,
    view,
    outcome: unknownOutcome('unknown_person_decides'),
    data,
    diagnosticsRef: null,
  });
}
