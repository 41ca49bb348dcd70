// The SSH adapter of the transport port (src/core/transport.ts): runs an attempt's command on an
// inventory host under the marker protocol, reads a marker or runs a convergence check for
// reconciliation. The ssh2 driver (transport.ts) is loaded on first use, never by the root entry.
import { SshErrorCode } from '../core/error-code.js';
import type { Evidence } from '../core/evidence.js';
import type {
  Dispatched,
  Looked,
  Phases,
  SshCheckPrepared,
  SshFound,
  SshMarkerPrepared,
  SshPrepared,
  SshRunPrepared,
  Transport,
} from '../core/transport.js';
import type { HostEntry, Inventory, ResolveKey } from './inventory.js';

export interface SshRuntimeOptions {
  inventory: Inventory;
  /** Resolves a host's `key_ref` to private key bytes, inside the runtime. */
  resolveKey: ResolveKey;
  /** Bytes of stdout and of stderr kept per command (default 1 MiB); the rest is counted, dropped. */
  output_cap_bytes?: number;
  /**
   * Resolves a `secret_refs` entry (`vault:NAME`) for a host at attempt time, inside the runtime
   * (the engine calls it; the value goes to the redactor and into the command's secret
   * environment, nowhere else).
   */
  resolveSecret?: (
    ref: string,
    hostRef: string,
  ) => Promise<
    | { ok: true; value: string }
    | { ok: false; code: 'locked' | 'unknown_ref' | 'binding_mismatch' | 'unavailable' }
  >;
}

/**
 * The SSH transport. Without options (no inventory configured) every host ref is unknown: nothing
 * is sent, and the evidence says the host could not be resolved.
 */
export function sshTransport(
  options: SshRuntimeOptions | undefined,
  now: () => number = Date.now,
): Transport<SshPrepared> {
  const entryOf = (hostRef: string): HostEntry | undefined =>
    options && Object.hasOwn(options.inventory, hostRef) ? options.inventory[hostRef] : undefined;
  return {
    kind: 'ssh',
    dispatch(p, { signal }): Promise<Dispatched> {
      const started_at = now();
      const entry = entryOf(p.host_ref);
      if (!options || !entry) {
        return Promise.resolve({
          evidence: unknownHostEvidence,
          data: null,
          diagnostics: { problem: `no host "${p.host_ref}" in the SSH inventory` },
          phases: { started_at, finished_at: now() },
        });
      }
      return run(options, entry, p, signal, started_at, now);
    },
    lookup(p, { signal }): Promise<Looked<SshFound>> {
      const started_at = now();
      const entry = entryOf(p.host_ref);
      if (!options || !entry) {
        return Promise.resolve({
          verdict: 'failed',
          evidence: unknownHostEvidence,
          phases: { started_at, finished_at: now() },
        });
      }
      const at = { started_at, now, signal };
      return p.op === 'marker' ? marker(options, entry, p, at) : check(options, entry, p, at);
    },
    binding(p) {
      // The marker location from the inventory now: an inventory change between an attempt and its
      // reconciliation is then a changed request, never a marker "absent" somewhere else.
      const entry = entryOf(p.host_ref);
      const location = entry
        ? {
            host: entry.host,
            port: entry.port,
            user: entry.user,
            marker_dir: entry.marker_dir ?? '',
          }
        : null;
      return { location, check: p.check ?? null };
    },
  };
}

/** Bytes of a command's stdout an envelope carries (the wrapper's cap keeps more on the host). */
export const ENVELOPE_STDOUT_BYTES = 16 * 1024;

/**
 * The stdout an envelope carries: at most ENVELOPE_STDOUT_BYTES of UTF-8 (cut on a character
 * boundary), and when anything was cut — here or by the wrapper's output cap (`droppedBefore`) —
 * `stdout_truncated` says how many bytes were kept and how many dropped, so a cut output never
 * passes for the whole of it.
 */
export function envelopeStdout(
  stdout: string,
  droppedBefore: number,
  max = ENVELOPE_STDOUT_BYTES,
): { stdout: string; stdout_truncated?: { kept_bytes: number; dropped_bytes: number } } {
  const bytes = Buffer.from(stdout, 'utf8');
  let kept = stdout;
  let keptBytes = bytes.length;
  if (bytes.length > max) {
    // Back off to the start of a UTF-8 sequence (a continuation byte is 10xxxxxx).
    let end = max;
    while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
    kept = bytes.subarray(0, end).toString('utf8');
    keptBytes = end;
  }
  const dropped = bytes.length - keptBytes + Math.max(0, droppedBefore);
  return dropped > 0
    ? { stdout: kept, stdout_truncated: { kept_bytes: keptBytes, dropped_bytes: dropped } }
    : { stdout: kept };
}

