// A real local OAuth 2.1 / OpenID authorization server (oidc-provider) for the team-gateway tests:
// client-credentials clients, resource indicators (RFC 8707) so that an access token's `aud` is the
// resource it was asked for, and JWT access tokens signed with a key the test also holds (to sign
// a token with a past expiry, the one thing the server will not issue on request).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import Provider, { errors } from 'oidc-provider';

export interface TestClient {
  client_id: string;
  client_secret: string;
  /** Scopes this client may be granted. */
  scope: string;
}

export interface TestIssuer {
  readonly issuer: string;
  /** Resources it issues tokens for (the first is the default). */
  resources: string[];
  /** A client-credentials token for `resource` with `scope` (the token endpoint, over HTTP). */
  token(client: TestClient, resource: string, scope: string): Promise<string>;
  /** A token signed with the issuer's own key, with any claims (e.g. a past `exp`). */
  sign(claims: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

export async function startTestIssuer(clients: readonly TestClient[]): Promise<TestIssuer> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk: JWK = { ...(await exportJWK(privateKey)), kid: 'test-key', alg: 'RS256', use: 'sig' };
  let handler: ((req: never, res: never) => void) | null = null;
  const http: Server = createServer((req, res) => {
    if (handler) handler(req as never, res as never);
    else res.writeHead(503).end();
  });
  await new Promise<void>((r) => http.listen({ host: '127.0.0.1', port: 0 }, r));
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const allScopes = [...new Set(clients.flatMap((c) => c.scope.split(' ')))];
  const resources: string[] = [];
  const provider = new Provider(issuer, {
    clients: clients.map((c) => ({
      client_id: c.client_id,
      client_secret: c.client_secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      scope: c.scope,
    })),
    scopes: allScopes,
    jwks: { keys: [jwk] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resources[0] ?? issuer,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, indicator: string) => {
          if (!resources.includes(indicator)) throw new errors.InvalidTarget();
          return {
            scope: allScopes.join(' '),
            audience: indicator,
            accessTokenFormat: 'jwt',
            accessTokenTTL: 300,
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  });
  // Quiet: the provider logs every failed request to the console by default.
  provider.on('server_error', () => undefined);
  handler = provider.callback();
  return {
    issuer,
    resources,
    async token(client, resource, scope) {
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope, resource }),
      });
      const body = (await res.json()) as { access_token?: string; error?: string };
      if (!body.access_token) throw new Error(`token request failed: ${JSON.stringify(body)}`);
      return body.access_token;
    },
    sign: (claims) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'test-key', typ: 'at+jwt' })
        .sign(privateKey),
    close: () =>
      new Promise<void>((r) => {
        http.closeAllConnections();
        http.close(() => r());
      }),
  };
}
