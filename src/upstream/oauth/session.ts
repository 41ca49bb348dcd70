// The tokens of one upstream while a gateway runs, and the fetch its Streamable HTTP transport
// uses. Rules:
// - A request leaves only with a token: none held, a login required, a locked vault or a refused
//   refresh stops it before any byte (UpstreamAuthError, `credential`): nothing was sent.
// - A token that expires within the margin is refreshed first (one refresh at a time; a token
//   another process refreshed meanwhile is taken from the store instead of refreshing again).
// - A 401 is an answer that refused the request: nothing was done, so the same request is sent
//   once more after a refresh. A second 401 is the upstream rejecting Candor's credential.
// - A 403 refuses as well; with `insufficient_scope` the scope it names is recorded, so the next
//   `candor upstream login` asks for it (step-up), and the refusal names it.
// - Tokens go into the Authorization header only: never into an error, a log line or a result.
import {
  discoverAuthorizationServerMetadata,
  extractWWWAuthenticateParams,
  OAuthError,
  refreshAuthorization,
  type AuthorizationServerMetadata,
  type FetchLike,
} from '@modelcontextprotocol/client';
import { clientInformation, configuredClient } from './client.js';
import { codeOf } from './discovery.js';
import {
  grantKey,
  type GrantPrincipal,
  type OAuthClient,
  type OAuthGrant,
  type OAuthSettings,
  type OAuthStore,
} from './port.js';

/** Why no request could be made (nothing was sent). */
export type CredentialReason =
  | 'not_logged_in'
  | 'login_required'
  | 'refresh_refused'
  | 'locked'
  | 'store_unavailable'
  | 'authorization_server_unreachable'
  /** token_exchange: the authorization server refused to exchange the caller's token. */
  | 'exchange_refused'
  /** token_exchange: the caller presented no token that could be exchanged. */
  | 'no_subject_token'
  /** Per-principal upstream: a reconciliation lookup with no caller to run it as. */
  | 'lookup_needs_caller';

/** What an upstream's auth said, as facts for the MCP adapter (no token, no server text). */
export type AuthFacts =
  /** `login`: the command a person runs to log in (per-principal grants name the principal). */
  | { kind: 'credential'; reason: CredentialReason; login?: string }
  | { kind: 'refused'; status: 401 | 403; error?: string; scope?: string };

/** Thrown by the authorized fetch; the connection turns it into call facts. */
export class UpstreamAuthError extends Error {
  readonly code = 'upstream_auth';
  constructor(readonly facts: AuthFacts) {
    super(
      facts.kind === 'credential'
        ? `upstream credential unavailable (${facts.reason})`
        : `upstream refused (${facts.status}${facts.error ? ` ${facts.error}` : ''})`,
    );
  }
}

/** The auth facts an error carries (on itself or a cause), or null. */
export function authFactsOf(error: unknown): AuthFacts | null {
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    if (e instanceof UpstreamAuthError) return e.facts;
    e = (e as { cause?: unknown }).cause;
  }
  return null;
}

type TokenAnswer = { ok: true; token: string } | { ok: false; facts: AuthFacts };

export interface TokenSource {
  /** A token to send now. */
  token(): Promise<TokenAnswer>;
  /** After `rejected` was answered 401: a refreshed token (or one refreshed meanwhile). */
  refreshAfter(rejected: string): Promise<TokenAnswer>;
  /** A 403 insufficient_scope: the scope is asked for at the next login. */
  stepUp(scope: string | undefined): Promise<void>;
}

export interface TokenSourceOptions {
  upstream: string;
  server_url: string;
  store: OAuthStore;
  settings?: OAuthSettings | undefined;
  /** Whose grant (per-principal tokens); absent: the operator's own login. */
  principal?: GrantPrincipal | undefined;
  fetchFn?: FetchLike;
  now?: () => number;
  log?: (line: string) => void;
}

