// A real local OpenID provider (oidc-provider) where people sign in through its own login pages
// (development interactions: any login name, any password) — for the approvals page's sign-in
// (authorization code + PKCE) — and agents get client-credentials JWT access tokens whose `aud` is
// the gateway's resource URI (RFC 8707). The listening address is known before the provider is
// configured, so that the approvals page's callback (known once its port is) can be registered.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import Provider, { errors } from 'oidc-provider';

export interface AgentClient {
  client_id: string;
  client_secret: string;
  scope: string;
}

export interface LoginIssuer {
  readonly issuer: string;
  /** Configures the provider: agents (client credentials) and the approvals page (public client). */
  start(o: {
    agents: readonly AgentClient[];
    resource: string;
    web: { client_id: string; redirect_uri: string };
  }): Promise<void>;
  /** A client-credentials access token for the configured resource. */
  token(agent: AgentClient, scope: string): Promise<string>;
  close(): Promise<void>;
}

export async function listenLoginIssuer(): Promise<LoginIssuer> {
  let handler: ((req: never, res: never) => void) | null = null;
  const http: Server = createServer((req, res) => {
    if (handler) handler(req as never, res as never);
    else res.writeHead(503).end();
  });
  await new Promise<void>((r) => http.listen({ host: '127.0.0.1', port: 0 }, r));
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  let resource = '';
  return {
    issuer,
    async start({ agents, resource: res, web }) {
      resource = res;
      const { privateKey } = await generateKeyPair('RS256', { extractable: true });
      const jwk: JWK = { ...(await exportJWK(privateKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
      const scopes = [...new Set(agents.flatMap((a) => a.scope.split(' ')))];
      const provider = new Provider(issuer, {
        clients: [
          ...agents.map((a) => ({
            client_id: a.client_id,
            client_secret: a.client_secret,
            grant_types: ['client_credentials'],
            redirect_uris: [],
            response_types: [],
            scope: a.scope,
          })),
          {
            client_id: web.client_id,
            token_endpoint_auth_method: 'none',
            grant_types: ['authorization_code'],
            response_types: ['code'],
            redirect_uris: [web.redirect_uri],
            scope: 'openid',
          },
        ],
        scopes: ['openid', ...scopes],
        jwks: { keys: [jwk] },
        pkce: { required: () => true },
        features: {
          devInteractions: { enabled: true },
          clientCredentials: { enabled: true },
          resourceIndicators: {
            enabled: true,
            defaultResource: (_ctx: unknown, client: { clientId: string }) =>
              client.clientId === web.client_id ? undefined : resource,
            useGrantedResource: () => true,
            getResourceServerInfo: (_ctx: unknown, indicator: string) => {
              if (indicator !== resource) throw new errors.InvalidTarget();
              return {
                scope: scopes.join(' '),
                audience: indicator,
                accessTokenFormat: 'jwt',
                accessTokenTTL: 600,
                jwt: { sign: { alg: 'RS256' } },
              };
            },
          },
        },
      } as never);
      provider.on('server_error', () => undefined);
      handler = provider.callback();
    },
    async token(agent, scope) {
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${agent.client_id}:${agent.client_secret}`).toString('base64')}`,
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope, resource }),
      });
      const body = (await res.json()) as { access_token?: string };
      if (!body.access_token) throw new Error(`token request failed: ${JSON.stringify(body)}`);
      return body.access_token;
    },
    close: () =>
      new Promise<void>((r) => {
        http.closeAllConnections();
        http.close(() => r());
      }),
  };
}
