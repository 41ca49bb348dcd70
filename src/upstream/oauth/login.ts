// `candor upstream login NAME`: the authorization-code flow with PKCE (S256), once, by a person.
//   discovery -> a client (configured, held, metadata document or registered) -> the authorization
//   URL (state, PKCE challenge, scope, resource = the RFC 8707 indicator) -> the person's browser
//   -> the redirect to a loopback listener on 127.0.0.1 (an ephemeral port), or the redirected
//   URL pasted by the person -> state checked, `iss` checked (RFC 9207) -> code exchanged ->
//   tokens stored for this upstream (and issuer, resource, URL).
// Scopes asked for: the configured ones, else the 401's scope, else the resource's
// scopes_supported; plus every scope the upstream asked for since (step-up) and the scope granted
// before, so a new login never loses what the last one had; `offline_access` where the
// authorization server lists it (a refresh token).
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  computeScopeUnion,
  exchangeAuthorization,
  startAuthorization,
  type FetchLike,
} from '@modelcontextprotocol/client';
import { clientInformation, obtainClient } from './client.js';
import { codeOf, discover } from './discovery.js';
import {
  grantKey,
  type GrantPrincipal,
  type OAuthGrantInfo,
  type OAuthSettings,
  type OAuthStore,
} from './port.js';
import { problem, type OAuthResult } from './problem.js';

export interface LoginOptions {
  upstream: string;
  server_url: string;
  store: OAuthStore;
  settings?: OAuthSettings | undefined;
  /** Scopes asked for on top of the usual ones (`--scope`). */
  extra_scopes?: string[];
  /**
   * Whose grant (`--as`): an authenticated caller of the gateway, for per-principal tokens.
   * Absent: the operator's own login.
   */
  principal?: GrantPrincipal | undefined;
  /** Shows the person what to do (the authorization URL). */
  say: (line: string) => void;
  /** Lines the person types: a redirected URL (or a bare code) pasted instead of the redirect. */
  pasted?: AsyncIterable<string> | undefined;
  /** How long to wait for the person (default 10 minutes). */
  timeout_ms?: number;
  fetchFn?: FetchLike;
  now?: () => number;
}

type Callback = { code: string; iss: string | undefined } | { error: string };

export async function login(o: LoginOptions): Promise<OAuthResult<OAuthGrantInfo>> {
  const now = o.now ?? Date.now;
  const fetchOpt = o.fetchFn ? { fetchFn: o.fetchFn } : {};
  const found = await discover(o.server_url, o.fetchFn);
  if (!found.ok) return found;
  const d = found.value;
  const key = grantKey(o.upstream, o.principal);
  const before = await o.store.grant(key).catch(() => null);
  const prior = before?.ok ? before.value : null;
  const base = o.settings?.scopes?.join(' ') ?? d.challenge_scope ?? d.scopes_supported?.join(' ');
  const offline = d.metadata.scopes_supported?.includes('offline_access')
    ? 'offline_access'
    : undefined;
  const scope = computeScopeUnion(
    base,
    prior?.server_url === o.server_url ? prior.scope : undefined,
    prior?.step_up_scope ?? undefined,
    o.extra_scopes?.join(' '),
    offline,
  );
  const client = await obtainClient(d, o.settings, scope, {
    store: o.store,
    where: `upstreams.${o.upstream}.oauth`,
    ...fetchOpt,
  });
  if (!client.ok) return client;

  const listener = await loopback();
  const redirectUri = `http://127.0.0.1:${listener.port}/callback`;
  const state = randomBytes(32).toString('base64url');
  try {
    let started: Awaited<ReturnType<typeof startAuthorization>>;
    try {
      started = await startAuthorization(d.issuer, {
        metadata: d.metadata,
        clientInformation: clientInformation(client.value),
        redirectUrl: redirectUri,
        state,
        resource: d.resource,
        ...(scope !== undefined ? { scope } : {}),
      });
    } catch (error) {
      return problem(
        'discovery_failed',
        `the authorization request cannot be built (${codeOf(error)})`,
      );
    }
    o.say(started.authorizationUrl.href);
    const answer = await Promise.race([
      listener.callback(state),
      pastedAnswer(o.pasted, state),
      new Promise<'timeout'>((r) =>
        setTimeout(() => r('timeout'), o.timeout_ms ?? 600_000).unref(),
      ),
    ]);
    if (answer === 'timeout' || answer === null) {
      listener.reply(400, 'Candor: the login was not completed.');
      return problem(
        'authorization_refused',
        'no authorization answer arrived (the login was not completed)',
      );
    }
    if ('error' in answer) {
      listener.reply(400, 'Candor: the authorization server refused; see the terminal.');
      // Only the error code: its description comes from the redirect and is not to be trusted.
      return problem(
        'authorization_refused',
        `the authorization server answered ${JSON.stringify(answer.error)}`,
      );
    }
    let tokens: Awaited<ReturnType<typeof exchangeAuthorization>>;
    try {
      tokens = await exchangeAuthorization(d.issuer, {
        metadata: d.metadata,
        clientInformation: clientInformation(client.value),
        authorizationCode: answer.code,
        ...(answer.iss !== undefined ? { iss: answer.iss } : {}),
        codeVerifier: started.codeVerifier,
        redirectUri,
        resource: d.resource,
        ...fetchOpt,
      });
    } catch (error) {
      const mixup = (error as { kind?: unknown }).kind === 'authorization_response';
      listener.reply(400, 'Candor: the login failed; see the terminal.');
      return mixup
        ? problem(
            'issuer_mismatch',
            `the authorization response names another issuer than ${d.issuer} (RFC 9207); the code was not used`,
          )
        : problem('token_request_failed', `the code exchange failed (${codeOf(error)})`);
    }
    // A login for a principal is kept for it only when the person who logged in is that principal
    // (where the same issuer names both, so the subjects can be compared): a link opened by
    // someone else must not become this principal's token.
    const who = o.principal ? loggedInSubject(tokens) : null;
    if (
      o.principal &&
      o.principal.issuer !== null &&
      sameIssuer(o.principal.issuer, d.issuer) &&
      who !== o.principal.subject
    ) {
      listener.reply(403, 'Candor: this login is not for the principal it was started for.');
      return problem(
        'wrong_principal',
        who === null
          ? `the authorization server did not say who logged in; nothing was stored for ${o.principal.subject}`
          : `the person who logged in is ${JSON.stringify(who)}, not ${JSON.stringify(o.principal.subject)}; nothing was stored`,
      );
    }
    const at = now();
    const saved = await o.store.saveGrant(key, {
      upstream: o.upstream,
      subject: o.principal?.subject ?? 'local',
      server_url: o.server_url,
      resource: d.resource,
      issuer: d.issuer,
      client_id: client.value.client_id,
      // RFC 6749 §5.1: without `scope` in the answer, the scope granted is the one asked for.
      scope: tokens.scope ?? scope ?? '',
      requested_scope: scope ?? '',
      step_up_scope: null,
      token_type: tokens.token_type,
      expires_at: tokens.expires_in !== undefined ? at + tokens.expires_in * 1000 : null,
      obtained_at: at,
      refreshed_at: null,
      login_required: null,
      access_token: tokens.access_token,
      refresh_token: tokens.refresh_token ?? null,
    });
    if (!saved.ok) {
      listener.reply(500, 'Candor: the tokens could not be stored; see the terminal.');
      return problem('vault', saved.failure.message);
    }
    listener.reply(200, 'Candor: logged in. You can close this tab.');
    return { ok: true, value: saved.value };
  } finally {
    await listener.close();
  }
}

