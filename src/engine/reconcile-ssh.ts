// SSH reconciliation: the remote marker is the evidence of whether the command ran, and for
// set_state actions (which run without a marker) the convergence check, run through the wrapper
// under `sh -c` exactly as in the run.
//
// Rules (never turn missing evidence into a second run):
// - a settled operation is never re-run, whatever the marker says now;
// - the check and any new attempt use the real input (held in memory by the owner; a recorded
//   copy only when nothing in it was redacted and it rebuilds the last attempt's request);
// - "marker absent" licenses a new attempt only when the ledger proves that no earlier attempt
//   reached the wrapper (never sent, or the wrapper's refusal was received) and the request —
//   command, check, host, user, marker directory — is the one the last attempt recorded;
// - anything else is `escalate`, with the reason in an observation and in the envelope's data.
import { classify } from '../core/classify.js';
import type { Envelope } from '../core/envelope.js';
import { retryOf } from '../core/rule-table.js';
import type { OperationState } from '../core/vocabulary.js';
import { UNRESOLVED_STATES, type OperationView } from '../ledger/projection.js';
import { REDACTED } from '../core/redact.js';
import { EngineErrorCode } from '../core/error-code.js';
import type { Evidence } from '../core/evidence.js';
import type { Looked, SshFound } from '../core/transport.js';
import { contractOf, type EngineAction, type SshDestination } from './action.js';
import { unknownOutcome, type AnyAction, type EngineContext } from './context.js';
import { licensedAttempt } from './drive.js';
import { lookupSsh } from './lookup.js';
import { envelopeFromView } from './operation.js';
import { personDecides, settleApplied } from './reconcile-settle.js';
import { prepare } from './request.js';
import { rememberedSshInput, sshSecretEnv } from './ssh-action.js';

type RealInput = { ok: true; input: unknown } | { ok: false; code: string; reason: string };

const isSettled = (state: OperationState | null): boolean =>
  state !== null && !UNRESOLVED_STATES.has(state);

function holdsRedaction(value: unknown): boolean {
  return JSON.stringify(value ?? null).includes(REDACTED);
}

/** The real input of the operation, or why it is not available (see the file comment). */
async function realInput(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
): Promise<RealInput> {
  const mem = rememberedSshInput(ctx, view.operation_id);
  let input: unknown;
  if (mem.found) {
    input = mem.input;
  } else {
    const recorded = await ctx.paramsOf(view.operation_id);
    const dest = action.destination;
    if ((dest.kind === 'ssh' && dest.secret_env) || holdsRedaction(recorded)) {
      return {
        ok: false,
        code: 'real_input_unavailable',
        reason:
          'the real input is not available here (only the owning process keeps it; the ledger holds a redacted copy), so nothing is checked or run with a placeholder',
      };
    }
    input = recorded;
  }
  const last = view.attempts.at(-1);
  if (last) {
    const a = action as EngineAction<unknown, unknown>;
    let now: string;
    try {
      now = prepare(ctx, a, input, view).fingerprint;
    } catch {
      now = '';
    }
    if (now !== last.request_fingerprint) {
      return {
        ok: false,
        code: 'request_changed',
        reason:
          'the request rebuilt now (command, check, host, port, user or marker directory) differs from the one the last attempt recorded; its marker may be elsewhere',
      };
    }
  }
  return { ok: true, input };
}

/** The ledger proves that no attempt reached the wrapper: each finished as not sent or refused. */
function provenNotReached(view: OperationView): boolean {
  return view.attempts.every(
    (a) =>
      a.finish !== null &&
      (a.finish.dispatch_state === 'not_sent' || a.finish.rule === 'exit_nonzero_not_started'),
  );
}

/** The named arguments of `escalate`. */
interface EscalateOptions {
  code: string;
  reason: string;
}

function escalate(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  { code, reason }: EscalateOptions,
): Envelope {
  return personDecides(ctx, action, view, { escalation: { code, reason } });
}

const NOT_REACHED_LICENCE = {
  reason: 'connection_not_established',
  decision: 'not_sent',
} as const;

