// SSH transport: runs one attempt of an operation on an inventory host and returns *evidence*
// (src/core/evidence.ts) for `classify()`, never a verdict. The three honest answers:
//   - stopped before the exec request (refused, auth rejected, host key mismatch, key missing)
//     -> phase `not_sent`;
//   - exec request sent, no exit status (transport lost, abort, deadline) -> `request_sent`:
//     the outcome is unknown and only the remote marker can tell;
//   - exit status received -> `response_complete` with `exit_status` (255 is an exit status like
//     any other: ssh2 reports transport loss as a closed channel without one).
import { reportedCode, SshErrorCode } from '../core/error-code.js';
import type { Contract, Evidence } from '../core/evidence.js';
import { OPERATION_ID_PATTERN } from '../core/ids.js';
import { systemRandom, type Clock, type Random } from '../core/time.js';
import type { ActionClass } from '../core/vocabulary.js';
import { execOnce, type ExecObservation, type SshPhaseName, type SshPhases } from './exec.js';
import type { HostEntry, ResolveKey } from './inventory.js';
import {
  DEFAULT_OUTPUT_CAP,
  parseWrapperOutput,
  WRAPPER_EXEC,
  wrapperCallProblem,
  wrapperRequest,
  type MarkerState,
  type WrapperCall,
  type WrapperMode,
  type WrapperReport,
} from './wrapper.js';

/** Evidence from this transport: its codes are SshErrorCode's. */
type SshEvidence = Evidence<SshErrorCode>;

/** wrapper.ts `wrapperCallProblem`'s codes: the wrapper call it would refuse to build. */
const INVALID_REQUEST: Readonly<Record<string, SshErrorCode>> = {
  bad_nonce: SshErrorCode.invalid_request_bad_nonce,
  bad_output_cap: SshErrorCode.invalid_request_bad_output_cap,
  bad_secret_env_name: SshErrorCode.invalid_request_bad_secret_env_name,
  nul_in_value: SshErrorCode.invalid_request_nul_in_value,
};
// A problem wrapper.ts names that is not listed above is still recorded as it names it (the
// scan in test/error-codes.test.ts fails until it is listed).
const invalidRequest = (problem: string): SshErrorCode =>
  INVALID_REQUEST[problem] ?? reportedCode(`invalid_request_${problem}`);

/** A wrapper report that could not be read, by wrapper.ts `parseWrapperOutput`'s failure. */
const UNREADABLE_REPORT = {
  no_report: SshErrorCode.wrapper_no_report,
  bad_line: SshErrorCode.wrapper_bad_line,
  bad_frame: SshErrorCode.wrapper_bad_frame,
  no_exit_line: SshErrorCode.wrapper_no_exit_line,
} as const satisfies Record<
  Extract<ReturnType<typeof parseWrapperOutput>, { ok: false }>['failure'],
  SshErrorCode
>;

/** How an action class is run remotely. */
export type SshFamilyMode = 'raw' | 'converge' | 'marker';

/**
 * `read` runs the command without a marker (repeatable); `set_state` runs it only when its
 * convergence `check` fails and re-checks after; every other class runs under the marker. All of
 * them run inside the wrapper, under `sh -c`, with stdin closed.
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
  /** Secret inputs: exported into the command's (and check's) environment, never on a command line. */
  secretEnv?: Readonly<Record<string, string>> | undefined;
  /** Bytes of stdout and of stderr kept (default 1 MiB); the rest is counted and dropped. */
  outputCap?: number | undefined;
}

export interface RunSshOptions extends CommonOptions {
  command: string;
  operationId: string;
  family: ActionClass;
  /** set_state only: exits 0 exactly when the desired state holds. */
  check?: string | undefined;
}

export interface SshRunResult {
  evidence: SshEvidence;
  /** The command's output (recorded output when an earlier run answered). */
  stdout: string;
  stderr: string;
  /** Bytes the command wrote past the output cap (counted, dropped). */
  stdout_dropped: number;
  stderr_dropped: number;
  /** What the wrapper did: ran the command, answered from an earlier run, or nothing usable. */
  wrapper: 'ran' | 'existing' | 'converged_before' | 'refused' | 'none' | 'unreadable';
  /** The refusal code (`marker_unsafe`, `missing_tools`, …) and what it names. */
  refusal?: { code: string; detail?: string };
  /** Set when an earlier call's marker answered instead of a new run. */
  marker?: MarkerState;
  /** set_state: the convergence check's status after the command ran. */
  check_status?: number;
  phases: SshPhases;
}

