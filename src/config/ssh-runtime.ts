// The runtime's SSH options for a configuration: the `ssh.hosts` inventory, keys and secret_env
// values resolved from the vault at attempt time (inside the runtime, bound to the host: a vault
// entry serves only the `ssh:HOST_REF` it is bound to), and the start-up check that every vault
// reference names an entry of the right type and binding.
import type { SshRuntimeOptions } from '../ssh/adapter.js';
import type { Inventory } from '../ssh/inventory.js';
import type { CredentialInfo, Vault } from '../vault/index.js';
import type { GatewayConfig } from './schema.js';
import { PORT_CODE } from './credentials.js';
import { vaultBindings } from './ssh-actions.js';

const nameOf = (ref: string): string => ref.slice('vault:'.length);

/** SSH runtime options, or undefined when the configuration has no `ssh:` section. */
export function configSsh(
  config: GatewayConfig,
  options: { vault?: Vault; onSecret?: (secret: string) => void } = {},
): SshRuntimeOptions | undefined {
  const ssh = config.ssh;
  if (!ssh) return undefined;
  const inventory: Inventory = {};
  for (const [ref, h] of Object.entries(ssh.hosts))
    inventory[ref] = {
      host: h.host,
      port: h.port,
      user: h.user,
      key_ref: h.key_ref,
      host_key: h.host_key,
      ...(h.marker_dir !== undefined ? { marker_dir: h.marker_dir } : {}),
    };
  const vault = options.vault;
  return {
    inventory,
    // The transport asks by key ref; the key must be bound to every host that names it.
    async resolveKey(keyRef) {
      if (!vault || !keyRef.startsWith('vault:')) throw new Error('no vault for this key');
      const hosts = Object.entries(ssh.hosts).filter(([, h]) => h.key_ref === keyRef);
      let key: string | undefined;
      for (const [hostRef] of hosts) {
        const r = await vault.resolve(nameOf(keyRef), { kind: 'ssh', host_ref: hostRef });
        if (!r.ok || r.value.kind !== 'ssh_private_key') throw new Error('key unavailable');
        key = r.value.private_key;
      }
      if (key === undefined) throw new Error('no host names this key');
      options.onSecret?.(key);
      return Buffer.from(key, 'utf8');
    },
    async resolveSecret(ref, hostRef) {
      if (!vault || !ref.startsWith('vault:')) return { ok: false, code: 'unavailable' };
      const r = await vault.resolve(nameOf(ref), { kind: 'ssh', host_ref: hostRef });
      if (!r.ok) return { ok: false, code: PORT_CODE[r.failure.code] };
      if (r.value.kind !== 'ssh_secret_value') return { ok: false, code: 'binding_mismatch' };
      options.onSecret?.(r.value.value);
      return { ok: true, value: r.value.value };
    },
    ...(ssh.output_cap_bytes !== undefined ? { output_cap_bytes: ssh.output_cap_bytes } : {}),
  };
}

/**
 * Vault references of the `ssh:` section that cannot work: no such entry, the wrong type (a key
 * must be ssh_key, a secret_env value ssh_secret) or not bound to the host. Found at start, with
 * the place in the file, not at the first call.
 */
export function sshVaultProblems(
  config: GatewayConfig,
  credentials: readonly CredentialInfo[],
): Array<{ path: Array<string | number>; problem: string; missing?: true }> {
  const ssh = config.ssh;
  if (!ssh) return [];
  const byName = new Map(credentials.map((c) => [c.name, c]));
  const out: Array<{ path: Array<string | number>; problem: string; missing?: true }> = [];
  const check = (
    path: Array<string | number>,
    ref: string,
    type: 'ssh_key' | 'ssh_secret',
    hostRef: string,
  ): void => {
    const c = byName.get(nameOf(ref));
    if (!c)
      out.push({
        path,
        problem: `the vault holds no credential named "${nameOf(ref)}" (candor vault list shows what it holds)`,
        missing: true,
      });
    else if (c.type !== type)
      out.push({ path, problem: `vault entry "${c.name}" is ${c.type}; this needs ${type}` });
    else if (!c.bindings.some((b) => b.kind === 'ssh' && b.host_ref === hostRef))
      out.push({
        path,
        problem: `vault entry "${c.name}" is not bound to ssh:${hostRef} (candor vault set … --bind ssh:${hostRef})`,
      });
  };
  for (const [hostRef, h] of Object.entries(ssh.hosts))
    check(['ssh', 'hosts', hostRef, 'key_ref'], h.key_ref, 'ssh_key', hostRef);
  ssh.actions.forEach((a, i) => {
    for (const [name, ref] of vaultBindings(a))
      check(['ssh', 'actions', i, 'secret_env', name], ref, 'ssh_secret', a.host_ref);
  });
  return out;
}