const unknownHostEvidence: Evidence<SshErrorCode> = {
  phase: 'not_sent',
  local_error: 'credential_unavailable',
  error_code: SshErrorCode.unknown_host_ref,
};

async function run(
  options: SshRuntimeOptions,
  host: HostEntry,
  p: SshRunPrepared,
  signal: AbortSignal | undefined,
  started_at: number,
  now: () => number,
): Promise<Dispatched> {
  const { runSsh } = await import('./transport.js');
  const result = await runSsh({
    host,
    command: p.command,
    operationId: p.operation_id,
    family: p.family,
    resolveKey: options.resolveKey,
    deadlineMs: p.deadline_ms,
    ...(p.check !== undefined ? { check: p.check } : {}),
    ...(p.secret_env ? { secretEnv: p.secret_env } : {}),
    ...(options.output_cap_bytes !== undefined ? { outputCap: options.output_cap_bytes } : {}),
    ...(signal ? { signal } : {}),
  });
  const exit = result.evidence.exit_status;
  return {
    evidence: result.evidence,
    data:
      typeof exit === 'number'
        ? {
            exit_status: exit,
            ...envelopeStdout(result.stdout, result.stdout_dropped),
            // A refusal names itself: the wrapper ran nothing, and the code says why.
            ...(result.refusal ? { refusal: result.refusal } : {}),
          }
        : null,
    diagnostics: {
      wrapper: result.wrapper,
      stderr_excerpt: result.stderr.slice(0, 2048),
      ...(result.stdout_dropped > 0 ? { stdout_dropped_bytes: result.stdout_dropped } : {}),
      ...(result.stderr_dropped > 0 ? { stderr_dropped_bytes: result.stderr_dropped } : {}),
      ...(result.refusal ? { refusal: result.refusal } : {}),
      ...(result.marker ? { marker: result.marker } : {}),
      ...(result.check_status !== undefined ? { check_status: result.check_status } : {}),
    },
    phases: { started_at, finished_at: now() },
  };
}

/** When a lookup began, the clock, and the caller's signal. */
interface LookupTiming {
  started_at: number;
  now: () => number;
  signal: AbortSignal | undefined;
}

/** The marker: absent, or found in the state the command left it (with a completed run's stdout). */
async function marker(
  options: SshRuntimeOptions,
  host: HostEntry,
  p: SshMarkerPrepared,
  { started_at, now, signal }: LookupTiming,
): Promise<Looked<SshFound>> {
  const { reconcileSsh } = await import('./transport.js');
  const r = await reconcileSsh({
    host,
    operationId: p.operation_id,
    resolveKey: options.resolveKey,
    ...(signal ? { signal } : {}),
  });
  const phases: Phases = { started_at, finished_at: now() };
  if (!r.ok) return failedLookup(r.failure.lookup_evidence, phases);
  const { marker: m, evidence } = r.value;
  if (m.state === 'absent') return { verdict: 'absent', evidence, phases };
  return {
    verdict: 'found',
    found: { op: 'marker', marker: m, ...envelopeStdout(r.value.stdout, r.value.stdout_dropped) },
    evidence,
    phases,
  };
}

/** The convergence check: found when the desired state holds (exit 0), absent when it does not. */
async function check(
  options: SshRuntimeOptions,
  host: HostEntry,
  p: SshCheckPrepared,
  { started_at, now, signal }: LookupTiming,
): Promise<Looked<SshFound>> {
  const { checkSsh } = await import('./transport.js');
  const r = await checkSsh({
    host,
    check: p.check,
    resolveKey: options.resolveKey,
    deadlineMs: p.deadline_ms,
    ...(p.secret_env ? { secretEnv: p.secret_env } : {}),
    ...(signal ? { signal } : {}),
  });
  const phases: Phases = { started_at, finished_at: now() };
  if (!r.ok) return failedLookup(r.failure.lookup_evidence, phases);
  const evidence: Evidence<SshErrorCode> = {
    phase: 'response_complete',
    exit_status: r.value.check_status,
  };
  return r.value.check_status === 0
    ? { verdict: 'found', found: { op: 'check', check_status: 0 }, evidence, phases }
    : { verdict: 'absent', evidence, phases };
}

/** A lookup that learned nothing; a wrapper refusal (`wrapper_marker_unsafe`, …) is named. */
function failedLookup(evidence: Evidence<SshErrorCode>, phases: Phases): Looked<SshFound> {
  const refused = evidence.contract_check === 'documented_failure' && evidence.error_code;
  return {
    verdict: 'failed',
    evidence,
    phases,
    ...(refused ? { refusal: refused.replace(/^wrapper_/, '') } : {}),
  };
}