/** The command a person runs to log in for this grant (never a token). */
export function loginCommand(upstream: string, principal?: GrantPrincipal): string {
  if (!principal) return `candor upstream login ${upstream}`;
  const who = /^[\w.@:+-]+$/.test(principal.subject)
    ? principal.subject
    : `'${principal.subject.replace(/'/g, "'\\''")}'`;
  return `candor upstream login ${upstream} --as ${who}${principal.issuer === null ? ' --issuer static' : ''}`;
}

/** Refresh this long before expiry: a quarter of the token's life, between 1 s and 60 s. */
function margin(g: OAuthGrant): number {
  if (g.expires_at === null) return 0;
  const life = g.expires_at - (g.refreshed_at ?? g.obtained_at);
  return Math.min(60_000, Math.max(1_000, life / 4));
}

export function tokenSource(o: TokenSourceOptions): TokenSource {
  const now = o.now ?? Date.now;
  const key = grantKey(o.upstream, o.principal);
  const login = loginCommand(o.upstream, o.principal);
  const log = o.log ?? (() => undefined);
  let metadata: AuthorizationServerMetadata | undefined;
  let inflight: Promise<TokenAnswer> | null = null;
  const no = (reason: CredentialReason): TokenAnswer => ({
    ok: false,
    facts: { kind: 'credential', reason, login },
  });

  async function load(): Promise<
    { ok: true; grant: OAuthGrant } | { ok: false; answer: TokenAnswer }
  > {
    const r = await o.store.grant(key);
    if (!r.ok)
      return {
        ok: false,
        answer: no(r.failure.code === 'locked' ? 'locked' : 'store_unavailable'),
      };
    const g = r.value;
    // Tokens are bound to the URL they were obtained for: a changed URL needs a new login.
    if (!g || g.server_url !== o.server_url) return { ok: false, answer: no('not_logged_in') };
    if (g.login_required) return { ok: false, answer: no('login_required') };
    return { ok: true, grant: g };
  }

  async function refresh(g: OAuthGrant): Promise<TokenAnswer> {
    if (!g.refresh_token) {
      await o.store.markGrant(key, { login_required: 'no_refresh_token' });
      return no('login_required');
    }
    let client: OAuthClient | null = null;
    try {
      metadata ??= await discoverAuthorizationServerMetadata(g.issuer, {
        ...(o.fetchFn ? { fetchFn: o.fetchFn } : {}),
      });
    } catch (error) {
      log(`upstream ${o.upstream}: the authorization server cannot be reached (${codeOf(error)})`);
      return no('authorization_server_unreachable');
    }
    if (!metadata) return no('authorization_server_unreachable');
    const configured = await configuredClient(g.issuer, metadata.token_endpoint, o.settings, {
      store: o.store,
      where: `upstreams.${o.upstream}.oauth`,
    });
    if (configured.ok && configured.value) client = configured.value;
    else {
      const held = await o.store.client(g.issuer);
      if (!held.ok) return no(held.failure.code === 'locked' ? 'locked' : 'store_unavailable');
      client = held.value;
    }
    if (!client || client.client_id !== g.client_id) return no('login_required');
    let tokens: Awaited<ReturnType<typeof refreshAuthorization>>;
    try {
      tokens = await refreshAuthorization(g.issuer, {
        metadata,
        clientInformation: clientInformation(client),
        refreshToken: g.refresh_token,
        resource: g.resource,
        ...(o.fetchFn ? { fetchFn: o.fetchFn } : {}),
      });
    } catch (error) {
      // An OAuth error answer (invalid_grant: revoked, expired, reused) needs a person; anything
      // else (no answer) is the authorization server being away: nothing was sent either way.
      const oauthCode = OAuthError.isInstance(error) ? error.code : null;
      if (
        oauthCode !== null &&
        oauthCode !== 'server_error' &&
        oauthCode !== 'temporarily_unavailable'
      ) {
        await o.store.markGrant(key, { login_required: `refresh_refused:${oauthCode}` });
        log(
          `upstream ${o.upstream}: the authorization server refused the refresh (${oauthCode}); a person must log in again: ${login}`,
        );
        return no('refresh_refused');
      }
      log(`upstream ${o.upstream}: the token refresh got no answer (${codeOf(error)})`);
      return no('authorization_server_unreachable');
    }
    const at = now();
    const saved = await o.store.saveGrant(key, {
      upstream: g.upstream,
      subject: g.subject,
      server_url: g.server_url,
      resource: g.resource,
      issuer: g.issuer,
      client_id: g.client_id,
      scope: tokens.scope ?? g.scope,
      requested_scope: g.requested_scope,
      step_up_scope: g.step_up_scope,
      token_type: tokens.token_type,
      expires_at: tokens.expires_in !== undefined ? at + tokens.expires_in * 1000 : null,
      obtained_at: g.obtained_at,
      refreshed_at: at,
      login_required: null,
      access_token: tokens.access_token,
      refresh_token: tokens.refresh_token ?? g.refresh_token,
    });
    if (!saved.ok)
      log(`upstream ${o.upstream}: the refreshed tokens cannot be stored (${saved.failure.code})`);
    return { ok: true, token: tokens.access_token };
  }

  /** One refresh at a time; `stale` is the token known not to work. */
  function refreshOnce(stale: string | null): Promise<TokenAnswer> {
    inflight ??= (async () => {
      try {
        const loaded = await load();
        if (!loaded.ok) return loaded.answer;
        // Another process (or call) refreshed already: use its token.
        if (stale !== null && loaded.grant.access_token !== stale && !expiring(loaded.grant))
          return { ok: true, token: loaded.grant.access_token };
        return await refresh(loaded.grant);
      } finally {
        inflight = null;
      }
    })();
    return inflight;
  }

  const expiring = (g: OAuthGrant) => g.expires_at !== null && g.expires_at - now() <= margin(g);

  return {
    async token() {
      if (inflight) return inflight;
      const loaded = await load();
      if (!loaded.ok) return loaded.answer;
      if (!expiring(loaded.grant)) return { ok: true, token: loaded.grant.access_token };
      return refreshOnce(loaded.grant.access_token);
    },
    refreshAfter: (rejected) => refreshOnce(rejected),
    async stepUp(scope) {
      if (!scope) return;
      const r = await o.store.grant(key);
      const before = r.ok && r.value ? r.value.step_up_scope : null;
      const union = [...new Set([...(before ?? '').split(' '), ...scope.split(' ')])]
        .filter(Boolean)
        .join(' ');
      await o.store.markGrant(key, { step_up_scope: union });
    },
  };
}

