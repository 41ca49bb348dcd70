import { unknownOutcome } from './context.js';
// Recovery after a restart: every unresolved operation is reconciled where the destination offers
// a lookup, retried where a retry cannot duplicate an effect, and otherwise handed to a person.
import type { Envelope } from '../core/envelope.js';
import type { RetryDecision } from '../core/vocabulary.js';
import type { OperationView } from '../ledger/projection.js';
import type { ActionDefinition } from './action.js';
import type { AnyAction, EngineContext } from './context.js';
import { licensedAttempt } from './drive.js';
import { reconcileOperation } from './reconcile.js';
import { recoverSshOperation } from './reconcile-ssh.js';

export interface RecoveryItem {
  operation_id: string;
  outcome: 'reconciled' | 'retried' | 'needs_person' | 'skipped';
  envelope: Envelope;
}

export async function recover(ctx: EngineContext): Promise<RecoveryItem[]> {
  const { ledger, actions, load, paramsOf, envelopeOf } = ctx;
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
    // SSH: settled through the remote marker (or the set_state check); see reconcile-ssh.ts.
    if (action.destination.ssh) {
      out.push({ operation_id: id, ...(await recoverSshOperation(ctx, action, view)) });
      continue;
    }
    if (action.destination.reconciliation) {
      out.push({
        operation_id: id,
        outcome: 'reconciled',
        envelope: await reconcileOperation(ctx, id),
      });
      continue;
    }
    const last = view.attempts.at(-1);
    const neverSent = view.attempts.every((a) => a.finish?.dispatch_state === 'not_sent');
    if (action.destination.idempotency?.honoured || action.class === 'read' || neverSent) {
      const params = await paramsOf(id);
      const env = await driveRecovery(ctx, action, view, params, last === undefined || neverSent);
      out.push({ operation_id: id, outcome: 'retried', envelope: env });
      continue;
    }
    out.push({
      operation_id: id,
      outcome: 'needs_person',
      envelope: envelopeOf(
        action,
        view,
        unknownOutcome('escalate'),
        null,
        last?.finish?.diagnostics_ref ?? null,
      ),
    });
  }
  return out;
}

async function driveRecovery(
  ctx: EngineContext,
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
  return licensedAttempt(ctx, a, params, view, licence, 'recovery');
}