/** The named arguments of `convergenceCheck`. */
interface ConvergenceCheckOptions {
  decl: SshDestination;
  real: RealInput;
  checkedAt: number;
  signal: AbortSignal | undefined;
}

async function convergenceCheck(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  { decl, real, checkedAt, signal }: ConvergenceCheckOptions,
): Promise<Envelope> {
  const { observe, envelopeOf } = ctx;
  const checked = `ssh ${decl.host_ref} convergence check`;
  if (!decl.check)
    return escalate(ctx, action, view, {
      code: 'no_check',
      reason: 'the action declares no convergence check',
    });
  if (!real.ok) {
    await observe(view, {
      source: 'post_write_check',
      checked: `${checked} (not run)`,
      checked_at: checkedAt,
      matches: 0,
      remote_refs: [],
      conclusion: real.reason,
      state_after: view.state ?? 'open',
    });
    return escalate(ctx, action, view, { code: real.code, reason: real.reason });
  }
  const r = await runSshCheck(ctx, decl, real.input, signal);
  // An answer to another lookup than the check is no answer: nothing learned.
  if (r.verdict === 'failed' || (r.verdict === 'found' && r.found.op !== 'check')) {
    if (r.verdict === 'failed' && r.refusal)
      return escalate(ctx, action, view, {
        code: r.refusal,
        reason: `the wrapper refused the check (${r.refusal})`,
      });
    return envelopeOf({
      action,
      view,
      outcome: unknownOutcome('unknown_lookup_next'),
      data: null,
      diagnosticsRef: null,
    });
  }
  const converged = r.verdict === 'found';
  const rerun = !converged && provenNotReached(view);
  await observe(view, {
    source: 'post_write_check',
    checked,
    checked_at: checkedAt,
    matches: converged ? 1 : 0,
    remote_refs: [],
    conclusion: converged
      ? 'the desired state holds'
      : rerun
        ? 'the desired state does not hold and no earlier attempt reached the wrapper: a new attempt'
        : 'the desired state does not hold; the interrupted command may still have had partial effects, so a person decides',
    state_after: converged ? 'succeeded' : (view.state ?? 'open'),
  });
  if (converged)
    return settleApplied(ctx, action, view, {
      category: 'succeeded',
      refs: [],
      data: { exit_status: 0, stdout: '' },
    });
  if (rerun)
    return licensedAttempt(ctx, action, real.input, {
      view: (await ctx.load(view.operation_id))!,
      licence: NOT_REACHED_LICENCE,
      by: 'reconciliation',
      signal,
    });
  return escalate(ctx, action, view, {
    code: 'not_converged',
    reason: 'the convergence check fails after an attempt that may have run',
  });
}

/** The named arguments of `reconcileSshOperation`. */
export interface ReconcileSshOperationOptions {
  view: OperationView;
  signal?: AbortSignal | undefined;
}