const notSent = (errorCode: SshErrorCode, phases: SshPhases = {}): SshRunResult => ({
  evidence: { phase: 'not_sent', local_error: 'other', error_code: errorCode },
  stdout: '',
  stderr: '',
  stdout_dropped: 0,
  stderr_dropped: 0,
  wrapper: 'none',
  phases,
});

/** Room for the wrapper's report: two capped frames plus status lines. */
const reportRoom = (cap: number): number => 2 * cap + 64 * 1024;

async function callWrapper(
  opts: CommonOptions,
  call: Omit<WrapperCall, 'nonce' | 'markerDir' | 'secretEnv' | 'outputCap'>,
) {
  const cap = opts.outputCap ?? DEFAULT_OUTPUT_CAP;
  const full: WrapperCall = {
    ...call,
    nonce: nonceFrom(opts.random ?? systemRandom),
    markerDir: opts.host.marker_dir ?? '',
    outputCap: cap,
    ...(opts.secretEnv ? { secretEnv: opts.secretEnv } : {}),
  };
  const problem = wrapperCallProblem(full);
  if (problem !== undefined) return { problem } as const;
  const obs = await execOnce({
    ...opts,
    command: WRAPPER_EXEC,
    stdin: wrapperRequest(full),
    maxStdout: reportRoom(cap),
    maxStderr: cap,
  });
  return { obs, nonce: full.nonce, cap } as const;
}

function nonceFrom(random: Random): string {
  return Buffer.from(random.bytes(12)).toString('hex');
}

/** Evidence when no exit status arrived (or nothing was sent); undefined when one did. */
function transportEvidence(obs: ExecObservation): SshEvidence | undefined {
  const code = obs.errorCode === undefined ? {} : { error_code: obs.errorCode };
  if (!obs.execSent) return { phase: 'not_sent', local_error: obs.localError ?? 'other', ...code };
  if (obs.exitCode !== null) return undefined;
  if (obs.exitSignal !== null) {
    // The remote process was killed by a signal: it ran, how far is unknown.
    return {
      phase: 'response_cut',
      exit_status: null,
      // The signal's name as the remote reported it.
      error_code: reportedCode(`exit_signal_${obs.exitSignal.replace(/^SIG/, '')}`),
    };
  }
  if (obs.channelClosed && obs.localError === undefined) {
    return { phase: 'response_cut', exit_status: null, error_code: SshErrorCode.no_exit_status };
  }
  return {
    phase: 'request_sent',
    exit_status: null,
    local_error: obs.localError ?? 'connection_closed',
    ...code,
  };
}

/** The wrapper's refusal, as the remote wrapper printed it (`wrapper_marker_unsafe`, …). */
const wrapperRefusal = (report: WrapperReport): SshErrorCode =>
  reportedCode(`wrapper_${report.error ?? 'error'}`);

/** Evidence for a wrapper report that came with exit status `exit`. */
function reportEvidence(report: WrapperReport, exit: number): SshEvidence {
  if (report.exit !== exit) {
    return {
      phase: 'response_complete',
      exit_status: exit,
      response_misframed: true,
      error_code: SshErrorCode.wrapper_exit_mismatch,
    };
  }
  switch (report.kind) {
    case 'error':
      // The wrapper refused before running anything: documented "not started".
      return {
        phase: 'response_complete',
        exit_status: exit,
        contract_check: 'documented_failure',
        error_code: wrapperRefusal(report),
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
    case 'checked':
      return {
        phase: 'response_complete',
        exit_status: exit,
        response_misframed: true,
        error_code: SshErrorCode.wrapper_unexpected_report,
      };
  }
}

/**
 * What a marker state means as evidence about the operation:
 * - `completed` -> the recorded exit status, marked as a replay (nothing ran now);
 * - `started` / `claimed` -> still `request_sent`: a start without completion is an unknown outcome
 *   whether the process still runs or is gone;
 * - `absent` -> still unknown: no marker at this location now is not proof that nothing ran (it may
 *   have been deleted, or the attempt used another host, user or directory). Only the ledger can
 *   prove that an earlier attempt never reached the wrapper (see engine/reconcile-ssh.ts).
 */
export function markerEvidence(marker: MarkerState): SshEvidence {
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
        error_code:
          marker.process === 'alive'
            ? SshErrorCode.marker_started_alive
            : SshErrorCode.marker_started_gone,
      };
    case 'claimed':
      return { phase: 'request_sent', exit_status: null, error_code: SshErrorCode.marker_claimed };
    case 'absent':
      return {
        phase: 'request_sent',
        exit_status: null,
        error_code: SshErrorCode.marker_absent,
        reconciliation_matches: 0,
      };
  }
}

