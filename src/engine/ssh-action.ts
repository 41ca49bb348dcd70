// SSH actions share the operation lifecycle of HTTP actions: the same write-ahead attempts,
// classification and ledger trail. Only dispatch and reconciliation differ (the remote marker
// wrapper instead of a lookup). The SSH driver is loaded lazily, never by the root entry.
//
// Real inputs: the ledger records a redacted copy of an operation's input, which can never stand in
// for the real one (a check for "token ghp_… is gone" would check `[REDACTED]`). The runtime that
// ran or opened an operation keeps the real input in memory (rememberSshInput) for its own
// reconciliations and retries; another process (after a restart) has only the recorded copy, which
// it uses only when nothing in it was redacted, the action declares no secret inputs and it
// rebuilds the exact request of the last attempt — otherwise the answer is `escalate`, with the
// reason (engine/reconcile-ssh.ts).
import { z } from 'zod';
import { canonicalJson } from '../core/canonical.js';
import type { Evidence } from '../core/evidence.js';
import { sha256Hex } from '../core/fingerprint.js';
import type { ActionClass } from '../core/vocabulary.js';
import type { HostEntry, Inventory, ResolveKey } from '../ssh/inventory.js';
import type { MarkerState } from '../ssh/wrapper.js';
import { defineAction, type ActionDefinition } from './action.js';
import { redactedExcerpt } from '../vault/redact.js';
import type { Redactor } from './ports.js';

export interface SshRuntimeOptions {
  inventory: Inventory;
  /** Resolves a host's `key_ref` to private key bytes, inside the runtime. */
  resolveKey: ResolveKey;
  /** Bytes of stdout and of stderr kept per command (default 1 MiB); the rest is counted, dropped. */
  output_cap_bytes?: number;
  /**
   * Resolves a `secret_refs` entry (`vault:NAME`) for a host at attempt time, inside the runtime;
   * the value goes to the redactor and into the command's secret environment, nowhere else.
   */
  resolveSecret?: (ref: string, hostRef: string) => Promise<SshSecretResult>;
}

export type SshSecretResult =
  | { ok: true; value: string }
  | { ok: false; code: 'locked' | 'unknown_ref' | 'binding_mismatch' | 'unavailable' };

export interface SshActionSpec<I> {
  name: string;
  class: ActionClass;
  subject: string;
  input: z.ZodType<I>;
  host_ref: string;
  /** The command text (no secrets in it: reference them as "$NAME" from `secret_env`). */
  command(input: I): string;
  /** set_state: a command that exits 0 exactly when the desired state holds. */
  check?(input: I): string;
  /**
   * Secret inputs (and vault values) for the command and the check, as environment variables:
   * sent on the channel's stdin and exported only into the command's environment, never on a
   * command line. Every value is added to the redactor before the operation is recorded.
   */
  secret_env?(input: I): Record<string, string>;
  /**
   * Secret environment variables whose values are credential references (`vault:NAME`), resolved
   * at attempt time by the runtime's `resolveSecret` and sent like `secret_env`.
   */
  secret_refs?: Readonly<Record<string, string>>;
  deadline_ms?: number;
  attempt_budget?: number;
}

export interface SshDeclaration {
  host_ref: string;
  check?: (input: unknown) => string;
  secret_env?: (input: unknown) => Record<string, string>;
  secret_refs?: Readonly<Record<string, string>>;
  deadline_ms: number;
}

const sshOutput = z.object({ exit_status: z.number().int(), stdout: z.string() });

export function defineSshAction<I>(
  spec: SshActionSpec<I>,
): ActionDefinition<I, z.output<typeof sshOutput>> {
  const ssh: SshDeclaration = {
    host_ref: spec.host_ref,
    deadline_ms: spec.deadline_ms ?? 60_000,
    ...(spec.check ? { check: (input: unknown) => spec.check!(input as I) } : {}),
    ...(spec.secret_env ? { secret_env: (input: unknown) => spec.secret_env!(input as I) } : {}),
    ...(spec.secret_refs ? { secret_refs: { ...spec.secret_refs } } : {}),
  };
  return defineAction({
    name: spec.name,
    class: spec.class,
    subject: spec.subject,
    input: spec.input,
    // The command is the request: its fingerprint binds host and command (and, at attempt time,
    // the check and the marker location: sshFingerprint), so a changed command is a new operation.
    request: (input) => ({ method: 'SSH', path: spec.command(input) }),
    response: sshOutput,
    destination: {
      origin: `ssh://${spec.host_ref}`,
      authority_ref: `ssh:${spec.host_ref}`,
      route_template: `${spec.host_ref}:${spec.name}`,
      ssh,
    },
    ...(spec.attempt_budget !== undefined ? { attempt_budget: spec.attempt_budget } : {}),
  });
}

type AnySshCapable = Pick<ActionDefinition<never, never>, 'destination'>;

