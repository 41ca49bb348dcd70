// OAuth state in the vault (upstream MCP servers that need OAuth, issue 36): the clients Candor
// holds with authorization servers (one per issuer) and the tokens of each upstream.
//
// Contracts:
// - Tokens and client secrets are sealed like credential values; the aad binds a grant's tokens to
//   the upstream, its URL, the resource, the issuer and the client, so a grant edited in the file
//   (pointed at another server) fails to open (`integrity`) instead of travelling there.
// - Reading tokens goes through the gate: a locked vault releases none (`locked`).
// - Every token read or saved is handed to `onSecret` (the redactor) before anyone else sees it.
// - Expiry, scopes and times are in clear: `candor upstream status` shows them without the key.
import { canonicalJson } from '../core/canonical.js';
import type { Clock, Random } from '../core/time.js';
import { open, seal } from './crypto.js';
import type { StoredOAuthClient, StoredOAuthGrant, VaultFile } from './file.js';
import { fail, ok, type ResolveFailure, type Result, type VaultFailure } from './types.js';

/** A client held with one authorization server. */
export interface OAuthClient {
  issuer: string;
  client_id: string;
  how: StoredOAuthClient['how'];
  redirect_uris: string[];
  token_endpoint_auth_method: string;
  client_secret: string | null;
}

/** What a grant says in clear (status, listing). */
export type OAuthGrantInfo = Omit<StoredOAuthGrant, 'nonce' | 'ciphertext' | 'tag'> & {
  key: string;
};

/** A grant with its tokens. */
export interface OAuthGrant extends OAuthGrantInfo {
  access_token: string;
  refresh_token: string | null;
}

/** The grant to store: its tokens and what it says in clear. */
export type NewOAuthGrant = Omit<OAuthGrant, 'key' | 'has_refresh_token'>;

export interface VaultOAuth {
  /** The grant under `key` with its tokens, or null; gated (locked: `locked`). */
  grant(key: string): Promise<Result<OAuthGrant | null, ResolveFailure>>;
  /** Stores (replaces) the grant under `key`. */
  saveGrant(key: string, grant: NewOAuthGrant): Promise<Result<OAuthGrantInfo, VaultFailure>>;
  /** Changes what a grant says in clear (a login now required, a scope asked for); tokens kept. */
  markGrant(
    key: string,
    patch: { login_required?: string | null; step_up_scope?: string | null },
  ): Promise<Result<void, VaultFailure>>;
  removeGrant(key: string): Promise<Result<boolean, VaultFailure>>;
  /** The client held with `issuer`, or null; gated. */
  client(issuer: string): Promise<Result<OAuthClient | null, ResolveFailure>>;
  saveClient(client: OAuthClient): Promise<Result<void, VaultFailure>>;
}

/** The vault's internals the OAuth store works with (src/vault/store.ts). */
export interface OAuthStoreDeps {
  vaultId: string;
  clock: Clock;
  random: Random;
  valuesKey: () => Uint8Array;
  readGated: () => Promise<Result<VaultFile, ResolveFailure>>;
  mutate: <T>(fn: (file: VaultFile) => Result<T, VaultFailure>) => Promise<Result<T, VaultFailure>>;
  onSecret?: ((secret: string) => void) | undefined;
}

const grantAad = (vaultId: string, key: string, g: Omit<StoredOAuthGrant, 'nonce'>): string =>
  canonicalJson({
    v: 1,
    kind: 'oauth_grant',
    vault_id: vaultId,
    key,
    upstream: g.upstream,
    subject: g.subject,
    server_url: g.server_url,
    resource: g.resource,
    issuer: g.issuer,
    client_id: g.client_id,
  });

const clientAad = (vaultId: string, c: { issuer: string; client_id: string }): string =>
  canonicalJson({
    v: 1,
    kind: 'oauth_client',
    vault_id: vaultId,
    issuer: c.issuer,
    client_id: c.client_id,
  });

export function infoOfGrant(key: string, g: StoredOAuthGrant): OAuthGrantInfo {
  const { nonce: _n, ciphertext: _c, tag: _t, ...info } = g;
  return { key, ...info };
}

/** The grants a vault file holds, in clear (no key needed: no token is read). */
export function grantsOf(file: VaultFile): OAuthGrantInfo[] {
  const grants = file.oauth_grants ?? {};
  return Object.keys(grants)
    .sort()
    .map((k) => infoOfGrant(k, grants[k]!));
}