/** Runs one attempt. Never throws for expected failures; the evidence says how far it got. */
export async function runSsh(opts: RunSshOptions): Promise<SshRunResult> {
  if (!OPERATION_ID_PATTERN.test(opts.operationId))
    return notSent(SshErrorCode.invalid_operation_id);
  const mode = familyMode(opts.family);
  if (mode === 'converge' && (opts.check === undefined || opts.check === '')) {
    return notSent(SshErrorCode.missing_convergence_check);
  }
  const wrapperMode: WrapperMode =
    mode === 'converge' ? 'converge' : mode === 'raw' ? 'read' : 'run';
  const sent = await callWrapper(opts, {
    mode: wrapperMode,
    operationId: opts.operationId,
    command: opts.command,
    check: opts.check ?? '',
  });
  if (sent.problem !== undefined) return notSent(invalidRequest(sent.problem));
  const { obs, nonce } = sent;
  const base = { phases: obs.phases, stdout_dropped: 0, stderr_dropped: 0 };
  const cut = transportEvidence(obs);
  if (cut !== undefined || obs.exitCode === null) {
    return {
      ...base,
      evidence: cut ?? { phase: 'request_sent', exit_status: null },
      stdout: '',
      stderr: '',
      wrapper: 'none',
    };
  }
  const exit = obs.exitCode;
  const parsed = parseWrapperOutput(obs.stdout, nonce);
  if (!parsed.ok) {
    return {
      ...base,
      evidence: {
        phase: 'response_complete',
        exit_status: exit,
        response_misframed: true,
        error_code:
          obs.stdoutDropped > 0
            ? SshErrorCode.wrapper_report_too_long
            : UNREADABLE_REPORT[parsed.failure],
      },
      stdout: '',
      stderr: obs.stderr.toString('utf8'),
      wrapper: 'unreadable',
    };
  }
  const report = parsed.value;
  const result: SshRunResult = {
    ...base,
    evidence:
      mode === 'raw' && report.kind === 'ran' && report.exit === exit
        ? { phase: 'response_complete', exit_status: exit, contract_check: 'unchecked' }
        : reportEvidence(report, exit),
    stdout: report.stdout.toString('utf8'),
    stderr: report.stderr.toString('utf8'),
    stdout_dropped: Math.max(0, (report.stdout_total ?? 0) - report.stdout.length),
    stderr_dropped: Math.max(0, (report.stderr_total ?? 0) - report.stderr.length),
    wrapper:
      report.kind === 'error'
        ? 'refused'
        : report.kind === 'marker' || report.kind === 'checked'
          ? 'existing'
          : report.kind,
  };
  if (report.kind === 'error') {
    result.refusal = {
      code: report.error ?? 'error',
      ...(report.error_detail !== undefined ? { detail: report.error_detail } : {}),
    };
  }
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
        evidence: SshEvidence;
        /** Recorded output of a completed run. */
        stdout: string;
        stderr: string;
        /** Bytes of the recorded stdout the wrapper's cap dropped (counted, not kept). */
        stdout_dropped: number;
        phases: SshPhases;
      };
      failure?: never;
    }
  | {
      ok: false;
      /** The lookup itself failed; this evidence is about the lookup, NOT about the operation. */
      failure: { lookup_evidence: SshEvidence; phases: SshPhases };
      value?: never;
    };

