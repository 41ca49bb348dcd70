// RFC 8693 token exchange (`oauth.tokens: token_exchange`): the authenticated caller's own access
// token (the subject token) is exchanged at the upstream's authorization server for a token whose
// resource (RFC 8707) is the upstream; that token, bound to the caller, is what the upstream sees.
// Rules:
// - The caller's token never leaves for the upstream: it goes into the exchange request to the
//   authorization server, and nowhere else (no log line, error or result names it).
// - No exchanged token, no request: a refusal (an OAuth error answer), a server that does not
//   offer the grant, or a missing client stops the call before any byte reaches the upstream
//   (`credential`, nothing sent; a person must act). No answer at all is the authorization server
//   being away (`authorization_server_unreachable`, a local failure).
// - An exchanged token is kept in memory only, for the subject token it came from, until shortly
//   before it expires; a 401 from the upstream drops it and exchanges once more.
// - Every exchanged token is handed to `onSecret` (the redactor) before it is used.
import { createHash } from 'node:crypto';
import type { FetchLike } from '@modelcontextprotocol/client';
import { configuredClient } from './client.js';
import { codeOf, type Discovered } from './discovery.js';
import type { OAuthClient, OAuthSettings, OAuthStore } from './port.js';
import type { OAuthResult } from './problem.js';
import type { CredentialReason, TokenSource } from './session.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

export interface ExchangeSourceOptions {
  upstream: string;
  store: OAuthStore;
  settings?: OAuthSettings | undefined;
  /** The upstream's authorization server, found once per gateway (shared by every principal). */
  discovered: () => Promise<OAuthResult<Discovered>>;
  /** The caller's current access token (the subject token), or null when it presented none. */
  subjectToken: () => string | null;
  /** `audience` sent besides the resource (`oauth.audience`). */
  audience?: string | undefined;
  onSecret?: ((secret: string) => void) | undefined;
  fetchFn?: FetchLike;
  now?: () => number;
  log?: (line: string) => void;
}

type Answer = Awaited<ReturnType<TokenSource['token']>>;

const digest = (s: string) => createHash('sha256').update(s).digest('base64url');