/** The inventory entry of a host ref (no SSH driver needed). */
function entryOf(options: SshRuntimeOptions | undefined, hostRef: string): HostEntry | undefined {
  if (!options || !Object.hasOwn(options.inventory, hostRef)) return undefined;
  return options.inventory[hostRef];
}

/**
 * The request fingerprint of an SSH attempt: the generic one (command, host ref) bound to the
 * check text and the marker location (host, port, user, marker directory) from the inventory now.
 * An inventory change between an attempt and its reconciliation is then a changed request, never
 * a marker "absent" somewhere else. Non-SSH actions keep `base`.
 */
export function sshFingerprint(
  options: SshRuntimeOptions | undefined,
  action: AnySshCapable,
  input: unknown,
  base: string,
): string {
  const decl = action.destination.ssh;
  if (!decl) return base;
  const entry = entryOf(options, decl.host_ref);
  const location = entry
    ? {
        host: entry.host,
        port: entry.port,
        user: entry.user,
        marker_dir: entry.marker_dir ?? '',
      }
    : null;
  const check = decl.check ? decl.check(input) : null;
  return `sha256:${sha256Hex(canonicalJson({ base, location, check }))}`;
}

/** Secret values of an SSH action's input (empty for other actions). */
export function sshSecretValues(action: AnySshCapable, input: unknown): string[] {
  const env = action.destination.ssh?.secret_env?.(input) ?? {};
  return Object.values(env).filter((v) => v.length > 0);
}

const remembered = new WeakMap<object, Map<string, unknown>>();

/**
 * The owner keeps the real input of its SSH operations in memory (keyed by its engine context):
 * secrets are added to the redactor first, so the recorded copy never holds them.
 */
export function admitSshInput(redactor: Redactor, action: AnySshCapable, input: unknown): void {
  for (const s of sshSecretValues(action, input)) redactor.addSecret(s);
}

export function rememberSshInput(
  owner: object,
  action: AnySshCapable,
  operationId: string,
  input: unknown,
): void {
  if (!action.destination.ssh) return;
  let m = remembered.get(owner);
  if (!m) remembered.set(owner, (m = new Map<string, unknown>()));
  if (!m.has(operationId)) m.set(operationId, input);
}

export function rememberedSshInput(
  owner: object,
  operationId: string,
): { found: true; input: unknown } | { found: false } {
  const m = remembered.get(owner);
  return m?.has(operationId) ? { found: true, input: m.get(operationId) } : { found: false };
}

export interface SshDispatched {
  evidence: Evidence;
  data: { exit_status: number; stdout: string } | null;
  diagnostics: Record<string, unknown>;
  phases: { started_at: number; request_sent_at?: number; finished_at: number };
}

export interface SshDispatch {
  options: SshRuntimeOptions | undefined;
  decl: SshDeclaration;
  command: string;
  family: ActionClass;
  operationId: string;
  /** The real input (for the check and the secret environment). */
  input: unknown;
  signal?: AbortSignal | undefined;
  now: () => number;
  /** Vault values are added to it; stderr is redacted whole before it is cut. */
  redactor?: Redactor | undefined;
}

const unknownHost = (decl: SshDeclaration) => ({
  evidence: {
    phase: 'not_sent',
    local_error: 'credential_unavailable',
    error_code: 'unknown_host_ref',
  } satisfies Evidence,
  problem: `no host "${decl.host_ref}" in the SSH inventory`,
});

export async function dispatchSsh(d: SshDispatch): Promise<SshDispatched> {
  const started_at = d.now();
  const entry = entryOf(d.options, d.decl.host_ref);
  if (!d.options || !entry) {
    const u = unknownHost(d.decl);
    return {
      evidence: u.evidence,
      data: null,
      diagnostics: { problem: u.problem },
      phases: { started_at, finished_at: d.now() },
    };
  }
  const secrets = await secretEnvOf(d.options, d.decl, d.input, d.redactor);
  if (!secrets.ok)
    return {
      evidence: secrets.evidence,
      data: null,
      diagnostics: { problem: secrets.problem },
      phases: { started_at, finished_at: d.now() },
    };
  const secretEnv = secrets.env;
  const { runSsh } = await import('../ssh/transport.js');
  const result = await runSsh({
    host: entry,
    command: d.command,
    operationId: d.operationId,
    family: d.family,
    resolveKey: d.options.resolveKey,
    deadlineMs: d.decl.deadline_ms,
    ...(d.decl.check ? { check: d.decl.check(d.input) } : {}),
    ...(secretEnv ? { secretEnv } : {}),
    ...(d.options.output_cap_bytes !== undefined ? { outputCap: d.options.output_cap_bytes } : {}),
    ...(d.signal ? { signal: d.signal } : {}),
  });
  const exit = result.evidence.exit_status;
  return {
    evidence: result.evidence,
    data:
      typeof exit === 'number'
        ? {
            exit_status: exit,
            // The agent sees stdout: a secret the command printed is hidden from it too.
            stdout: d.redactor
              ? redactedExcerpt(d.redactor, result.stdout, 16_384)
              : result.stdout.slice(0, 16_384),
          }
        : null,
    diagnostics: {
      wrapper: result.wrapper,
      // Redacted whole, then cut: a cut first could leave a secret's prefix behind (issue 12).
      stderr_excerpt: d.redactor
        ? redactedExcerpt(d.redactor, result.stderr, 2048)
        : result.stderr.slice(0, 2048),
      ...(result.stdout_dropped > 0 ? { stdout_dropped_bytes: result.stdout_dropped } : {}),
      ...(result.stderr_dropped > 0 ? { stderr_dropped_bytes: result.stderr_dropped } : {}),
      ...(result.refusal ? { refusal: result.refusal } : {}),
      ...(result.marker ? { marker: result.marker } : {}),
      ...(result.check_status !== undefined ? { check_status: result.check_status } : {}),
    },
    phases: { started_at, finished_at: d.now() },
  };
}

