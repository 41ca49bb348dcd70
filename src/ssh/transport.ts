// SSH transport: runs one attempt of an operation on an inventory host and returns *evidence*
// (src/core/evidence.ts) for `classify()`, never a verdict. The three honest answers:
//   - stopped before the exec request (refused, auth rejected, host key mismatch, key missing)
//     -> phase `not_sent`;
//   - exec request sent, no exit status (transport lost, abort, deadline) -> `request_sent`:
//     the outcome is unknown and only the remote marker can tell;
//   - exit status received -> `response_complete` with `exit_status` (255 is an exit status like
//     any other: ssh2 reports transport loss as a closed channel without one).
import type { Contract, Evidence } from '../core/evidence.js';
import { systemRandom, type Clock, type Random } from '../core/time.js';
import type { ActionClass } from '../core/vocabulary.js';
import { execOnce, type ExecObservation, type SshPhaseName, type SshPhases } from './exec.js';
import type { HostEntry, ResolveKey } from './inventory.js';
import {
  OPERATION_ID_PATTERN,
  parseWrapperOutput,
  wrapperExecString,
  type MarkerState,
  type WrapperMode,
  type WrapperReport,
} from './wrapper.js';

/** How an action class is run remotely. */
export type SshFamilyMode = 'raw' | 'converge' | 'marker';

/**
 * `read` runs the command as is (repeatable, no marker); `set_state` runs it only when its
 * convergence `check` fails and re-checks after; every other class runs under the marker.
 */
export function familyMode(family: ActionClass): SshFamilyMode {
  if (family === 'read') return 'raw';
  if (family === 'set_state') return 'converge';
  return 'marker';
}

/**
 * The declared contract of an SSH action for `classify()`. Marker families and set_state can be
 * looked up (reconcileSsh / the check), so an unknown outcome yields `reconcile_first`.
 */
export function sshContract(family: ActionClass): Contract {
  return { action_class: family, idempotency_honoured: false, reconciliation: family !== 'read' };
}

interface CommonOptions {
  host: HostEntry;
  resolveKey: ResolveKey;
  signal?: AbortSignal | undefined;
  /** Budget in ms for the whole attempt. */
  deadlineMs?: number | undefined;
  clock?: Clock | undefined;
  /** Source of the per-call nonce that marks wrapper status lines. */
  random?: Random | undefined;
  onPhase?: ((phase: SshPhaseName) => void) | undefined;
}

export interface RunSshOptions extends CommonOptions {
  command: string;
  operationId: string;
  family: ActionClass;
  /** set_state only: exits 0 exactly when the desired state holds. */
  check?: string | undefined;
}

export interface SshRunResult {
  evidence: Evidence;
  /** The command's output (recorded output when an earlier run answered). */
  stdout: string;
  stderr: string;
  /** What the wrapper did: ran the command, answered from an earlier run, or nothing usable. */
  wrapper: 'ran' | 'existing' | 'converged_before' | 'refused' | 'none' | 'unreadable';
  /** Set when an earlier call's marker answered instead of a new run. */
  marker?: MarkerState;
  /** set_state: the convergence check's status after the command ran. */
  check_status?: number;
  phases: SshPhases;
}

const notSent = (errorCode: string, phases: SshPhases = {}): SshRunResult => ({
  evidence: { phase: 'not_sent', local_error: 'other', error_code: errorCode },
  stdout: '',
  stderr: '',
  wrapper: 'none',
  phases,
});

function nonceFrom(random: Random): string {
  return Buffer.from(random.bytes(12)).toString('hex');
}

