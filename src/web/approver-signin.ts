// Sign-in of the approvals page, apart from the investigation view's access token:
//   - OpenID Connect, authorization code with PKCE (S256), against the configured issuer: `state`
//     is bound to a short-lived cookie of the browser that started the sign-in (no login CSRF),
//     `nonce` to the ID token; the ID token's signature (issuer's JWKS), `iss`, `aud` (our client)
//     and `exp` are checked with jose. The identity is the token's `sub` under its `iss`.
//   - Per-approver tokens (small setups): compared by SHA-256 in constant time; the identity is the
//     token's configured name.
//   - Who may decide: `approvers.subjects` / `approvers.claims` when configured, else anyone the
//     issuer signs in (and every configured token).
//   - A session is a random id in an HttpOnly cookie scoped to /approvals with its own CSRF token;
//     it lives in this process only (a restart signs everyone out) and ends after `session_ms`.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import type { ApproverIdentity } from '../approvals/identity.js';
import type { ApprovalsWebConfig } from '../config/approvals-web-schema.js';

export interface ApproverSession {
  id: string;
  identity: ApproverIdentity;
  /** The per-session token every form must carry back. */
  csrf: string;
  expires_at: number;
}

export type SignInResult =
  | { ok: true; value: ApproverSession; failure?: never }
  | { ok: false; failure: string; value?: never };

export interface ApproverSignIn {
  readonly oidc: boolean;
  readonly tokens: boolean;
  /** Starts an OpenID sign-in: the issuer URL to send the browser to and the state to bind. */
  begin(redirectUri: string): Promise<{ location: string; state: string }>;
  /** Finishes it from the callback's query; `boundState` is the state cookie of this browser. */
  finish(
    query: URLSearchParams,
    boundState: string | undefined,
    redirectUri: string,
  ): Promise<SignInResult>;
  /** Signs in with a per-approver token. */
  withToken(token: string): SignInResult;
  session(id: string | undefined): ApproverSession | null;
  end(id: string | undefined): void;
}

export interface SignInOptions {
  config: ApprovalsWebConfig;
  env?: Readonly<Record<string, string | undefined>>;
  fetch?: typeof fetch;
  now?: () => number;
  session_ms?: number;
}

const b64url = (b: Buffer): string => b.toString('base64url');
const random = (): string => b64url(randomBytes(32));
const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest();
/** Pending sign-ins are kept this long (a person at the issuer's login page). */
const LOGIN_MS = 10 * 60_000;

interface Discovered {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks: ReturnType<typeof createRemoteJWKSet>;
}

