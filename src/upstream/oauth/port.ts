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

/** The key of an upstream's grant: its name, and the caller's subject for per-principal tokens. */
export const grantKey = (upstream: string, subject = 'local'): string =>
  subject === 'local' ? upstream : `${upstream}#${subject}`;