export function oauthStore(d: OAuthStoreDeps): VaultOAuth {
  const integrity = (what: string): ResolveFailure => ({
    code: 'integrity',
    message: `The OAuth ${what} failed authentication; the vault file was altered.`,
  });
  return {
    async grant(key) {
      const read = await d.readGated();
      if (!read.ok) return read;
      const stored = read.value.oauth_grants?.[key];
      if (!stored) return ok(null);
      const plain = open(d.valuesKey(), stored, grantAad(d.vaultId, key, stored));
      if (plain === null) return fail(integrity(`tokens of "${key}"`));
      let tokens: { access_token?: unknown; refresh_token?: unknown };
      try {
        tokens = JSON.parse(plain) as typeof tokens;
      } catch {
        return fail(integrity(`tokens of "${key}"`));
      }
      if (typeof tokens.access_token !== 'string') return fail(integrity(`tokens of "${key}"`));
      const refresh = typeof tokens.refresh_token === 'string' ? tokens.refresh_token : null;
      d.onSecret?.(tokens.access_token);
      if (refresh) d.onSecret?.(refresh);
      return ok({
        ...infoOfGrant(key, stored),
        access_token: tokens.access_token,
        refresh_token: refresh,
      });
    },

    saveGrant: (key, grant) => {
      d.onSecret?.(grant.access_token);
      if (grant.refresh_token) d.onSecret?.(grant.refresh_token);
      return d.mutate((file) => {
        const { access_token, refresh_token, ...clear } = grant;
        const meta = { ...clear, has_refresh_token: refresh_token !== null };
        const sealed = seal(
          d.valuesKey(),
          JSON.stringify({ access_token, refresh_token }),
          grantAad(d.vaultId, key, { ...meta, ciphertext: '', tag: '' }),
          d.random,
        );
        const stored: StoredOAuthGrant = { ...meta, ...sealed };
        file.oauth_grants = { ...(file.oauth_grants ?? {}), [key]: stored };
        return ok(infoOfGrant(key, stored));
      });
    },

    markGrant: (key, patch) =>
      d.mutate((file) => {
        const stored = file.oauth_grants?.[key];
        if (!stored)
          return fail({ code: 'unknown_credential', message: `No OAuth tokens for "${key}".` });
        // Only fields outside the aad change: the sealed tokens stay valid.
        if (patch.login_required !== undefined) stored.login_required = patch.login_required;
        if (patch.step_up_scope !== undefined) stored.step_up_scope = patch.step_up_scope;
        return ok(undefined);
      }),

    removeGrant: (key) =>
      d.mutate((file) => {
        if (!file.oauth_grants?.[key]) return ok(false);
        delete file.oauth_grants[key];
        return ok(true);
      }),

    async client(issuer) {
      const read = await d.readGated();
      if (!read.ok) return read;
      const stored = read.value.oauth_clients?.[issuer];
      if (!stored) return ok(null);
      let secret: string | null = null;
      if (stored.secret) {
        secret = open(d.valuesKey(), stored.secret, clientAad(d.vaultId, stored));
        if (secret === null) return fail(integrity(`client of ${issuer}`));
        d.onSecret?.(secret);
      }
      const { secret: _s, created_at: _c, ...rest } = stored;
      return ok({ ...rest, client_secret: secret });
    },

    saveClient: (client) => {
      if (client.client_secret) d.onSecret?.(client.client_secret);
      return d.mutate((file) => {
        const { client_secret, ...rest } = client;
        const stored: StoredOAuthClient = {
          ...rest,
          created_at: d.clock.now(),
          secret: client_secret
            ? seal(d.valuesKey(), client_secret, clientAad(d.vaultId, client), d.random)
            : null,
        };
        file.oauth_clients = { ...(file.oauth_clients ?? {}), [client.issuer]: stored };
        return ok(undefined);
      });
    },
  };
}

/**
 * Re-seals every OAuth token set and client secret under a new values key (`rekey`). Returns the
 * name of the first entry that fails to open (nothing should then be written), or null.
 */
export function resealOAuth(
  file: VaultFile,
  vaultId: string,
  from: Uint8Array,
  to: Uint8Array,
  random: Random,
): string | null {
  for (const [key, g] of Object.entries(file.oauth_grants ?? {})) {
    const aad = grantAad(vaultId, key, g);
    const plain = open(from, g, aad);
    if (plain === null) return `OAuth tokens "${key}"`;
    Object.assign(g, seal(to, plain, aad, random));
  }
  for (const c of Object.values(file.oauth_clients ?? {})) {
    if (!c.secret) continue;
    const aad = clientAad(vaultId, c);
    const plain = open(from, c.secret, aad);
    if (plain === null) return `OAuth client of ${c.issuer}`;
    c.secret = seal(to, plain, aad, random);
  }
  return null;
}