export function approverSignIn(options: SignInOptions): ApproverSignIn {
  const { config } = options;
  const env = options.env ?? process.env;
  const fetcher = options.fetch ?? fetch;
  const now = options.now ?? Date.now;
  const sessionMs = options.session_ms ?? 8 * 60 * 60_000;
  const sessions = new Map<string, ApproverSession>();
  const logins = new Map<string, { verifier: string; nonce: string; expires_at: number }>();
  let discovered: Promise<Discovered> | null = null;

  const discover = (): Promise<Discovered> => {
    discovered ??= (async () => {
      const issuer = config.issuer!;
      const res = await fetcher(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(10_000),
      });
      if (!res.ok) throw new Error(`the issuer's OpenID configuration answered HTTP ${res.status}`);
      const doc = (await res.json()) as Record<string, unknown>;
      // OpenID Discovery §4.3: the document must name the issuer it was fetched for.
      if (doc['issuer'] !== issuer && doc['issuer'] !== issuer.replace(/\/$/, ''))
        throw new Error(`the OpenID configuration names issuer ${JSON.stringify(doc['issuer'])}`);
      for (const k of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'])
        if (typeof doc[k] !== 'string') throw new Error(`the OpenID configuration has no ${k}`);
      return {
        issuer: doc['issuer'],
        authorization_endpoint: doc['authorization_endpoint'] as string,
        token_endpoint: doc['token_endpoint'] as string,
        jwks: createRemoteJWKSet(new URL(doc['jwks_uri'] as string), { timeoutDuration: 10_000 }),
      };
    })();
    // A failed discovery is tried again at the next sign-in.
    discovered.catch(() => (discovered = null));
    return discovered;
  };

  const mayDecide = (sub: string, claims: Readonly<Record<string, unknown>>): boolean => {
    const rule = config.approvers;
    if (!rule) return true;
    if (rule.subjects?.includes(sub)) return true;
    if (rule.claims) {
      return Object.entries(rule.claims).every(([k, want]) => {
        const have = claims[k];
        return Array.isArray(have) ? have.includes(want) : have === want;
      });
    }
    return false;
  };

  const open = (identity: ApproverIdentity): SignInResult => {
    const s: ApproverSession = {
      id: random(),
      identity,
      csrf: random(),
      expires_at: now() + sessionMs,
    };
    sessions.set(s.id, s);
    return { ok: true, value: s };
  };

  const tokenHashes = config.tokens.map((t) => ({
    name: t.name,
    hash: (): Buffer | null => {
      if (t.sha256) return Buffer.from(t.sha256, 'hex');
      const v = env[t.ref!.slice('env:'.length)];
      return v ? sha256(v) : null;
    },
  }));

  return {
    oidc: config.issuer !== undefined,
    tokens: config.tokens.length > 0,

    async begin(redirectUri) {
      const d = await discover();
      for (const [k, v] of logins) if (v.expires_at < now()) logins.delete(k);
      const state = random();
      const verifier = random();
      const nonce = random();
      logins.set(state, { verifier, nonce, expires_at: now() + LOGIN_MS });
      const url = new URL(d.authorization_endpoint);
      url.search = new URLSearchParams({
        response_type: 'code',
        client_id: config.client_id!,
        redirect_uri: redirectUri,
        scope: config.scopes.join(' '),
        state,
        nonce,
        code_challenge: b64url(sha256(verifier)),
        code_challenge_method: 'S256',
      }).toString();
      return { location: url.toString(), state };
    },

    async finish(query, boundState, redirectUri) {
      const state = query.get('state') ?? '';
      const pending = logins.get(state);
      // The state must be one this view issued, to this very browser (its cookie), and unused.
      if (!pending || boundState !== state || pending.expires_at < now())
        return { ok: false, failure: 'this sign-in was not started here (or took too long)' };
      logins.delete(state);
      const error = query.get('error');
      if (error) return { ok: false, failure: `the issuer refused the sign-in (${error})` };
      const code = query.get('code');
      if (!code) return { ok: false, failure: 'the issuer sent no authorization code' };
      const d = await discover();
      const secretRef = config.client_secret;
      const secret = secretRef ? env[secretRef.slice('env:'.length)] : undefined;
      if (secretRef && !secret)
        return { ok: false, failure: `approvals.web.client_secret: ${secretRef} is not set` };
      const body = new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        redirect_uri: redirectUri,
        code_verifier: pending.verifier,
      });
      const headers: Record<string, string> = {
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
      };
      if (secret)
        headers['authorization'] =
          `Basic ${Buffer.from(`${encodeURIComponent(config.client_id!)}:${encodeURIComponent(secret)}`).toString('base64')}`;
      else body.set('client_id', config.client_id!);
      const res = await fetcher(d.token_endpoint, {
        method: 'POST',
        headers,
        body,
        redirect: 'error',
        signal: AbortSignal.timeout(10_000),
      });
      const answer = (await res.json().catch(() => ({}))) as Record<string, unknown>;
      if (!res.ok || typeof answer['id_token'] !== 'string')
        return {
          ok: false,
          failure: `the issuer did not issue an ID token (HTTP ${res.status}${typeof answer['error'] === 'string' ? `, ${answer['error']}` : ''})`,
        };
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(answer['id_token'], d.jwks, {
          issuer: d.issuer,
          audience: config.client_id!,
        }));
      } catch (e) {
        return {
          ok: false,
          failure: `the ID token was refused (${e instanceof Error ? e.message : String(e)})`,
        };
      }
      if (payload['nonce'] !== pending.nonce)
        return { ok: false, failure: 'the ID token does not answer this sign-in (nonce)' };
      if (!payload.sub) return { ok: false, failure: 'the ID token names no subject' };
      if (!mayDecide(payload.sub, payload))
        return {
          ok: false,
          failure: `${payload.sub} signed in but is not an approver here (approvals.web.approvers)`,
        };
      return open({ kind: 'oidc', subject: payload.sub, issuer: d.issuer });
    },

    withToken(token) {
      const presented = sha256(token);
      for (const t of tokenHashes) {
        const h = t.hash();
        if (h && h.length === presented.length && timingSafeEqual(h, presented))
          return open({ kind: 'token', subject: t.name, issuer: null });
      }
      return { ok: false, failure: 'this approver token is not known here' };
    },

    session(id) {
      if (id === undefined) return null;
      const s = sessions.get(id);
      if (!s) return null;
      if (s.expires_at < now()) {
        sessions.delete(id);
        return null;
      }
      return s;
    },

    end(id) {
      if (id !== undefined) sessions.delete(id);
    },
  };
}

/** Constant-time comparison of two strings (the CSRF token). */
export function sameSecret(a: string | undefined, b: string): boolean {
  if (a === undefined) return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