/** Evidence when no exit status arrived (or nothing was sent); undefined when one did. */
function transportEvidence(obs: ExecObservation): Evidence | undefined {
  const code = obs.errorCode === undefined ? {} : { error_code: obs.errorCode };
  if (!obs.execSent) return { phase: 'not_sent', local_error: obs.localError ?? 'other', ...code };
  if (obs.exitCode !== null) return undefined;
  if (obs.exitSignal !== null) {
    // The remote process was killed by a signal: it ran, how far is unknown.
    return {
      phase: 'response_cut',
      exit_status: null,
      error_code: `exit_signal_${obs.exitSignal.replace(/^SIG/, '')}`,
    };
  }
  if (obs.channelClosed && obs.localError === undefined) {
    return { phase: 'response_cut', exit_status: null, error_code: 'no_exit_status' };
  }
  return {
    phase: 'request_sent',
    exit_status: null,
    local_error: obs.localError ?? 'connection_closed',
    ...code,
  };
}

/** Evidence for a wrapper report that came with exit status `exit`. */
function reportEvidence(report: WrapperReport, exit: number): Evidence {
  if (report.exit !== exit) {
    return {
      phase: 'response_complete',
      exit_status: exit,
      response_misframed: true,
      error_code: 'wrapper_exit_mismatch',
    };
  }
  switch (report.kind) {
    case 'error':
      // The wrapper refused before running anything: documented "not started".
      return {
        phase: 'response_complete',
        exit_status: exit,
        contract_check: 'documented_failure',
        error_code: `wrapper_${report.error ?? 'error'}`,
      };
    case 'converged_before':
      return {
        phase: 'response_complete',
        exit_status: 0,
        idempotent_replay: true,
        contract_check: 'valid',
      };
    case 'ran':
      return {
        phase: 'response_complete',
        exit_status: exit,
        contract_check:
          report.check_status === undefined || report.check_status === 0 ? 'valid' : 'violated',
      };
    case 'existing':
    case 'marker':
      return report.marker
        ? markerEvidence(report.marker)
        : { phase: 'request_sent', exit_status: null };
  }
}

/**
 * What a marker state means as evidence about the operation:
 * - `completed` -> the recorded exit status, marked as a replay (nothing ran now);
 * - `started` / `claimed` -> still `request_sent`: a start without completion is an unknown outcome
 *   whether the process still runs or is gone;
 * - `absent` -> `not_sent`: the wrapper never claimed the id, so the command never started, and a
 *   run under the same operation id stays safe (the marker prevents a second execution).
 */
export function markerEvidence(marker: MarkerState): Evidence {
  switch (marker.state) {
    case 'completed':
      return {
        phase: 'response_complete',
        exit_status: marker.exit_status,
        idempotent_replay: true,
        contract_check: 'valid',
      };
    case 'started':
      return {
        phase: 'request_sent',
        exit_status: null,
        error_code: `marker_started_${marker.process}`,
      };
    case 'claimed':
      return { phase: 'request_sent', exit_status: null, error_code: 'marker_claimed' };
    case 'absent':
      return { phase: 'not_sent', error_code: 'marker_absent', reconciliation_matches: 0 };
  }
}

