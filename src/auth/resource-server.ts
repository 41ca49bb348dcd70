// Candor as an OAuth 2.1 resource server (MCP authorization, RFC 9728, RFC 8707, RFC 6750):
//   - A JWT access token is accepted only when its signature verifies against the issuer's JWKS
//     (from the issuer's own metadata), `iss` is the configured issuer, `aud` names this gateway's
//     resource URI, `exp`/`nbf` hold (with a small clock tolerance) and it carries every scope the
//     gateway requires. A token for another resource is never accepted, so a token stolen from
//     another service cannot call here, and the token is never passed on to any destination.
//   - A static bearer token is compared by its SHA-256 hash (or against an env: variable) in
//     constant time; the file never holds the token itself.
//   - Every refusal says what the client must do, in the `WWW-Authenticate` challenge: 401 with
//     `resource_metadata` (and the scopes) when the token is missing or invalid, 403
//     `insufficient_scope` when it is valid but lacks a required scope.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import type { Caller } from '../core/caller.js';
import type { GatewayAuthConfig } from '../config/gateway-auth-schema.js';

/** An authenticated caller and the claims its token carried (static tokens: none). */
export interface Principal {
  caller: Caller;
  claims: Readonly<Record<string, unknown>>;
}

export type AuthFailure = {
  status: 401 | 403;
  /** RFC 6750 error code; absent when no credential was presented at all. */
  error?: 'invalid_token' | 'insufficient_scope' | 'invalid_request';
  /** One plain sentence for the client (never contains the token). */
  description: string;
  /** insufficient_scope: the scopes the request needs. */
  scopes?: readonly string[];
};

export type AuthResult =
  | { ok: true; value: Principal; failure?: never }
  | { ok: false; failure: AuthFailure; value?: never };

export interface ResourceServerOptions {
  auth: GatewayAuthConfig;
  /** This gateway's resource URI (RFC 8707): what `aud` must name unless `audience` is set. */
  resource: string;
  env?: Readonly<Record<string, string | undefined>>;
  fetch?: typeof fetch;
}

export interface ResourceServer {
  readonly resource: string;
  /** The Protected Resource Metadata document (RFC 9728). */
  metadata(): Record<string, unknown>;
  /** The well-known URL of that document for this resource (path-suffixed, RFC 9728 §3.1). */
  readonly metadataUrl: string;
  /** The `WWW-Authenticate` value for a refusal. */
  challenge(failure: AuthFailure): string;
  /** Checks the `Authorization` header of a request. */
  authenticate(authorization: string | undefined): Promise<AuthResult>;
}

const DEFAULT_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'];

export const sha256Hex = (s: string): string => createHash('sha256').update(s).digest('hex');

/** RFC 9728 §3.1: the well-known path is inserted between the host and the resource's path. */
export function metadataUrlFor(resource: string): string {
  const u = new URL(resource);
  const path = u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '');
  return `${u.origin}/.well-known/oauth-protected-resource${path}`;
}

function scopesOf(payload: JWTPayload): string[] {
  const s = payload['scope'];
  if (typeof s === 'string') return s.split(' ').filter((x) => x.length > 0);
  const scp = payload['scp'];
  if (Array.isArray(scp)) return scp.filter((x): x is string => typeof x === 'string');
  return [];
}

const quoted = (s: string): string => `"${s.replace(/["\\]/g, '')}"`;

