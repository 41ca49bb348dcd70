// Credential references: `vault:NAME` (a value in the encrypted store) and `env:VAR` (a value in an
// environment variable, for CI). Both are bound: an `env:` reference is usable only when the
// configuration declares its type and bindings, so an agent cannot name an arbitrary variable, nor
// send a declared one anywhere else. Expected outcomes are returned; nothing here throws.
//
// The gate covers both kinds: when a vault is configured and locked, `env:` references fail with
// `locked` too. Without any vault there is no gate to close (stated limit for vault-less CI use).
import { bindingAdmits } from './binding.js';
import { present, type Vault } from './store.js';
import {
  CREDENTIAL_NAME,
  isSshCredentialType,
  fail,
  ok,
  type Binding,
  type CredentialType,
  type Destination,
  type ResolvedCredential,
  type ResolveFailure,
  type Result,
} from './types.js';
import { validateCredential } from './validate.js';

export type CredentialRef = { source: 'vault'; name: string } | { source: 'env'; variable: string };

/** The declared shape of an `env:VAR` credential (from the configuration, never from the agent). */
export interface EnvCredential {
  type: CredentialType;
  bindings: Binding[];
  username?: string;
  header_name?: string;
}

export interface ResolverOptions {
  vault?: Vault;
  /** Declarations keyed by variable name; an undeclared `env:VAR` is `unknown_ref`. */
  envCredentials?: Readonly<Record<string, EnvCredential>>;
  /** Where `env:` values come from; default `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Called with every secret released, e.g. `redactor.addSecret`. */
  onSecret?: (secret: string) => void;
}

export interface CredentialResolver {
  resolveCredential(
    ref: string,
    destination: Destination,
  ): Promise<Result<ResolvedCredential, ResolveFailure>>;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export function parseCredentialRef(ref: string): Result<CredentialRef, ResolveFailure> {
  if (ref.startsWith('vault:') && CREDENTIAL_NAME.test(ref.slice(6))) {
    return ok({ source: 'vault', name: ref.slice(6) });
  }
  if (ref.startsWith('env:') && ENV_NAME.test(ref.slice(4))) {
    return ok({ source: 'env', variable: ref.slice(4) });
  }
  return fail({ code: 'bad_ref', message: 'A credential reference is vault:NAME or env:VAR.' });
}

export function createCredentialResolver(options: ResolverOptions): CredentialResolver {
  const env = options.env ?? process.env;
  const declared = options.envCredentials ?? {};
  return {
    async resolveCredential(ref, destination) {
      const parsed = parseCredentialRef(ref);
      if (!parsed.ok) return parsed;
      const target = parsed.value;
      if (target.source === 'vault') {
        if (options.vault === undefined) {
          return fail({
            code: 'vault_unavailable',
            message: 'No vault is configured for vault: references.',
          });
        }
        const resolved = await options.vault.resolve(target.name, destination);
        if (resolved.ok) notify(options.onSecret, resolved.value);
        return resolved;
      }
      if (options.vault !== undefined) {
        const gate = await options.vault.checkGate();
        if (!gate.ok) return gate;
      }
      const spec = Object.hasOwn(declared, target.variable) ? declared[target.variable] : undefined;
      if (spec === undefined) {
        return fail({
          code: 'unknown_ref',
          message: `env:${target.variable} is not a declared credential.`,
        });
      }
      if (isSshCredentialType(spec.type) !== (destination.kind === 'ssh')) {
        return fail({
          code: 'type_mismatch',
          message: `env:${target.variable} (${spec.type}) cannot serve a ${destination.kind} destination.`,
        });
      }
      if (!bindingAdmits(spec.bindings, destination)) {
        return fail({
          code: 'binding_mismatch',
          message: `env:${target.variable} is not bound to this destination.`,
        });
      }
      const value = env[target.variable];
      if (value === undefined || value === '') {
        return fail({ code: 'env_missing', message: `${target.variable} is not set.` });
      }
      const valid = validateCredential({ ...spec, name: target.variable, secret: value });
      if (!valid.ok) {
        // Says why (too short to redact, a line break, …); validation messages never quote the value.
        return fail({
          code: 'env_missing',
          message: `${target.variable} is set but does not hold a usable ${spec.type} value: ${valid.failure.message}`,
        });
      }
      options.onSecret?.(value);
      const resolved = present(spec, value);
      notify(options.onSecret, resolved);
      return ok(resolved);
    },
  };
}

function notify(onSecret: ((s: string) => void) | undefined, resolved: ResolvedCredential): void {
  if (onSecret === undefined) return;
  onSecret(
    resolved.kind === 'http_header'
      ? resolved.header_value
      : resolved.kind === 'ssh_private_key'
        ? resolved.private_key
        : resolved.value,
  );
}
