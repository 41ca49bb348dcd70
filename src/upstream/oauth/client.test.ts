// Which client Candor is towards an authorization server: configured, held, metadata document,
// registered (RFC 7591, native, loopback), or a problem saying what a person must do.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AuthorizationServerMetadata } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { LOOPBACK_REDIRECT, obtainClient } from './client.js';
import type { Discovered } from './discovery.js';
import type { OAuthClient, OAuthStore } from './port.js';

function memoryStore(): OAuthStore & { clients: Map<string, OAuthClient> } {
  const clients = new Map<string, OAuthClient>();
  return {
    clients,
    grant: () => Promise.resolve({ ok: true, value: null }),
    saveGrant: () => Promise.reject(new Error('unused')),
    markGrant: () => Promise.resolve({ ok: true, value: undefined }),
    client: (issuer) => Promise.resolve({ ok: true, value: clients.get(issuer) ?? null }),
    saveClient: (c) => {
      clients.set(c.issuer, c);
      return Promise.resolve({ ok: true, value: undefined });
    },
  };
}

function discovered(metadata: Partial<AuthorizationServerMetadata>): Discovered {
  const issuer = metadata.issuer ?? 'https://as.example';
  return {
    server_url: 'https://mcp.example/mcp',
    resource: 'https://mcp.example/mcp',
    issuer,
    metadata: {
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
      ...metadata,
    },
    scopes_supported: undefined,
    challenge_scope: undefined,
    era: 'resource_metadata',
  };
}

const where = 'upstreams.tracker.oauth';

describe('obtainClient', () => {
  it('uses a Client ID Metadata Document where the server supports it, and keeps it per issuer', async () => {
    const store = memoryStore();
    const cimd = 'https://candor.example/oauth/client.json';
    const r = await obtainClient(
      discovered({
        client_id_metadata_document_supported: true,
        registration_endpoint: 'https://as.example/register',
      }),
      { client_metadata_url: cimd },
      undefined,
      { store, where },
    );
    expect(r.value).toMatchObject({
      client_id: cimd,
      how: 'metadata_document',
      client_secret: null,
    });
    expect(store.clients.get('https://as.example')?.client_id).toBe(cimd);
  });

  it('registers dynamically as a native application with the loopback redirect, once per issuer', async () => {
    const bodies: unknown[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString('utf8')));
      req.on('end', () => {
        bodies.push(JSON.parse(body));
        res.writeHead(201, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            client_id: 'dyn-1',
            redirect_uris: [LOOPBACK_REDIRECT],
            token_endpoint_auth_method: 'none',
          }),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const store = memoryStore();
      const d = discovered({ issuer, registration_endpoint: `${issuer}/register` });
      // A metadata document is configured, but this server does not advertise support for it.
      const cfg = { client_metadata_url: 'https://candor.example/oauth/client.json' };
      const first = await obtainClient(d, cfg, 'notes:read', { store, where });
      expect(first.value).toMatchObject({ client_id: 'dyn-1', how: 'registered' });
      expect(bodies).toEqual([
        expect.objectContaining({
          application_type: 'native',
          redirect_uris: [LOOPBACK_REDIRECT],
          grant_types: ['authorization_code', 'refresh_token'],
          token_endpoint_auth_method: 'none',
          scope: 'notes:read',
        }),
      ]);
      const second = await obtainClient(d, cfg, 'notes:read', { store, where });
      expect(second.value?.client_id).toBe('dyn-1');
      expect(bodies).toHaveLength(1);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('a configured client wins; without registration or a metadata document, says what to configure', async () => {
    const store = memoryStore();
    const configured = await obtainClient(discovered({}), { client_id: 'by-hand' }, undefined, {
      store,
      where,
    });
    expect(configured.value).toMatchObject({ client_id: 'by-hand', client_secret: null });
    const secret = await obtainClient(
      discovered({}),
      {
        client_credential: (endpoint) =>
          Promise.resolve(
            endpoint === 'https://as.example/token'
              ? { ok: true as const, client_id: 'conf', client_secret: 'conf-secret-123' }
              : { ok: false as const, message: 'not bound' },
          ),
      },
      undefined,
      { store, where },
    );
    expect(secret.value).toMatchObject({ client_id: 'conf', client_secret: 'conf-secret-123' });
    const none = await obtainClient(
      discovered({ client_id_metadata_document_supported: true }),
      undefined,
      undefined,
      {
        store,
        where,
      },
    );
    expect(none.problem?.code).toBe('no_client');
    expect(none.problem?.message).toContain(`${where}.client_metadata_url`);
    expect(none.problem?.message).toContain(`${where}.client_id`);
    expect(store.clients.size).toBe(0);
  });
});
