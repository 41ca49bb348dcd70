// What the OAuth client needs from outside the upstream adapter (which imports only core): a
// store for clients and tokens (the vault implements it: src/vault/oauth.ts), the settings of
// one upstream (candor.yaml `upstreams.NAME.oauth`), and a configured client secret.

/** A client held with one authorization server (one per issuer). */
export interface OAuthClient {
  issuer: string;
  client_id: string;
  /** `registered` (by hand or RFC 7591), `metadata_document` (a Client ID Metadata Document URL). */
  how: 'registered' | 'metadata_document';
  redirect_uris: string[];
  token_endpoint_auth_method: string;
  client_secret: string | null;
}

/** What a grant says in clear: never a token. */
export interface OAuthGrantInfo {
  key: string;
  upstream: string;
  subject: string;
  server_url: string;
  resource: string;
  issuer: string;
  client_id: string;
  scope: string;
  requested_scope: string;
  step_up_scope: string | null;
  token_type: string;
  expires_at: number | null;
  obtained_at: number;
  refreshed_at: number | null;
  has_refresh_token: boolean;
  login_required: string | null;
}

export interface OAuthGrant extends OAuthGrantInfo {
  access_token: string;
  refresh_token: string | null;
}

export type NewOAuthGrant = Omit<OAuthGrant, 'key' | 'has_refresh_token'>;

type StoreResult<T> =
  | { ok: true; value: T; failure?: never }
  | { ok: false; failure: { code: string; message: string }; value?: never };

/** Where clients and tokens are kept. Reads are gated: a locked store fails with `locked`. */
export interface OAuthStore {
  grant(key: string): Promise<StoreResult<OAuthGrant | null>>;
  saveGrant(key: string, grant: NewOAuthGrant): Promise<StoreResult<OAuthGrantInfo>>;
  markGrant(
    key: string,
    patch: { login_required?: string | null; step_up_scope?: string | null },
  ): Promise<StoreResult<void>>;
  client(issuer: string): Promise<StoreResult<OAuthClient | null>>;
  saveClient(client: OAuthClient): Promise<StoreResult<void>>;
}

/** The settings of one upstream (candor.yaml `upstreams.NAME.oauth`). */
export interface OAuthSettings {
  scopes?: string[] | undefined;
  client_id?: string | undefined;
  client_metadata_url?: string | undefined;
  /**
   * A confidential client configured by hand: its id and secret, released for this token
   * endpoint (a vault `basic` credential bound to it), or why not.
   */
  client_credential?:
    | ((
        tokenEndpoint: string,
      ) => Promise<
        { ok: true; client_id: string; client_secret: string } | { ok: false; message: string }
      >)
    | undefined;
}

/** Whose grant: an authenticated caller's issuer (null: a static token) and subject. */
export interface GrantPrincipal {
  issuer: string | null;
  subject: string;
}

/**
 * The key of an upstream's grant: its name alone for the operator's own login, or the name, the
 * caller's issuer and subject for a per-principal grant (each part escaped, so no two principals
 * share a key).
 */
export const grantKey = (upstream: string, principal?: GrantPrincipal): string =>
  principal
    ? `${upstream}#${encodeURIComponent(principal.issuer ?? 'static')}#${encodeURIComponent(principal.subject)}`
    : upstream;

/** The principal a grant key names, or null for the operator's own (the upstream's name alone). */
export function principalOfKey(
  key: string,
): { upstream: string; principal: GrantPrincipal | null } | null {
  const parts = key.split('#');
  if (parts.length === 1) return { upstream: key, principal: null };
  if (parts.length !== 3) return null;
  try {
    const issuer = decodeURIComponent(parts[1]!);
    return {
      upstream: parts[0]!,
      principal: {
        issuer: issuer === 'static' ? null : issuer,
        subject: decodeURIComponent(parts[2]!),
      },
    };
  } catch {
    return null;
  }
}