/** Runs one attempt. Never throws for expected failures; the evidence says how far it got. */
export async function runSsh(opts: RunSshOptions): Promise<SshRunResult> {
  if (!OPERATION_ID_PATTERN.test(opts.operationId)) return notSent('invalid_operation_id');
  const mode = familyMode(opts.family);
  if (mode === 'converge' && (opts.check === undefined || opts.check === '')) {
    return notSent('missing_convergence_check');
  }
  const nonce = nonceFrom(opts.random ?? systemRandom);
  const wrapperMode: WrapperMode = mode === 'converge' ? 'converge' : 'run';
  const execString =
    mode === 'raw'
      ? opts.command
      : wrapperExecString({
          mode: wrapperMode,
          nonce,
          markerDir: opts.host.marker_dir ?? '',
          operationId: opts.operationId,
          command: opts.command,
          check: opts.check ?? '',
        });
  const obs = await execOnce({ ...opts, command: execString });
  const base = { phases: obs.phases };
  const cut = transportEvidence(obs);
  if (cut !== undefined || obs.exitCode === null) {
    return {
      ...base,
      evidence: cut ?? { phase: 'request_sent', exit_status: null },
      stdout: mode === 'raw' ? obs.stdout.toString('utf8') : '',
      stderr: mode === 'raw' ? obs.stderr.toString('utf8') : '',
      wrapper: 'none',
    };
  }
  const exit = obs.exitCode;
  if (mode === 'raw') {
    return {
      ...base,
      evidence: { phase: 'response_complete', exit_status: exit, contract_check: 'unchecked' },
      stdout: obs.stdout.toString('utf8'),
      stderr: obs.stderr.toString('utf8'),
      wrapper: 'none',
    };
  }
  const parsed = parseWrapperOutput(obs.stdout, nonce);
  if (!parsed.ok) {
    return {
      ...base,
      evidence: {
        phase: 'response_complete',
        exit_status: exit,
        response_misframed: true,
        error_code: `wrapper_${parsed.failure}`,
      },
      stdout: '',
      stderr: obs.stderr.toString('utf8'),
      wrapper: 'unreadable',
    };
  }
  const report = parsed.value;
  const result: SshRunResult = {
    ...base,
    evidence: reportEvidence(report, exit),
    stdout: report.stdout.toString('utf8'),
    stderr: report.stderr.toString('utf8'),
    wrapper:
      report.kind === 'error' ? 'refused' : report.kind === 'marker' ? 'existing' : report.kind,
  };
  if (report.marker) result.marker = report.marker;
  if (report.check_status !== undefined) result.check_status = report.check_status;
  return result;
}

export interface ReconcileSshOptions extends CommonOptions {
  operationId: string;
}

export type SshReconcileResult =
  | {
      ok: true;
      value: {
        marker: MarkerState;
        /** `markerEvidence(marker)`: what the marker says about the operation. */
        evidence: Evidence;
        /** Recorded output of a completed run. */
        stdout: string;
        stderr: string;
        phases: SshPhases;
      };
      failure?: never;
    }
  | {
      ok: false;
      /** The lookup itself failed; this evidence is about the lookup, NOT about the operation. */
      failure: { lookup_evidence: Evidence; phases: SshPhases };
      value?: never;
    };

/** Reads the operation's marker on the host without running anything. */
export async function reconcileSsh(opts: ReconcileSshOptions): Promise<SshReconcileResult> {
  if (!OPERATION_ID_PATTERN.test(opts.operationId)) {
    return {
      ok: false,
      failure: { lookup_evidence: notSent('invalid_operation_id').evidence, phases: {} },
    };
  }
  const nonce = nonceFrom(opts.random ?? systemRandom);
  const command = wrapperExecString({
    mode: 'reconcile',
    nonce,
    markerDir: opts.host.marker_dir ?? '',
    operationId: opts.operationId,
  });
  const obs = await execOnce({ ...opts, command });
  const cut = transportEvidence(obs);
  if (cut !== undefined || obs.exitCode === null) {
    return {
      ok: false,
      failure: { lookup_evidence: cut ?? { phase: 'request_sent' }, phases: obs.phases },
    };
  }
  const parsed = parseWrapperOutput(obs.stdout, nonce);
  if (!parsed.ok || parsed.value.kind !== 'marker' || !parsed.value.marker) {
    return {
      ok: false,
      failure: {
        lookup_evidence: {
          phase: 'response_complete',
          exit_status: obs.exitCode,
          response_misframed: true,
          error_code: parsed.ok ? 'wrapper_unexpected_report' : `wrapper_${parsed.failure}`,
        },
        phases: obs.phases,
      },
    };
  }
  const marker = parsed.value.marker;
  return {
    ok: true,
    value: {
      marker,
      evidence: markerEvidence(marker),
      stdout: parsed.value.stdout.toString('utf8'),
      stderr: parsed.value.stderr.toString('utf8'),
      phases: obs.phases,
    },
  };
}