export type SshLookup =
  | { ok: true; marker: MarkerState; evidence: Evidence; stdout: string }
  | { ok: false; evidence: Evidence; refusal?: string };

export async function lookupSshMarker(
  options: SshRuntimeOptions | undefined,
  decl: SshDeclaration,
  operationId: string,
): Promise<SshLookup> {
  const entry = entryOf(options, decl.host_ref);
  if (!options || !entry) return { ok: false, evidence: unknownHost(decl).evidence };
  const { reconcileSsh } = await import('../ssh/transport.js');
  const r = await reconcileSsh({ host: entry, operationId, resolveKey: options.resolveKey });
  if (!r.ok) return lookupFailure(r.failure.lookup_evidence);
  return { ok: true, marker: r.value.marker, evidence: r.value.evidence, stdout: r.value.stdout };
}

export type SshCheck =
  { ok: true; check_status: number } | { ok: false; evidence: Evidence; refusal?: string };

/** The set_state convergence check alone, under `sh -c` with the secret environment. */
export async function runSshCheck(
  options: SshRuntimeOptions | undefined,
  decl: SshDeclaration,
  input: unknown,
): Promise<SshCheck> {
  const entry = entryOf(options, decl.host_ref);
  if (!options || !entry) return { ok: false, evidence: unknownHost(decl).evidence };
  if (!decl.check) return { ok: false, evidence: { phase: 'not_sent', error_code: 'no_check' } };
  const secrets = await secretEnvOf(options, decl, input, undefined);
  if (!secrets.ok) return { ok: false, evidence: secrets.evidence };
  const secretEnv = secrets.env;
  const { checkSsh } = await import('../ssh/transport.js');
  const r = await checkSsh({
    host: entry,
    check: decl.check(input),
    resolveKey: options.resolveKey,
    deadlineMs: decl.deadline_ms,
    ...(secretEnv ? { secretEnv } : {}),
  });
  if (!r.ok) return lookupFailure(r.failure.lookup_evidence);
  return { ok: true, check_status: r.value.check_status };
}

/** A failed lookup; a wrapper refusal (`wrapper_marker_unsafe`, …) is named. */
function lookupFailure(evidence: Evidence): { ok: false; evidence: Evidence; refusal?: string } {
  const refused = evidence.contract_check === 'documented_failure' && evidence.error_code;
  return refused
    ? { ok: false, evidence, refusal: refused.replace(/^wrapper_/, '') }
    : { ok: false, evidence };
}

/**
 * The secret environment of one dispatch: the action's `secret_env` (from the input) and its
 * `secret_refs` resolved now. A reference that does not resolve stops the dispatch before a byte
 * leaves (a locked gate is `gate_locked`). Resolved values go to the redactor first.
 */
async function secretEnvOf(
  options: SshRuntimeOptions | undefined,
  decl: SshDeclaration,
  input: unknown,
  redactor: Redactor | undefined,
): Promise<
  | { ok: true; env: Record<string, string> | undefined }
  | { ok: false; evidence: Evidence; problem: string }
> {
  const fromInput = decl.secret_env?.(input);
  const refs = Object.entries(decl.secret_refs ?? {});
  if (refs.length === 0) return { ok: true, env: fromInput };
  const env: Record<string, string> = { ...fromInput };
  for (const [name, ref] of refs) {
    const r = options?.resolveSecret
      ? await options.resolveSecret(ref, decl.host_ref)
      : ({ ok: false, code: 'unavailable' } as const);
    if (!r.ok) {
      const problem = `the secret ${name} (${ref}) is not available: ${r.code}`;
      return r.code === 'locked'
        ? { ok: false, evidence: { phase: 'not_sent', blocked: 'gate_locked' }, problem }
        : {
            ok: false,
            evidence: {
              phase: 'not_sent',
              local_error: 'credential_unavailable',
              error_code: r.code,
            },
            problem,
          };
    }
    redactor?.addSecret(r.value);
    env[name] = r.value;
  }
  return { ok: true, env };
}
