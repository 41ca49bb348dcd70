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
import { createHmac, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { canonicalJson } from '../core/canonical.js';
import type { EngineErrorCode } from '../core/error-code.js';
import type { Evidence } from '../core/evidence.js';
import { REDACTED } from '../core/redact.js';
import type { ActionClass } from '../core/vocabulary.js';
import {
  defineAction,
  type ActionDefinition,
  type EngineAction,
  type SshDestination,
} from './action.js';
import { CREDENTIAL_ERROR_CODE, type Redactor } from './ports.js';

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

/**
 * The input as the ledger records it. Declared secret inputs are replaced by position — every value
 * in the input whose text is a secret value (`secret_env`), whatever its length — before the
 * redactor searches the rest: a secret of one to three characters, or one that occurs inside
 * "[REDACTED]", is never searched for in text and would otherwise be stored in clear.
 */
export function recordedInput(redactor: Redactor, action: AnySshCapable, input: unknown): unknown {
  const secrets = new Set(sshSecretValues(action, input));
  return redactor.redactValue(secrets.size === 0 ? input : withoutSecrets(input, secrets));
}

function withoutSecrets(value: unknown, secrets: ReadonlySet<string>): unknown {
  if (value === undefined) return value;
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  if (text !== undefined && secrets.has(text)) return REDACTED;
  if (Array.isArray(value)) return value.map((v) => withoutSecrets(v, secrets));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = withoutSecrets(v, secrets);
    return out;
  }
  return value;
}

/** Why the secret inputs of a continuation cannot be those of the operation. */
export type SecretMismatch = 'secret_placeholder' | 'other_secret';

const randomKeys = new WeakMap<object, Uint8Array>();

/** The continuation key: the configured one, else one made for this engine (see EngineOptions). */
function digestKey(owner: { secretDigestKey?: Uint8Array }): Uint8Array {
  if (owner.secretDigestKey) return owner.secretDigestKey;
  let k = randomKeys.get(owner);
  if (!k) randomKeys.set(owner, (k = new Uint8Array(randomBytes(32))));
  return k;
}

/**
 * The keyed digest of an SSH operation's secret inputs, part of its intent: HMAC-SHA-256 under the
 * continuation key of the canonical `{ NAME: value }` of `secret_env`, never the values (a plain
 * hash of a short secret could be reversed by trying every value). Null when there are none.
 */
export function secretsDigest(
  options: { secretDigestKey?: Uint8Array },
  action: AnySshCapable,
  input: unknown,
): string | null {
  const dest = action.destination;
  const env = (dest.kind === 'ssh' ? dest.secret_env?.(input) : undefined) ?? {};
  if (Object.keys(env).length === 0) return null;
  const mac = createHmac('sha256', digestKey(options)).update(canonicalJson(env), 'utf8');
  return `hmac-sha256:${mac.digest('hex')}`;
}

/**
 * Null when the secret inputs of `input` are those the operation was opened with. A secret that
 * is (or holds) the redaction placeholder is never a real one: a caller that copied the recorded
 * input must not have a check or a command run with "[REDACTED]".
 */
export function secretMismatch(
  options: { secretDigestKey?: Uint8Array },
  action: AnySshCapable,
  input: unknown,
  recorded: string | undefined,
): SecretMismatch | null {
  if (holdsSecretPlaceholder(action, input)) return 'secret_placeholder';
  const now = secretsDigest(options, action, input);
  return now === (recorded ?? null) ? null : 'other_secret';
}

const remembered = new WeakMap<object, Map<string, unknown>>();

/**
 * The owner keeps the real input of its SSH operations in memory (keyed by its engine context):
 * secrets are added to the redactor first, so the recorded copy never holds them.
 */
export function admitSshInput(redactor: Redactor, action: AnySshCapable, input: unknown): void {
  for (const s of sshSecretValues(action, input)) redactor.addSecret(s);
}

/** Whether a secret input is (or holds) the placeholder "[REDACTED]": never a real secret. */
export function holdsSecretPlaceholder(action: AnySshCapable, input: unknown): boolean {
  return sshSecretValues(action, input).some((v) => v.includes(REDACTED));
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
  | { ok: false; evidence: Evidence<EngineErrorCode>; problem: string }
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
              error_code: CREDENTIAL_ERROR_CODE[r.code],
            },
            problem,
          };
    }
    redactor.addSecret(r.value);
    env[name] = r.value;
  }
  return { ok: true, env };
}
