// How a stored credential is authenticated (its aad) and presented to a transport.
import { canonicalJson } from '../core/canonical.js';
import type { StoredCredential } from './file.js';
import type { Binding, CredentialInfo, CredentialType, ResolvedCredential } from './types.js';

export const DEFAULT_API_KEY_HEADER = 'X-Api-Key';

/** How a decrypted value is presented to the transport. */
export function present(
  meta: { type: CredentialType; username?: string | undefined; header_name?: string | undefined },
  secret: string,
): ResolvedCredential {
  switch (meta.type) {
    case 'bearer':
      return {
        kind: 'http_header',
        header_name: 'Authorization',
        header_value: `Bearer ${secret}`,
      };
    case 'basic': {
      const token = Buffer.from(`${meta.username ?? ''}:${secret}`, 'utf8').toString('base64');
      return { kind: 'http_header', header_name: 'Authorization', header_value: `Basic ${token}` };
    }
    case 'api_key':
      return {
        kind: 'http_header',
        header_name: meta.header_name ?? DEFAULT_API_KEY_HEADER,
        header_value: secret,
      };
    case 'ssh_key':
      return { kind: 'ssh_private_key', private_key: secret };
    case 'ssh_secret':
      return { kind: 'ssh_secret_value', value: secret };
  }
}

/** The aad of a value: moving a ciphertext to another name, type or binding fails to open. */
export function aadFor(
  vaultId: string,
  name: string,
  meta: {
    type: CredentialType;
    username?: string | undefined;
    header_name?: string | undefined;
    bindings: Binding[];
  },
): string {
  return canonicalJson({
    v: 1,
    vault_id: vaultId,
    name,
    type: meta.type,
    username: meta.username ?? null,
    header_name: meta.header_name ?? null,
    bindings: meta.bindings,
  });
}

export function infoOf(name: string, stored: StoredCredential): CredentialInfo {
  return {
    name,
    type: stored.type,
    ...(stored.username !== undefined ? { username: stored.username } : {}),
    ...(stored.header_name !== undefined ? { header_name: stored.header_name } : {}),
    bindings: stored.bindings,
    created_at: stored.created_at,
    rotated_at: stored.rotated_at,
  };
}