export async function reconcileSshOperation(
  ctx: EngineContext,
  action: AnyAction,
  decl: SshDestination,
  { view, signal }: ReconcileSshOperationOptions,
): Promise<Envelope> {
  const { clock, observe, load, resolve, envelopeOf } = ctx;
  // A settled operation is never re-run (nor re-checked into another state) by reconciliation.
  if (isSettled(view.state)) return envelopeFromView(ctx, action, view);
  const checkedAt = clock.now();
  const real = await realInput(ctx, action, view);
  // Another host, user or marker directory than the attempt used: nothing found or missing there
  // says anything about this operation, so nothing is looked up there.
  if (!real.ok && real.code === 'request_changed')
    return escalate(ctx, action, view, { code: real.code, reason: real.reason });
  if (action.class === 'set_state')
    return convergenceCheck(ctx, action, view, { decl, real, checkedAt, signal });
  const looked = await lookupSsh(
    ctx,
    {
      kind: 'ssh',
      op: 'marker',
      id: view.operation_id,
      host_ref: decl.host_ref,
      operation_id: view.operation_id,
    },
    signal,
  );
  const found = looked.verdict === 'found' && looked.found.op === 'marker' ? looked.found : null;
  // An answer to another lookup than the marker is no answer: nothing learned.
  if (looked.verdict === 'failed' || (looked.verdict === 'found' && !found)) {
    if (looked.verdict === 'failed' && looked.refusal) {
      return escalate(ctx, action, view, {
        code: looked.refusal,
        reason: `the wrapper refused to read the marker (${looked.refusal}); a person must fix the marker directory`,
      });
    }
    return envelopeOf({
      action,
      view,
      outcome: unknownOutcome('unknown_lookup_next'),
      data: null,
      diagnosticsRef: null,
    });
  }
  const checked = `ssh ${decl.host_ref} marker ${view.operation_id}`;
  if (!found) {
    const proven = provenNotReached(view);
    const go = proven && real.ok;
    const conclusion = go
      ? 'no marker, and the ledger proves no earlier attempt reached the wrapper: a new attempt under the same operation id'
      : !proven
        ? 'no marker here, but the ledger does not prove that the earlier attempt never reached the wrapper (the marker may have been removed, or the attempt used another location), so a person decides'
        : `no marker, but ${real.ok ? '' : real.reason}`;
    await observe(view, {
      source: 'marker',
      checked,
      checked_at: checkedAt,
      matches: 0,
      remote_refs: [],
      conclusion,
      state_after: view.state ?? 'open',
    });
    if (go) {
      return licensedAttempt(ctx, action, real.input, {
        view: (await load(view.operation_id))!,
        licence: NOT_REACHED_LICENCE,
        by: 'reconciliation',
        signal,
      });
    }
    if (!proven)
      return escalate(ctx, action, view, { code: 'marker_absent_unproven', reason: conclusion });
    return escalate(ctx, action, view, {
      code: real.ok ? 'unknown' : real.code,
      reason: conclusion,
    });
  }
  const { marker: m, stdout, stdout_truncated } = found;
  const output = { stdout, ...(stdout_truncated ? { stdout_truncated } : {}) };
  const c = classify(looked.evidence, contractOf(action));
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
      : m.state === 'started'
        ? `the marker records a start without completion; the process is ${m.process}`
        : 'the marker was claimed but the command did not start';
  await observe(view, {
    source: 'marker',
    checked,
    checked_at: checkedAt,
    matches: 1,
    remote_refs: [],
    conclusion,
    state_after: stateAfter,
  });
  if (m.state === 'completed') {
    if (stateAfter !== 'unknown')
      await resolve(view, {
        state: stateAfter,
        category: c.category,
        by: 'reconciliation',
        remoteRefs: [],
      });
    // The marker is the final word: a completed run that failed is for a person, not another lookup.
    return envelopeOf({
      action,
      view,
      outcome: c.category === 'succeeded' ? c : { ...c, retry: retryOf('marker_final_failure') },
      data: c.category === 'succeeded' ? { exit_status: m.exit_status, ...output } : null,
      diagnosticsRef: null,
    });
  }
  if (m.state === 'started' && m.process === 'alive')
    return envelopeOf({
      action,
      view,
      outcome: unknownOutcome('unknown_lookup_next'),
      data: null,
      diagnosticsRef: null,
    });
  return escalate(ctx, action, view, { code: `marker_${m.state}`, reason: conclusion });
}

/** The set_state convergence check alone, under `sh -c` with the secret environment. */
async function runSshCheck(
  ctx: EngineContext,
  decl: SshDestination,
  input: unknown,
  signal: AbortSignal | undefined,
): Promise<Looked<SshFound>> {
  const notRun = (evidence: Evidence): Looked<SshFound> => ({
    verdict: 'failed',
    evidence,
    phases: { started_at: ctx.clock.now(), finished_at: ctx.clock.now() },
  });
  if (!decl.check) return notRun({ phase: 'not_sent', error_code: EngineErrorCode.no_check });
  const secrets = await sshSecretEnv(ctx.options.resolveSshSecret, ctx.redactor, decl, input);
  if (!secrets.ok) return notRun(secrets.evidence);
  const secretEnv = secrets.env;
  return lookupSsh(
    ctx,
    {
      kind: 'ssh',
      op: 'check',
      id: '',
      host_ref: decl.host_ref,
      check: decl.check(input),
      deadline_ms: decl.deadline_ms,
      ...(secretEnv ? { secret_env: secretEnv } : {}),
    },
    signal,
  );
}