/** Reads the operation's marker on the host without running anything. */
export async function reconcileSsh(opts: ReconcileSshOptions): Promise<SshReconcileResult> {
  if (!OPERATION_ID_PATTERN.test(opts.operationId)) {
    return {
      ok: false,
      failure: { lookup_evidence: notSent(SshErrorCode.invalid_operation_id).evidence, phases: {} },
    };
  }
  const looked = await lookup(opts, { mode: 'reconcile', operationId: opts.operationId });
  if (!looked.ok) return looked;
  const { report, phases } = looked.value;
  if (report.kind !== 'marker' || !report.marker) return unexpected(report, phases);
  const marker = report.marker;
  return {
    ok: true,
    value: {
      marker,
      evidence: markerEvidence(marker),
      stdout: report.stdout.toString('utf8'),
      stderr: report.stderr.toString('utf8'),
      stdout_dropped: Math.max(0, (report.stdout_total ?? 0) - report.stdout.length),
      phases,
    },
  };
}

export interface CheckSshOptions extends CommonOptions {
  /** The set_state convergence check: exits 0 exactly when the desired state holds. */
  check: string;
}

export type SshCheckResult =
  | { ok: true; value: { check_status: number; phases: SshPhases }; failure?: never }
  | { ok: false; failure: { lookup_evidence: SshEvidence; phases: SshPhases }; value?: never };

/**
 * Runs only the convergence check, through the wrapper: under `sh -c` with the secret inputs in
 * its environment, exactly as the converge run does (never under the login shell directly).
 */
export async function checkSsh(opts: CheckSshOptions): Promise<SshCheckResult> {
  const looked = await lookup(opts, { mode: 'check', operationId: '', check: opts.check });
  if (!looked.ok) return looked;
  const { report, phases } = looked.value;
  if (report.kind !== 'checked' || report.check_status === undefined)
    return unexpected(report, phases);
  return { ok: true, value: { check_status: report.check_status, phases } };
}

type Lookup =
  | { ok: true; value: { report: WrapperReport; phases: SshPhases }; failure?: never }
  | { ok: false; failure: { lookup_evidence: SshEvidence; phases: SshPhases }; value?: never };

async function lookup(
  opts: CommonOptions,
  call: Omit<WrapperCall, 'nonce' | 'markerDir' | 'secretEnv' | 'outputCap'>,
): Promise<Lookup> {
  const sent = await callWrapper(opts, call);
  if (sent.problem !== undefined) {
    return {
      ok: false,
      failure: {
        lookup_evidence: notSent(invalidRequest(sent.problem)).evidence,
        phases: {},
      },
    };
  }
  const { obs, nonce } = sent;
  const cut = transportEvidence(obs);
  if (cut !== undefined || obs.exitCode === null) {
    return {
      ok: false,
      failure: { lookup_evidence: cut ?? { phase: 'request_sent' }, phases: obs.phases },
    };
  }
  const parsed = parseWrapperOutput(obs.stdout, nonce);
  if (!parsed.ok) {
    return {
      ok: false,
      failure: {
        lookup_evidence: {
          phase: 'response_complete',
          exit_status: obs.exitCode,
          response_misframed: true,
          error_code: UNREADABLE_REPORT[parsed.failure],
        },
        phases: obs.phases,
      },
    };
  }
  return { ok: true, value: { report: parsed.value, phases: obs.phases } };
}

/** A report of the wrong kind, e.g. a refusal (`marker_unsafe`): evidence about the lookup. */
function unexpected(
  report: WrapperReport,
  phases: SshPhases,
): { ok: false; failure: { lookup_evidence: SshEvidence; phases: SshPhases } } {
  return {
    ok: false,
    failure: {
      lookup_evidence: {
        phase: 'response_complete',
        exit_status: report.exit ?? null,
        ...(report.kind === 'error'
          ? { contract_check: 'documented_failure' as const }
          : { response_misframed: true }),
        error_code:
          report.kind === 'error' ? wrapperRefusal(report) : SshErrorCode.wrapper_unexpected_report,
      },
      phases,
    },
  };
}