const sameIssuer = (a: string, b: string) => a.replace(/\/$/, '') === b.replace(/\/$/, '');

/**
 * Who logged in, as the token response says: the ID token's `sub`, else a JWT access token's.
 * Read without verifying the signature: the response came straight from the token endpoint.
 */
function loggedInSubject(tokens: {
  id_token?: string | undefined;
  access_token: string;
}): string | null {
  for (const t of [tokens.id_token, tokens.access_token]) {
    const payload = t?.split('.')[1];
    if (!payload || t.split('.').length !== 3) continue;
    try {
      const sub = (
        JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { sub?: unknown }
      ).sub;
      if (typeof sub === 'string') return sub;
    } catch {
      // Not a JWT: opaque.
    }
  }
  return null;
}

/** A loopback HTTP listener on 127.0.0.1 (ephemeral port) for the authorization redirect. */
async function loopback(): Promise<{
  port: number;
  callback: (state: string) => Promise<Callback>;
  reply: (status: number, text: string) => void;
  close: () => Promise<void>;
}> {
  let waiting: ((c: Callback) => void) | null = null;
  let expected = '';
  let held: ServerResponse | null = null;
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method !== 'GET' || url.pathname !== '/callback') {
      res.writeHead(404).end();
      return;
    }
    // A redirect that does not carry this login's state is not ours (CSRF): refused, still waiting.
    if (url.searchParams.get('state') !== expected || !waiting) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('Candor: unexpected state.');
      return;
    }
    held = res;
    const done = waiting;
    waiting = null;
    done(callbackOf(url.searchParams));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    callback: (state) => {
      expected = state;
      return new Promise((r) => (waiting = r));
    },
    reply: (status, text) => {
      held?.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(text);
      held = null;
    },
    close: () =>
      new Promise<void>((r) => {
        held?.writeHead(410).end();
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

function callbackOf(params: URLSearchParams): Callback {
  const error = params.get('error');
  const code = params.get('code');
  if (error !== null || code === null) return { error: error ?? 'no_code' };
  return { code, iss: params.get('iss') ?? undefined };
}

/**
 * The first pasted line that is an answer: the redirected URL (state checked), or a bare code.
 * A bare code carries no state and no `iss`: the exchange still checks `iss` where the server
 * advertises it, so a bare code is refused there.
 */
async function pastedAnswer(
  lines: AsyncIterable<string> | undefined,
  state: string,
): Promise<Callback | null> {
  if (!lines) return new Promise<never>(() => undefined);
  for await (const raw of lines) {
    const line = raw.trim();
    if (!line) continue;
    if (/^https?:\/\//i.test(line)) {
      let url: URL;
      try {
        url = new URL(line);
      } catch {
        continue;
      }
      if (url.searchParams.get('state') !== state) continue;
      return callbackOf(url.searchParams);
    }
    if (/^[\x21-\x7e]+$/.test(line)) return { code: line, iss: undefined };
  }
  return new Promise<never>(() => undefined);
}