export function exchangeSource(o: ExchangeSourceOptions): TokenSource {
  const now = o.now ?? Date.now;
  const log = o.log ?? (() => undefined);
  const fetchFn = o.fetchFn ?? fetch;
  let held: { token: string; expires_at: number | null; of: string; life: number } | null = null;
  let inflight: Promise<Answer> | null = null;
  const no = (reason: CredentialReason): Answer => ({
    ok: false,
    facts: { kind: 'credential', reason },
  });

  async function clientFor(d: Discovered): Promise<OAuthClient | null> {
    const configured = await configuredClient(d.issuer, d.metadata.token_endpoint, o.settings, {
      store: o.store,
      where: `upstreams.${o.upstream}.oauth`,
    });
    if (configured.ok && configured.value) return configured.value;
    const kept = await o.store.client(d.issuer);
    return kept.ok ? kept.value : null;
  }

  async function exchange(subject: string): Promise<Answer> {
    const found = await o.discovered();
    if (!found.ok) {
      log(
        `upstream ${o.upstream}: token exchange: ${found.problem.message} (${found.problem.code})`,
      );
      return no(
        found.problem.code === 'unreachable' || found.problem.code === 'discovery_failed'
          ? 'authorization_server_unreachable'
          : 'exchange_refused',
      );
    }
    const d = found.value;
    const offered = d.metadata.grant_types_supported;
    if (offered && !offered.includes(TOKEN_EXCHANGE_GRANT)) {
      log(
        `upstream ${o.upstream}: the authorization server ${d.issuer} does not offer token exchange (RFC 8693); use tokens: per_principal`,
      );
      return no('exchange_refused');
    }
    const client = await clientFor(d);
    if (!client) {
      log(
        `upstream ${o.upstream}: token exchange needs a client the authorization server ${d.issuer} knows: set upstreams.${o.upstream}.oauth.client_credential (or client_id), or log in once as the operator`,
      );
      return no('exchange_refused');
    }
    const body = new URLSearchParams({
      grant_type: TOKEN_EXCHANGE_GRANT,
      subject_token: subject,
      subject_token_type: ACCESS_TOKEN_TYPE,
      requested_token_type: ACCESS_TOKEN_TYPE,
      resource: d.resource,
    });
    if (o.audience !== undefined) body.set('audience', o.audience);
    if (o.settings?.scopes?.length) body.set('scope', o.settings.scopes.join(' '));
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    if (client.client_secret && client.token_endpoint_auth_method === 'client_secret_post') {
      body.set('client_id', client.client_id);
      body.set('client_secret', client.client_secret);
    } else if (client.client_secret) {
      // RFC 6749 §2.3.1: both parts form-encoded before the Basic encoding.
      const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
      headers['authorization'] =
        `Basic ${Buffer.from(`${enc(client.client_id)}:${enc(client.client_secret)}`).toString('base64')}`;
    } else {
      body.set('client_id', client.client_id);
    }
    let res: Response;
    let answer: Record<string, unknown>;
    try {
      res = await fetchFn(d.metadata.token_endpoint, {
        method: 'POST',
        headers,
        body: body.toString(),
        signal: AbortSignal.timeout(30_000),
      });
      answer = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    } catch (error) {
      log(`upstream ${o.upstream}: the token exchange got no answer (${codeOf(error)})`);
      return no('authorization_server_unreachable');
    }
    if (!res.ok) {
      const code = typeof answer['error'] === 'string' ? answer['error'] : `HTTP ${res.status}`;
      if (res.status >= 500 || code === 'temporarily_unavailable') {
        log(`upstream ${o.upstream}: the token exchange failed at the server (${code})`);
        return no('authorization_server_unreachable');
      }
      // Only the error code: the description is the server's text.
      log(
        `upstream ${o.upstream}: the authorization server refused the token exchange (${code.slice(0, 60)})`,
      );
      return no('exchange_refused');
    }
    const token = answer['access_token'];
    const type = answer['token_type'];
    const issued = answer['issued_token_type'];
    if (
      typeof token !== 'string' ||
      token.length === 0 ||
      typeof type !== 'string' ||
      type.toLowerCase() !== 'bearer' ||
      (issued !== undefined && issued !== ACCESS_TOKEN_TYPE && issued !== JWT_TOKEN_TYPE)
    ) {
      log(
        `upstream ${o.upstream}: the token exchange answer is not a bearer access token (token_type ${JSON.stringify(typeof type === 'string' ? type.slice(0, 20) : null)})`,
      );
      return no('exchange_refused');
    }
    o.onSecret?.(token);
    const expiresIn = typeof answer['expires_in'] === 'number' ? answer['expires_in'] : null;
    const at = now();
    held = {
      token,
      expires_at: expiresIn === null ? null : at + expiresIn * 1000,
      of: digest(subject),
      life: expiresIn === null ? 0 : expiresIn * 1000,
    };
    return { ok: true, token };
  }

  const fresh = (subject: string) =>
    held !== null &&
    held.of === digest(subject) &&
    (held.expires_at === null ||
      held.expires_at - now() > Math.min(60_000, Math.max(1_000, held.life / 4)));

  function once(stale: string | null): Promise<Answer> {
    inflight ??= (async () => {
      try {
        const subject = o.subjectToken();
        if (subject === null) return no('no_subject_token');
        // Exchanged meanwhile by another call: use it.
        if (fresh(subject) && held!.token !== stale) return { ok: true, token: held!.token };
        return await exchange(subject);
      } finally {
        inflight = null;
      }
    })();
    return inflight;
  }

  return {
    async token() {
      const subject = o.subjectToken();
      if (subject === null) return no('no_subject_token');
      if (!inflight && fresh(subject)) return { ok: true, token: held!.token };
      return once(null);
    },
    refreshAfter: (rejected) => {
      if (held?.token === rejected) held = null;
      return once(rejected);
    },
    stepUp(scope) {
      if (scope)
        log(
          `upstream ${o.upstream}: the upstream asked for the scope ${JSON.stringify(scope)}, which the exchanged token lacks; grant it to the caller at the authorization server`,
        );
      return Promise.resolve();
    },
  };
}
