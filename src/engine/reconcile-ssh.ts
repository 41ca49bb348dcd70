import { unknownOutcome } from './context.js';
// SSH reconciliation: the remote marker is the evidence of whether the command ran, and for
// set_state actions (which run without a marker) a convergence check run as a read.
import { classify } from '../core/classify.js';
import type { Envelope } from '../core/envelope.js';
import type { OperationState } from '../core/vocabulary.js';
import type { OperationView } from '../ledger/projection.js';
import { contractOf } from './action.js';
import type { AnyAction, EngineContext } from './context.js';
import { licensedAttempt } from './drive.js';
import { dispatchSsh, lookupSshMarker } from './ssh-action.js';

/** SSH: the remote marker is the evidence. Absent -> safe to run under the same operation id. */
async function convergenceCheck(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  decl: NonNullable<AnyAction['destination']['ssh']>,
  checkedAt: number,
): Promise<Envelope> {
  const { options, clock, observe, paramsOf, resolve, envelopeOf } = ctx;
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
  await observe(view, {
    source: 'post_write_check',
    checked: `ssh ${decl.host_ref} convergence check`,
    checked_at: checkedAt,
    matches: converged ? 1 : 0,
    remote_refs: [],
    conclusion: converged
      ? 'the desired state holds'
      : 'the desired state does not hold; the interrupted command may still have had partial effects, so a person decides',
    state_after: converged ? 'succeeded' : 'unknown',
  });
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

export async function reconcileSshOperation(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
): Promise<Envelope> {
  const { options, clock, observe, load, paramsOf, resolve, envelopeOf } = ctx;
  const decl = action.destination.ssh!;
  const checkedAt = clock.now();
  // set_state runs without a marker (it converges): an absent marker proves nothing there, so
  // the evidence is the convergence check, run as a read — never a second run of the command.
  if (action.class === 'set_state') return convergenceCheck(ctx, action, view, decl, checkedAt);
  const found = await lookupSshMarker(options.ssh, decl, view.operation_id);
  if (!found.ok) {
    return envelopeOf(action, view, unknownOutcome('reconcile_first'), null, null);
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
  await observe(view, {
    source: 'marker',
    checked: `ssh ${decl.host_ref} marker ${view.operation_id}`,
    checked_at: checkedAt,
    matches: m.state === 'absent' ? 0 : 1,
    remote_refs: [],
    conclusion,
    state_after: stateAfter,
  });
  if (m.state === 'completed') {
    if (stateAfter !== 'unknown') await resolve(view, stateAfter, c.category, 'reconciliation', []);
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
      ctx,
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
    unknownOutcome(alive ? 'reconcile_first' : 'escalate'),
    null,
    null,
  );
}
