// What a configuration needs from its vault and environment: every `vault:NAME` it references, with
// the type and bindings an entry must have to satisfy it, and every `env:VAR` credential. `candor
// vault set NAME --config F` stores exactly what F needs (no --type/--bind to retype), and `candor
// serve` names what is missing at start.
import type { Binding, CredentialType } from '../vault/index.js';
import { bindingsOf } from './credentials.js';
import type { FieldPath } from './locate.js';
import type { GatewayConfig } from './schema.js';
import { vaultBindings } from './ssh-actions.js';
import { upstreamHostRef } from './upstream-schema.js';

export interface VaultNeed {
  name: string;
  type: CredentialType;
  bindings: Binding[];
  username?: string;
  header_name?: string;
  /** Where the first reference is in the file. */
  path: FieldPath;
}

const nameOf = (ref: string): string => ref.slice('vault:'.length);

/** Every vault entry the configuration references, merged by name (bindings accumulate). */
export function vaultNeeds(config: GatewayConfig): Map<string, VaultNeed> {
  const out = new Map<string, VaultNeed>();
  const need = (n: Omit<VaultNeed, 'name'>, ref: string): void => {
    const name = nameOf(ref);
    const have = out.get(name);
    if (!have) {
      out.set(name, { name, ...n });
      return;
    }
    for (const b of n.bindings)
      if (!have.bindings.some((h) => JSON.stringify(h) === JSON.stringify(b)))
        have.bindings.push(b);
  };
  for (const [name, c] of Object.entries(config.credentials)) {
    if (!c.ref.startsWith('vault:')) continue;
    // How a vault: credential is presented is the vault entry's own type (the file may not say):
    // bearer unless `vault set --type` says otherwise.
    need(
      { type: 'bearer', bindings: bindingsOf(config, name), path: ['credentials', name, 'ref'] },
      c.ref,
    );
  }
  for (const [hostRef, h] of Object.entries(config.ssh?.hosts ?? {}))
    need(
      {
        type: 'ssh_key',
        bindings: [{ kind: 'ssh', host_ref: hostRef }],
        path: ['ssh', 'hosts', hostRef, 'key_ref'],
      },
      h.key_ref,
    );
  (config.ssh?.actions ?? []).forEach((a, i) => {
    for (const [env, ref] of vaultBindings(a))
      need(
        {
          type: 'ssh_secret',
          bindings: [{ kind: 'ssh', host_ref: a.host_ref }],
          path: ['ssh', 'actions', i, 'secret_env', env],
        },
        ref,
      );
  });
  for (const [name, u] of Object.entries(config.upstreams ?? {})) {
    for (const [env, value] of Object.entries(u.env))
      if (value.startsWith('vault:'))
        need(
          {
            type: 'ssh_secret',
            bindings: [{ kind: 'ssh', host_ref: upstreamHostRef(name) }],
            path: ['upstreams', name, 'env', env],
          },
          value,
        );
    if (u.url !== undefined && u.credential !== undefined) {
      const url = new URL(u.url);
      need(
        {
          type: 'bearer',
          bindings: [{ kind: 'http', origin: url.origin, path_prefix: url.pathname }],
          path: ['upstreams', name, 'credential'],
        },
        u.credential,
      );
    }
  }
  return out;
}

/** The `env:VAR` credentials of the configuration: variable → where it is referenced. */
export function envNeeds(config: GatewayConfig): Map<string, FieldPath> {
  const out = new Map<string, FieldPath>();
  for (const [name, c] of Object.entries(config.credentials))
    if (c.ref.startsWith('env:') && !out.has(c.ref.slice(4)))
      out.set(c.ref.slice(4), ['credentials', name, 'ref']);
  return out;
}
