// SSH actions share the operation lifecycle of HTTP actions: the same write-ahead attempts,
// classification and ledger trail. Only dispatch and reconciliation differ (the remote marker
// wrapper instead of a lookup): both go through the SSH transport (src/ssh/adapter.ts), which
// loads the SSH driver on first use, never the root entry.
//
// Real inputs: the ledger records a redacted copy of an operation's input, which can never stand in
// for the real one (a check for "token ghp_… is gone" would check `[REDACTED]`). The runtime that
// ran or opened an operation keeps the real input in memory (rememberSshInput) for its own
// reconciliations and retries; another process (after a restart) has only the recorded copy, which
// it uses only when nothing in it was redacted, the action declares no secret inputs and it
// rebuilds the exact request of the last attempt — otherwise the answer is `escalate`, with the
// reason (engine/reconcile-ssh.ts).
import { z } from 'zod';
import type { Evidence } from '../core/evidence.js';
import type { ActionClass } from '../core/vocabulary.js';
import {
  defineAction,
  type ActionDefinition,
  type EngineAction,
  type SshDestination,
} from './action.js';
import type { Redactor } from './ports.js';

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
   * at attempt time by the runtime's `ssh.resolveSecret` and sent like `secret_env`.
   */
  secret_refs?: Readonly<Record<string, string>>;
  deadline_ms?: number;
  attempt_budget?: number;
}

const sshOutput = z.object({ exit_status: z.number().int(), stdout: z.string() });

export function defineSshAction<I>(
  spec: SshActionSpec<I>,
): ActionDefinition<I, z.output<typeof sshOutput>, SshDestination> {
  return defineAction<I, z.output<typeof sshOutput>, SshDestination>({
    name: spec.name,
    class: spec.class,
    subject: spec.subject,
    input: spec.input,
    // The command is the request: its fingerprint binds host and command (and the check and the
    // marker location: the SSH transport's binding), so a changed command is a new operation.
    request: (input) => ({ command: spec.command(input) }),
    response: sshOutput,
    destination: {
      kind: 'ssh',
      host_ref: spec.host_ref,
      authority_ref: `ssh:${spec.host_ref}`,
      route_template: `${spec.host_ref}:${spec.name}`,
      deadline_ms: spec.deadline_ms ?? 60_000,
      ...(spec.check ? { check: (input: unknown) => spec.check!(input as I) } : {}),
      ...(spec.secret_env ? { secret_env: (input: unknown) => spec.secret_env!(input as I) } : {}),
      ...(spec.secret_refs ? { secret_refs: { ...spec.secret_refs } } : {}),
    },
    ...(spec.attempt_budget !== undefined ? { attempt_budget: spec.attempt_budget } : {}),
  });
}

type AnySshCapable = Pick<EngineAction<never, never>, 'destination'>;

/** Secret values of an SSH action's input (empty for other actions). */
export function sshSecretValues(action: AnySshCapable, input: unknown): string[] {
  const dest = action.destination;
  const env = (dest.kind === 'ssh' ? dest.secret_env?.(input) : undefined) ?? {};
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
  if (action.destination.kind !== 'ssh') return;
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

/** How a `secret_refs` entry resolved (the runtime's `ssh.resolveSecret`). */
export type SshSecretResult =
  | { ok: true; value: string }
  | { ok: false; code: 'locked' | 'unknown_ref' | 'binding_mismatch' | 'unavailable' };

/** Resolves a `secret_refs` entry for a host at attempt time, inside the runtime. */
export type ResolveSshSecret = (ref: string, hostRef: string) => Promise<SshSecretResult>;

/**
 * The secret environment of one SSH dispatch: the action's `secret_env` (from the input) and its
 * `secret_refs` resolved now. A reference that does not resolve stops the dispatch before a byte
 * leaves (a locked vault is `gate_locked`). Resolved values go to the redactor first.
 */
export async function sshSecretEnv(
  resolve: ResolveSshSecret | undefined,
  redactor: Redactor,
  dest: SshDestination,
  input: unknown,
): Promise<
  | { ok: true; env: Record<string, string> | undefined }
  | { ok: false; evidence: Evidence; problem: string }
> {
  const fromInput = dest.secret_env?.(input);
  const refs = Object.entries(dest.secret_refs ?? {});
  if (refs.length === 0) return { ok: true, env: fromInput };
  const env: Record<string, string> = { ...fromInput };
  for (const [name, ref] of refs) {
    const r = resolve
      ? await resolve(ref, dest.host_ref)
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
    redactor.addSecret(r.value);
    env[name] = r.value;
  }
  return { ok: true, env };
}
