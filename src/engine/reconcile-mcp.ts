// Reconciliation of a proxied upstream MCP tool: the configuration maps an upstream read tool and
// its arguments (e.g. `read_text_file {path}` for `write_file`) and a rule that counts the effects
// the answer shows. The lookup goes through the same transport as the attempts; what it found is
// an observation, never an attempt. No automatic retry follows an absent effect: upstream MCP
// servers honour no idempotency key, so a person (or the agent, knowingly) decides.
import type { OperationState } from '../core/vocabulary.js';
import type { OperationView } from '../ledger/projection.js';
import type { McpDestination } from './action.js';
import { type AnyAction, type EngineContext, unknownOutcome } from './context.js';
import { lookupMcp } from './lookup.js';
import { settleFromLookup, type Reconciled } from './reconcile-settle.js';

/** The named arguments of `reconcileMcpOperation`. */
export interface ReconcileMcpOperationOptions {
  view: OperationView;
  signal?: AbortSignal | undefined;
}

export async function reconcileMcpOperation(
  ctx: EngineContext,
  action: AnyAction,
  dest: McpDestination,
  { view, signal }: ReconcileMcpOperationOptions,
): Promise<Reconciled> {
  const { clock, ids, observe, paramsOf, envelopeOf } = ctx;
  const lookup = dest.reconciliation!;
  const params = await paramsOf(view.operation_id);
  let args: Record<string, unknown>;
  try {
    args = lookup.arguments(params);
  } catch {
    return {
      step: 'lookup_failed',
      envelope: {
        ...envelopeOf({
          action,
          view,
          outcome: unknownOutcome('unknown_person_decides'),
          data: null,
          diagnosticsRef: null,
        }),
        message: `The lookup was not sent (its arguments could not be built); whether ${action.subject} was applied is still unknown and a person must decide.`,
      },
    };
  }
  const checked = `${dest.upstream} ${lookup.tool}`;
  const checkedAt = clock.now();
  const looked = await lookupMcp(
    ctx,
    {
      kind: 'mcp',
      id: ids.mint('obs'),
      upstream: dest.upstream,
      tool: lookup.tool,
      arguments: args,
      deadline_ms: dest.deadline_ms,
      operation_caller:
        view.caller && view.caller.kind === 'token'
          ? { issuer: view.caller.issuer ?? null, subject: view.caller.subject }
          : null,
    },
    signal,
  );
  let matches: Array<{ ref: string; record: unknown }> | null = null;
  if (looked.verdict === 'found') {
    try {
      // A configured rule: a throw means "no usable answer", never an escape.
      matches = lookup.matches(looked.found, params);
      if (!Array.isArray(matches)) matches = null;
    } catch {
      matches = null;
    }
  }
  if (matches === null) {
    return {
      step: 'lookup_failed',
      envelope: envelopeOf({
        action,
        view,
        outcome: unknownOutcome('unknown_lookup_next'),
        data: null,
        diagnosticsRef: null,
      }),
    };
  }
  const refs = matches.map((m) => m.ref);
  const stateAfter: OperationState =
    refs.length === 1 ? 'succeeded' : refs.length >= 2 ? 'duplicate_effect_confirmed' : 'unknown';
  await observe(view, {
    source: 'lookup',
    checked,
    checked_at: checkedAt,
    matches: refs.length,
    remote_refs: refs,
    conclusion:
      refs.length === 1
        ? 'one matching effect: the operation took effect'
        : refs.length >= 2
          ? 'several matching effects: the effect happened more than once'
          : 'no matching effect; the upstream honours no idempotency key, so a retry could duplicate a late effect: a person decides',
    state_after: stateAfter,
  });
  // envelopeOf redacts the record it shows.
  const settled = await settleFromLookup(ctx, action, view, {
    refs,
    firstRecord: matches[0]?.record,
  });
  if (settled) return settled;
  return {
    step: 'absent',
    envelope: envelopeOf({
      action,
      view,
      outcome: unknownOutcome('unknown_person_decides'),
      data: null,
      diagnosticsRef: null,
    }),
  };
}
