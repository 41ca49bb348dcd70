// The engine's CredentialProvider for a configuration: `env:` references declared with the
// bindings of the destinations that use them, `vault:` references resolved by the vault (which
// keeps its own bindings). Values are read at dispatch time and handed to the redactor at once.
import type { CredentialProvider, CredentialResult } from '../engine/ports.js';
import {
  createCredentialResolver,
  type Binding,
  type EnvCredential,
  type ResolveFailureCode,
  type Vault,
} from '../vault/index.js';
import { NO_CREDENTIAL } from './actions.js';
import type { GatewayConfig } from './schema.js';

export interface ConfigCredentialOptions {
  vault?: Vault;
  env?: Readonly<Record<string, string | undefined>>;
  /** Every released secret, e.g. `redactor.addSecret`. */
  onSecret?: (secret: string) => void;
}

/** The bindings of a credential: origin + route prefix of each destination that uses it. */
export function bindingsOf(config: GatewayConfig, credential: string): Binding[] {
  const out: Binding[] = [];
  for (const d of Object.values(config.destinations)) {
    if (d.credential !== credential) continue;
    out.push({ kind: 'http', origin: new URL(d.origin).origin, path_prefix: d.route_prefix });
  }
  return out;
}

export function envDeclarations(config: GatewayConfig): Record<string, EnvCredential> {
  const out: Record<string, EnvCredential> = {};
  for (const [name, c] of Object.entries(config.credentials)) {
    if (!c.ref.startsWith('env:')) continue;
    const bindings = bindingsOf(config, name);
    const decl: EnvCredential =
      c.scheme === 'Bearer'
        ? { type: 'bearer', bindings }
        : c.scheme === 'Basic'
          ? { type: 'basic', bindings, ...(c.username ? { username: c.username } : {}) }
          : { type: 'api_key', bindings, header_name: c.header ?? 'authorization' };
    out[c.ref.slice('env:'.length)] = decl;
  }
  return out;
}

/**
 * `vault:` references that name no credential in the vault: a typo found at start, not at the
 * first call. `names` are the vault's credential names (`vault.list()`).
 */
export function missingVaultRefs(
  config: GatewayConfig,
  names: ReadonlySet<string>,
): Array<{ path: string[]; problem: string; missing: true }> {
  const out: Array<{ path: string[]; problem: string; missing: true }> = [];
  for (const [name, c] of Object.entries(config.credentials)) {
    if (!c.ref.startsWith('vault:')) continue;
    const wanted = c.ref.slice('vault:'.length);
    if (!names.has(wanted))
      out.push({
        path: ['credentials', name, 'ref'],
        problem: `the vault holds no credential named "${wanted}" (candor vault list shows what it holds)`,
        missing: true,
      });
  }
  return out;
}

/** A vault resolution failure as the engine's ports name it (credentials and SSH secrets). */
export const PORT_CODE: Readonly<
  Record<ResolveFailureCode, 'locked' | 'unknown_ref' | 'binding_mismatch' | 'unavailable'>
> = {
  bad_ref: 'unknown_ref',
  unknown_ref: 'unknown_ref',
  binding_mismatch: 'binding_mismatch',
  type_mismatch: 'binding_mismatch',
  locked: 'locked',
  env_missing: 'unavailable',
  vault_unavailable: 'unavailable',
  key_changed: 'unavailable',
  integrity: 'unavailable',
};

export function configCredentials(
  config: GatewayConfig,
  options: ConfigCredentialOptions = {},
): CredentialProvider {
  const resolver = createCredentialResolver({
    envCredentials: envDeclarations(config),
    ...(options.vault ? { vault: options.vault } : {}),
    ...(options.env ? { env: options.env } : {}),
    ...(options.onSecret ? { onSecret: options.onSecret } : {}),
  });
  return {
    async resolve(ref, target): Promise<CredentialResult> {
      if (ref === NO_CREDENTIAL) return { ok: true, headers: {}, secrets: [] };
      const r = await resolver.resolveCredential(ref, {
        kind: 'http',
        // Appended, never resolved: `//host/x` must not name another host (see http/transport).
        url: `${new URL(target.origin).origin}${target.path}`,
      });
      if (!r.ok)
        return {
          ok: false,
          failure: { code: PORT_CODE[r.failure.code], detail: credentialDetail(ref, r.failure) },
        };
      if (r.value.kind !== 'http_header')
        return { ok: false, failure: { code: 'binding_mismatch' } };
      const value = r.value.header_value;
      const space = value.indexOf(' ');
      const secrets = space > 0 ? [value, value.slice(space + 1)] : [value];
      return {
        ok: true,
        headers: { [r.value.header_name.toLowerCase()]: value },
        secrets: secrets.filter((s) => s.length >= 4),
      };
    },
  };
}

/**
 * Why a credential was not released, for the agent: the resolver's sentence (it names the
 * reference or variable and the reason, e.g. a value too short to redact, never the value), except
 * where it could name local files.
 */
function credentialDetail(
  ref: string,
  failure: { code: ResolveFailureCode; message: string },
): string {
  switch (failure.code) {
    case 'vault_unavailable':
      return `${ref}: the vault could not be read.`;
    case 'locked':
      return `${ref}: the vault is locked; no credential is released.`;
    default:
      return failure.message;
  }
}
