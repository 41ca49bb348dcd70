// Where an upstream MCP server's tokens come from, found the way the MCP authorization
// specification says (both protocol eras):
//   1. an unauthenticated request; the 401's WWW-Authenticate names the Protected Resource
//      Metadata (RFC 9728) — without it, the well-known URIs are tried;
//   2. the metadata's `authorization_servers[0]` and its metadata (RFC 8414, else OpenID Connect
//      discovery), whose `issuer` must echo the URL it was fetched for;
//   3. 2025-03-26 era: a server without Protected Resource Metadata is its own authorization
//      server, with the default endpoints where it publishes no metadata.
// The resource indicator (RFC 8707) is the metadata's `resource`, which must cover the upstream's
// URL; PKCE with S256 must be advertised (an authorization server that does not say so is refused).
import {
  checkResourceAllowed,
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
  resourceUrlFromServerUrl,
  type AuthorizationServerMetadata,
  type FetchLike,
} from '@modelcontextprotocol/client';
import { problem, type OAuthResult } from './problem.js';

export interface Discovered {
  server_url: string;
  /** The RFC 8707 resource indicator, verbatim as the resource metadata gives it. */
  resource: string;
  issuer: string;
  metadata: AuthorizationServerMetadata;
  /** Scopes the protected resource lists (RFC 9728 `scopes_supported`), if any. */
  scopes_supported: string[] | undefined;
  /** The scope the 401 challenge asked for, if any. */
  challenge_scope: string | undefined;
  /** Which era the server follows: `resource_metadata` (RFC 9728), or `legacy` (2025-03-26). */
  era: 'resource_metadata' | 'legacy';
}

/** An `initialize` request: harmless, and what a client sends first. */
const PROBE_BODY = JSON.stringify({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'candor', version: '1' },
  },
});

export async function discover(
  serverUrl: string,
  fetchFn: FetchLike = fetch,
): Promise<OAuthResult<Discovered>> {
  let challenge: ReturnType<typeof extractWWWAuthenticateParams> = {};
  try {
    const probe = await fetchFn(serverUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: PROBE_BODY,
      redirect: 'manual',
    });
    await probe.arrayBuffer().catch(() => undefined);
    if (probe.ok)
      return problem(
        'no_auth_required',
        `${serverUrl} answered without asking for authorization (HTTP ${probe.status}); it needs no auth: oauth`,
      );
    if (probe.status === 401) challenge = extractWWWAuthenticateParams(probe);
  } catch (error) {
    return problem('unreachable', `${serverUrl} cannot be reached (${codeOf(error)})`);
  }

  let prm: Awaited<ReturnType<typeof discoverOAuthProtectedResourceMetadata>> | undefined;
  try {
    prm = await discoverOAuthProtectedResourceMetadata(
      serverUrl,
      challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {},
      fetchFn,
    );
  } catch (error) {
    // Connection failures are not "no metadata": the server was not heard.
    if (error instanceof TypeError)
      return problem('unreachable', `the resource metadata cannot be fetched (${codeOf(error)})`);
    prm = undefined;
  }

  const defaultResource = resourceUrlFromServerUrl(serverUrl);
  let resource = defaultResource.href;
  let asUrl = new URL('/', serverUrl).href;
  if (prm) {
    if (
      !checkResourceAllowed({
        requestedResource: defaultResource,
        configuredResource: prm.resource,
      })
    )
      return problem(
        'resource_mismatch',
        `the resource metadata names the resource ${prm.resource}, which does not cover ${serverUrl}`,
      );
    resource = prm.resource;
    const first = prm.authorization_servers?.[0];
    if (!first)
      return problem(
        'no_authorization_server',
        'the resource metadata names no authorization server',
      );
    asUrl = first;
  }

  let metadata: AuthorizationServerMetadata | undefined;
  try {
    metadata = await discoverAuthorizationServerMetadata(asUrl, { fetchFn });
  } catch (error) {
    const code =
      (error as { kind?: unknown }).kind === 'metadata' ? 'issuer_mismatch' : 'discovery_failed';
    return problem(
      code,
      code === 'issuer_mismatch'
        ? `the authorization server metadata of ${asUrl} names another issuer (RFC 8414 §3.3); refused`
        : `the metadata of the authorization server ${asUrl} cannot be read (${codeOf(error)})`,
    );
  }
  if (!metadata) {
    if (prm)
      return problem(
        'discovery_failed',
        `the authorization server ${asUrl} publishes no metadata (RFC 8414 or OpenID Connect discovery)`,
      );
    // 2025-03-26: the server's own origin, with the default endpoints.
    const origin = new URL(serverUrl).origin;
    metadata = {
      issuer: origin,
      authorization_endpoint: `${origin}/authorize`,
      token_endpoint: `${origin}/token`,
      registration_endpoint: `${origin}/register`,
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
    };
  }
  if (!metadata.code_challenge_methods_supported?.includes('S256'))
    return problem(
      'pkce_unsupported',
      `the authorization server ${metadata.issuer} does not advertise PKCE with S256; refused`,
    );
  return {
    ok: true,
    value: {
      server_url: serverUrl,
      resource,
      issuer: metadata.issuer,
      metadata,
      scopes_supported: prm?.scopes_supported,
      challenge_scope: challenge.scope,
      era: prm ? 'resource_metadata' : 'legacy',
    },
  };
}

/** A stable code for a failure, never its message (which may quote a server's body). */
export function codeOf(error: unknown): string {
  for (let e: unknown = error, depth = 0; e && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return error instanceof Error ? error.name : 'error';
}