/**
 * The fetch an OAuth upstream's transport uses: the current token in the Authorization header,
 * one refresh-and-resend after a 401, refusals thrown as UpstreamAuthError (see the rules above).
 */
export function authorizedFetch(source: TokenSource, base: FetchLike = fetch): FetchLike {
  const send = (url: string | URL, init: RequestInit | undefined, token: string) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return base(url, { ...init, headers });
  };
  return async (url, init) => {
    const first = await source.token();
    if (!first.ok) throw new UpstreamAuthError(first.facts);
    let res = await send(url, init, first.token);
    if (res.status === 401) {
      await res.arrayBuffer().catch(() => undefined);
      const again = await source.refreshAfter(first.token);
      if (!again.ok) throw new UpstreamAuthError(again.facts);
      res = await send(url, init, again.token);
      if (res.status === 401) {
        const c = extractWWWAuthenticateParams(res);
        await res.arrayBuffer().catch(() => undefined);
        throw new UpstreamAuthError({
          kind: 'refused',
          status: 401,
          ...(c.error ? { error: c.error } : {}),
        });
      }
    }
    if (res.status === 403) {
      const c = extractWWWAuthenticateParams(res);
      await res.arrayBuffer().catch(() => undefined);
      if (c.error === 'insufficient_scope') await source.stepUp(c.scope);
      throw new UpstreamAuthError({
        kind: 'refused',
        status: 403,
        ...(c.error ? { error: c.error } : {}),
        ...(c.scope ? { scope: c.scope } : {}),
      });
    }
    return res;
  };
}