/** Reads `jwks_uri` from the issuer's metadata (OAuth AS metadata, then OpenID discovery). */
async function discoverJwks(issuer: string, fetcher: typeof fetch): Promise<URL> {
  const base = issuer.replace(/\/$/, '');
  const u = new URL(issuer);
  const path = u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '');
  const candidates = [
    `${u.origin}/.well-known/oauth-authorization-server${path}`,
    `${base}/.well-known/openid-configuration`,
  ];
  const problems: string[] = [];
  for (const url of candidates) {
    try {
      const res = await fetcher(url, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(10_000),
      });
      if (!res.ok) {
        problems.push(`${url}: HTTP ${res.status}`);
        continue;
      }
      const doc = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
      // RFC 8414 §3.3: the metadata must name the issuer it was fetched for.
      if (doc.issuer !== issuer && doc.issuer !== base) {
        problems.push(`${url}: names issuer ${JSON.stringify(doc.issuer)}`);
        continue;
      }
      if (typeof doc.jwks_uri !== 'string') {
        problems.push(`${url}: no jwks_uri`);
        continue;
      }
      return new URL(doc.jwks_uri);
    } catch (error) {
      problems.push(`${url}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  throw new Error(`cannot read the issuer's metadata (${problems.join('; ')})`);
}

export function createResourceServer(options: ResourceServerOptions): ResourceServer {
  const { auth, resource } = options;
  const env = options.env ?? process.env;
  const fetcher = options.fetch ?? fetch;
  const audience = auth.audience ?? resource;
  const metadataUrl = metadataUrlFor(resource);
  const statics = auth.static_tokens.map((t) => ({
    name: t.name,
    scopes: t.scopes,
    hash: () => t.sha256 ?? hashOfEnv(t.ref),
  }));
  function hashOfEnv(ref: string | undefined): string | null {
    const value = ref ? env[ref.slice('env:'.length)] : undefined;
    return value ? sha256Hex(value) : null;
  }
  let jwks: ReturnType<typeof createRemoteJWKSet> | null = null;
  const keys = async (): Promise<ReturnType<typeof createRemoteJWKSet>> => {
    if (jwks) return jwks;
    const uri = auth.jwks_uri ? new URL(auth.jwks_uri) : await discoverJwks(auth.issuer!, fetcher);
    jwks = createRemoteJWKSet(uri, { timeoutDuration: 10_000 });
    return jwks;
  };

  const required = auth.scopes;
  // Clients ask for the scopes of the challenge (else scopes_supported): every scope that unlocks
  // something here, so that one token can reach every tool the authorization server grants it.
  const supported = [
    ...new Set([...required, ...(auth.access ?? []).flatMap((r) => r.scopes ?? [])]),
  ];
  const missingScope = (granted: readonly string[]): AuthFailure | null => {
    const missing = required.filter((s) => !granted.includes(s));
    return missing.length === 0
      ? null
      : {
          status: 403,
          error: 'insufficient_scope',
          description: `the token lacks the scope(s) ${missing.join(' ')}`,
          scopes: missing,
        };
  };

  async function verifyJwt(token: string): Promise<AuthResult> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, await keys(), {
        issuer: auth.issuer!,
        audience,
        algorithms: auth.algorithms ?? DEFAULT_ALGORITHMS,
        clockTolerance: auth.clock_tolerance_s,
      }));
    } catch (error) {
      return { ok: false, failure: invalid(jwtProblem(error)) };
    }
    const scopes = scopesOf(payload);
    const clientId =
      typeof payload['client_id'] === 'string'
        ? payload['client_id']
        : typeof payload['azp'] === 'string'
          ? payload['azp']
          : null;
    const subject = payload.sub ?? clientId;
    if (!subject) return { ok: false, failure: invalid('the token names no subject (sub)') };
    const lacking = missingScope(scopes);
    if (lacking) return { ok: false, failure: lacking };
    return {
      ok: true,
      value: {
        caller: {
          kind: 'token',
          subject,
          client_id: clientId,
          issuer: payload.iss ?? null,
          scopes,
        },
        claims: payload,
      },
    };
  }

  function matchStatic(token: string): AuthResult | null {
    const presented = Buffer.from(sha256Hex(token), 'hex');
    for (const t of statics) {
      const hash = t.hash();
      if (!hash) continue;
      if (timingSafeEqual(presented, Buffer.from(hash, 'hex'))) {
        const lacking = missingScope(t.scopes);
        if (lacking) return { ok: false, failure: lacking };
        return {
          ok: true,
          value: {
            caller: {
              kind: 'token',
              subject: t.name,
              client_id: null,
              issuer: null,
              scopes: t.scopes,
            },
            claims: {},
          },
        };
      }
    }
    return null;
  }

  return {
    resource,
    metadataUrl,
    metadata: () => ({
      resource,
      authorization_servers: auth.issuer ? [auth.issuer] : [],
      ...(supported.length > 0 ? { scopes_supported: supported } : {}),
      bearer_methods_supported: ['header'],
      resource_name: 'Candor MCP gateway',
    }),
    challenge(failure) {
      const parts = [`resource_metadata=${quoted(metadataUrl)}`];
      const scopes = failure.scopes ?? supported;
      if (scopes.length > 0) parts.push(`scope=${quoted(scopes.join(' '))}`);
      if (failure.error) {
        parts.push(`error=${quoted(failure.error)}`);
        parts.push(`error_description=${quoted(failure.description)}`);
      }
      return `Bearer ${parts.join(', ')}`;
    },
    async authenticate(header) {
      if (header === undefined || header.trim() === '')
        return { ok: false, failure: { status: 401, description: 'no access token' } };
      const m = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i.exec(header.trim());
      if (!m)
        return {
          ok: false,
          failure: {
            status: 401,
            error: 'invalid_request',
            description: 'the Authorization header is not "Bearer <token>"',
          },
        };
      const token = m[1]!;
      const byStatic = matchStatic(token);
      if (byStatic) return byStatic;
      if (!auth.issuer || token.split('.').length !== 3)
        return { ok: false, failure: invalid('the token is not valid here') };
      return verifyJwt(token);
    },
  };
}

function invalid(description: string): AuthFailure {
  return { status: 401, error: 'invalid_token', description };
}

/** The reason a JWT was refused, by jose's stable error codes (never the token itself). */
function jwtProblem(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'the token has expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return 'the token is for another resource (aud)';
    if (error.claim === 'iss') return 'the token is from another issuer (iss)';
    if (error.claim === 'nbf') return 'the token is not valid yet (nbf)';
    return `the token's ${error.claim} claim is not acceptable`;
  }
  if (error instanceof errors.JWKSNoMatchingKey) return 'no key of the issuer matches the token';
  if (error instanceof errors.JWSSignatureVerificationFailed)
    return 'the token signature does not verify';
  if (error instanceof errors.JOSEError) return `the token is not valid (${error.code})`;
  return `the token could not be checked (${error instanceof Error ? error.message : String(error)})`;
}
