// Per-principal tokens to an OAuth upstream, end to end on real parts: one real authorization
// server (oidc-provider) issues the callers' own tokens for the team gateway (client credentials,
// aud = the gateway), runs the people's logins (authorization code + PKCE, aud = the upstream) and
// answers RFC 8693 token exchanges (a grant type registered on it); a Streamable HTTP MCP server
// (the SDK's) behind a resource server that validates every token against the provider's keys and
// records whose token each request carried; and Candor's real HTTP gateway with inbound auth.
// Two upstreams point at that server: `notes` (tokens: per_principal) and `xnotes`
// (tokens: token_exchange).
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createRemoteJWKSet, exportJWK, generateKeyPair, jwtVerify, SignJWT } from 'jose';
import Provider, { errors } from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../src/config/load.js';
import { envelopeSchema, type Envelope } from '../src/core/envelope.js';
import { startGateway } from '../src/mcp/start.js';
import { createKeyFile, initVault } from '../src/vault/index.js';
import { tempDir, writeConfig } from './fixtures/mcp/stdio.js';
import { cli, loginAs, otlpReceiver, readBody } from './upstream-oauth-support.js';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const GW_CLIENT = { id: 'candor-gw', secret: 'gw-client-secret-9f2c7a41d0e3' };
const AGENTS = ['agent-alice', 'agent-bob', 'agent-carol'] as const;
const agentSecret = (a: string) => `${a}-secret-5e0b8c1d2f`;

/** What the upstream did, and whose token each request to it carried. */
const notes: Array<{ text: string; by: string }> = [];
const requests: Array<{ sub: string; act: string | null; tool: string | null; text?: string }> = [];
/** Every token any party saw (the callers', the upstream's, refresh tokens), and the secrets. */
const canaries = new Set<string>([GW_CLIENT.secret, ...AGENTS.map(agentSecret)]);
const upstreamTokens = new Set<string>();
const exchanges: Array<{ subject_token: string; resource: string; client: string }> = [];
const refuseExchangeFor = new Set<string>(['agent-carol']);
let cutNext = false;

let as: Server;
let rs: Server;
let issuer: string;
let mcpUrl: string;
const gatewayResources: string[] = [];

function notesServer(sub: string): McpServer {
  const s = new McpServer({ name: 'notes', version: '1.0.0' });
  s.registerTool(
    'add_note',
    {
      description: 'Adds a note',
      inputSchema: { text: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    },
    ({ text }) => {
      notes.push({ text, by: sub });
      return { content: [{ type: 'text', text: `added ${text}` }] };
    },
  );
  s.registerTool(
    'find_notes',
    {
      description: 'Notes with this text',
      inputSchema: { text: z.string() },
      outputSchema: { notes: z.array(z.string()) },
      annotations: { readOnlyHint: true },
    },
    ({ text }) => {
      const found = notes.filter((n) => n.text === text).map((n) => n.text);
      return {
        content: [{ type: 'text', text: JSON.stringify(found) }],
        structuredContent: { notes: found },
      };
    },
  );
  return s;
}

beforeAll(async () => {
  as = createServer();
  await new Promise<void>((r) => as.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(as.address() as AddressInfo).port}`;
  rs = createServer();
  await new Promise<void>((r) => rs.listen(0, '127.0.0.1', r));
  const rsOrigin = `http://127.0.0.1:${(rs.address() as AddressInfo).port}`;
  mcpUrl = `${rsOrigin}/mcp`;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: 'test-key', alg: 'RS256', use: 'sig' };
  const provider = new Provider(issuer, {
    jwks: { keys: [jwk] },
    clients: [
      {
        client_id: GW_CLIENT.id,
        client_secret: GW_CLIENT.secret,
        application_type: 'native',
        redirect_uris: ['http://127.0.0.1/callback'],
        grant_types: ['authorization_code', 'refresh_token', TOKEN_EXCHANGE],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      ...AGENTS.map((a) => ({
        client_id: a,
        client_secret: agentSecret(a),
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        scope: 'mcp:tools',
      })),
    ],
    features: {
      clientCredentials: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => mcpUrl,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          if (resource === mcpUrl)
            return {
              scope: 'notes:read notes:write',
              audience: mcpUrl,
              accessTokenTTL: 300,
              accessTokenFormat: 'jwt',
              jwt: { sign: { alg: 'RS256' } },
            };
          if (gatewayResources.includes(resource))
            return {
              scope: 'mcp:tools',
              audience: resource,
              accessTokenTTL: 300,
              accessTokenFormat: 'jwt',
              jwt: { sign: { alg: 'RS256' } },
            };
          throw new errors.InvalidTarget();
        },
      },
    },
    scopes: ['openid', 'offline_access', 'notes:read', 'notes:write', 'mcp:tools'],
    issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  });
  const localJwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
  // RFC 8693 on the provider: the subject token must be one of its own access tokens for the
  // gateway; the token issued is for the upstream, names the same subject and the exchanging
  // client as the actor (`act`).
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    async (ctx) => {
      const params = ctx.oidc.params as Record<string, string | undefined>;
      const client = ctx.oidc.client!.clientId;
      exchanges.push({
        subject_token: params['subject_token'] ?? '',
        resource: params['resource'] ?? '',
        client,
      });
      if (params['subject_token_type'] !== ACCESS_TOKEN)
        throw new errors.InvalidRequest('unsupported subject_token_type');
      if (params['resource'] !== mcpUrl) throw new errors.InvalidTarget();
      let sub: string;
      try {
        const { payload } = await jwtVerify(params['subject_token'] ?? '', localJwks, {
          issuer,
          audience: gatewayResources,
        });
        sub = payload.sub!;
      } catch {
        throw new errors.InvalidGrant('the subject token is not valid');
      }
      if (refuseExchangeFor.has(sub))
        throw new errors.InvalidGrant('this subject may not reach that resource');
      const token = await new SignJWT({
        scope: 'notes:read notes:write',
        client_id: client,
        act: { sub: client },
      })
        .setProtectedHeader({ alg: 'RS256', kid: 'test-key', typ: 'at+jwt' })
        .setIssuer(issuer)
        .setSubject(sub)
        .setAudience(mcpUrl)
        .setIssuedAt()
        .setExpirationTime('120s')
        .setJti(randomUUID())
        .sign(privateKey);
      canaries.add(token);
      ctx.body = {
        access_token: token,
        issued_token_type: ACCESS_TOKEN,
        token_type: 'Bearer',
        expires_in: 120,
      };
    },
    [
      'subject_token',
      'subject_token_type',
      'requested_token_type',
      'resource',
      'audience',
      'scope',
    ],
  );
  provider.on('refresh_token.saved', (t: { jti: string }) => canaries.add(t.jti));
  provider.on('server_error', (_ctx: unknown, error: Error) =>
    console.error('AS server_error', error),
  );
  as.on('request', provider.callback());

  const metadataUrl = `${rsOrigin}/.well-known/oauth-protected-resource/mcp`;
  const challenge = (extra = '') =>
    `Bearer resource_metadata="${metadataUrl}"${extra ? `, ${extra}` : ''}`;
  rs.on('request', (req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', rsOrigin).pathname;
      if (path === '/.well-known/oauth-protected-resource/mcp') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            resource: mcpUrl,
            authorization_servers: [issuer],
            scopes_supported: ['notes:read', 'notes:write'],
          }),
        );
        return;
      }
      const body = await readBody(req);
      const auth = req.headers.authorization ?? '';
      if (!auth.startsWith('Bearer ')) {
        res.writeHead(401, { 'www-authenticate': challenge() }).end();
        return;
      }
      const token = auth.slice(7);
      upstreamTokens.add(token);
      canaries.add(token);
      let payload: Record<string, unknown>;
      try {
        ({ payload } = await jwtVerify(token, localJwks, { issuer, audience: mcpUrl }));
      } catch {
        res.writeHead(401, { 'www-authenticate': challenge('error="invalid_token"') }).end();
        return;
      }
      const parsed = body
        ? (JSON.parse(body) as {
            method?: string;
            params?: { name?: string; arguments?: { text?: string } };
          })
        : undefined;
      const tool = parsed?.method === 'tools/call' ? (parsed.params?.name ?? '') : null;
      const text = parsed?.params?.arguments?.text;
      const sub = String(payload['sub']);
      const act = (payload['act'] as { sub?: string } | undefined)?.sub ?? null;
      requests.push({ sub, act, tool, ...(text ? { text } : {}) });
      if (tool === 'add_note' && cutNext) {
        cutNext = false;
        // The note is stored; the answer's stream ends before it.
        notes.push({ text: text ?? '', by: sub });
        res.writeHead(200, { 'content-type': 'text/event-stream' }).end(': nothing\n\n');
        return;
      }
      if (req.method !== 'POST') {
        res.writeHead(405).end();
        return;
      }
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
      const server = notesServer(sub);
      res.on('close', () => void transport.close().then(() => server.close()));
      await server.connect(transport);
      await transport.handleRequest(req, res, parsed);
    })();
  });
});

afterAll(async () => {
  rs.closeAllConnections();
  as.closeAllConnections();
  await new Promise<void>((r) => rs.close(() => r()));
  await new Promise<void>((r) => as.close(() => r()));
});

/** A caller's own token for the gateway, from the provider (client credentials). */
async function callerToken(agent: string, resource: string): Promise<string> {
  const res = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${agent}:${agentSecret(agent)}`).toString('base64')}`,
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'mcp:tools', resource }),
  });
  const body = (await res.json()) as { access_token?: string };
  if (!body.access_token) throw new Error(`no token for ${agent}: ${JSON.stringify(body)}`);
  canaries.add(body.access_token);
  return body.access_token;
}

describe('per-principal upstream tokens through the team gateway', () => {
  it("each caller's calls carry its own token (its login, or its exchanged token); a caller without one gets escalate and nothing is sent", async () => {
    const dir = tempDir('candor-up-principals-');
    const keyFile = join(dir, 'vault.key');
    const vaultPath = join(dir, 'vault.json');
    expect((await createKeyFile(keyFile)).ok).toBe(true);
    const v = await initVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
    if (!v.ok) throw new Error(v.failure.message);
    const stored = await v.value.set({
      name: 'gw-client',
      type: 'basic',
      username: GW_CLIENT.id,
      secret: GW_CLIENT.secret,
      bindings: [{ kind: 'http', origin: issuer, path_prefix: '/token' }],
    });
    expect(stored.ok).toBe(true);
    v.value.close();
    const receiver = await otlpReceiver();
    const config = writeConfig(
      dir,
      `vault: { key_file: ${JSON.stringify(keyFile)}, path: ${JSON.stringify(vaultPath)} }
ledger: sqlite:${join(dir, 'ledger.db')}
telemetry: { otlp: ${receiver.url}, metrics_interval_ms: 3600000 }
mcp:
  http:
    auth:
      issuer: ${issuer}
      scopes: [mcp:tools]
upstreams:
  notes:
    url: ${JSON.stringify(mcpUrl)}
    auth: oauth
    oauth: { tokens: per_principal, client_credential: vault:gw-client }
    deadline_ms: 20000
    tools:
      add_note:
        lookup:
          tool: find_notes
          arguments: { text: '{{input.text}}' }
          match: { kind: count, array: notes }
        probe:
          arguments: { text: probe-note }
  xnotes:
    url: ${JSON.stringify(mcpUrl)}
    auth: oauth
    oauth: { tokens: token_exchange, client_credential: vault:gw-client }
    deadline_ms: 20000
`,
    );

    // The operator logs in once per upstream (tool listing and local calls).
    for (const name of ['notes', 'xnotes'] as const) {
      const op = await loginAs([name, '--config', config], dir, 'operator');
      expect(op.status, op.stderr).toBe(0);
    }
    // Each person logs in once, as themselves.
    const alice = await loginAs(
      ['notes', '--as', 'agent-alice', '--config', config],
      dir,
      'agent-alice',
    );
    expect(alice.status, alice.stderr).toBe(0);
    expect(alice.stderr).toContain('logged in as agent-alice');
    // A link opened by someone else is not bob's login: refused, nothing kept for bob.
    const wrong = await loginAs(['notes', '--as', 'agent-bob', '--config', config], dir, 'mallory');
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).toContain('"mallory", not "agent-bob"');
    expect(wrong.stderr).toContain('(wrong_principal)');
    expect(wrong.redirect).toBe(403);
    const bob = await loginAs(['notes', '--as', 'agent-bob', '--config', config], dir, 'agent-bob');
    expect(bob.status, bob.stderr).toBe(0);
    // --as on an upstream with shared tokens is a usage error.
    const misuse = await cli(
      ['upstream', 'login', 'xnotes', '--as', 'x', '--issuer', 'static', '--config', config],
      dir,
    );
    expect(misuse.status).toBe(2);
    expect(misuse.stderr).toContain('--as is for per-principal tokens');

    const status = await cli(['upstream', 'status', 'notes', '--config', config, '--json'], dir);
    expect(status.status, status.stderr).toBe(0);
    const rows = JSON.parse(status.stdout) as Array<Record<string, unknown>>;
    expect(rows.map((r) => [r['principal'], r['state']])).toEqual([
      [null, 'logged_in'],
      [{ issuer, subject: 'agent-alice' }, 'logged_in'],
      [{ issuer, subject: 'agent-bob' }, 'logged_in'],
    ]);
    for (const r of rows) {
      expect(r['scopes']).toEqual(expect.arrayContaining(['notes:read', 'notes:write']));
      expect(typeof r['expires_at']).toBe('string');
    }
    const statusText = await cli(['upstream', 'status', 'notes', '--config', config], dir);
    expect(statusText.stdout).toContain(`notes as agent-alice (${issuer}): logged in`);

    const loaded = await loadConfig(config);
    if (!loaded.ok) throw new Error(loaded.failure.message);
    const logs: string[] = [];
    const started = await startGateway({
      loaded: loaded.value,
      httpPort: 0,
      log: (l) => logs.push(l),
    });
    if (!started.ok) throw new Error(started.failure.message);
    const gw = started.value;
    if (gw.url === null) throw new Error('the gateway serves no HTTP');
    const gatewayResource = gw.url;
    gatewayResources.push(gatewayResource);
    const envelopes: Envelope[] = [];
    const clients: Client[] = [];
    const as_ = async (agent: string) => {
      const token = await callerToken(agent, gatewayResource);
      const client = new Client({ name: agent, version: '1' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(gatewayResource), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      clients.push(client);
      return {
        token,
        call: async (name: string, args: Record<string, unknown>) => {
          const r = await client.callTool({ name, arguments: args });
          const e = envelopeSchema.parse(r.structuredContent);
          envelopes.push(e);
          return e;
        },
      };
    };
    try {
      const a = await as_('agent-alice');
      const b = await as_('agent-bob');
      const c = await as_('agent-carol');

      // per_principal: the same tool, each caller's own login.
      expect(await a.call('notes_add_note', { text: 'from alice' })).toMatchObject({
        ok: true,
        category: 'succeeded',
      });
      expect(await b.call('notes_add_note', { text: 'from bob' })).toMatchObject({
        ok: true,
        category: 'succeeded',
      });
      expect(notes).toEqual([
        { text: 'from alice', by: 'agent-alice' },
        { text: 'from bob', by: 'agent-bob' },
      ]);
      expect(requests.filter((r) => r.tool === 'add_note')).toEqual([
        { sub: 'agent-alice', act: null, tool: 'add_note', text: 'from alice' },
        { sub: 'agent-bob', act: null, tool: 'add_note', text: 'from bob' },
      ]);

      // A caller who never logged in: escalate, the command a person runs named, nothing sent.
      const before = requests.length;
      const carol = await c.call('notes_add_note', { text: 'from carol' });
      expect(carol).toMatchObject({
        ok: false,
        category: 'local_failure',
        retry: 'escalate',
        remote_effect: 'none',
        data: { refusal: { code: 'login_required' } },
      });
      expect((carol.data as { refusal: { detail: string } }).refusal.detail).toContain(
        'candor upstream login notes --as agent-carol',
      );
      expect(requests.length).toBe(before);
      expect(notes.map((n) => n.text)).not.toContain('from carol');

      // token_exchange: the caller's own token is exchanged; the upstream sees a token for itself
      // bound to the caller (and the gateway as actor), never the caller's own token.
      expect(await a.call('xnotes_add_note', { text: 'x alice' })).toMatchObject({
        ok: true,
        category: 'succeeded',
      });
      expect(await b.call('xnotes_add_note', { text: 'x bob' })).toMatchObject({
        ok: true,
        category: 'succeeded',
      });
      expect(requests.filter((r) => r.text?.startsWith('x '))).toEqual([
        { sub: 'agent-alice', act: GW_CLIENT.id, tool: 'add_note', text: 'x alice' },
        { sub: 'agent-bob', act: GW_CLIENT.id, tool: 'add_note', text: 'x bob' },
      ]);
      expect(exchanges.map((e) => [e.subject_token, e.resource, e.client])).toEqual([
        [a.token, mcpUrl, GW_CLIENT.id],
        [b.token, mcpUrl, GW_CLIENT.id],
      ]);
      // A second call reuses the exchanged token (no new exchange).
      expect(await a.call('xnotes_add_note', { text: 'x alice 2' })).toMatchObject({ ok: true });
      expect(exchanges).toHaveLength(2);

      // The authorization server refuses carol's exchange: escalate, nothing reaches the upstream.
      const beforeX = requests.length;
      const carolX = await c.call('xnotes_add_note', { text: 'x carol' });
      expect(carolX).toMatchObject({
        ok: false,
        category: 'local_failure',
        retry: 'escalate',
        remote_effect: 'none',
        data: { refusal: { code: 'token_exchange_refused' } },
      });
      expect(exchanges.at(-1)?.subject_token).toBe(c.token);
      expect(requests.length).toBe(beforeX);

      // A caller's own gateway token never reached the upstream.
      for (const t of [a.token, b.token, c.token]) expect(upstreamTokens.has(t)).toBe(false);

      // The duplicate guard on a per-principal upstream: a lost answer is unknown, the repeat is
      // held, and the lookup (with the caller's own token) settles it.
      cutNext = true;
      const lost = await a.call('notes_add_note', { text: 'lost alice' });
      expect(lost).toMatchObject({
        ok: false,
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
      });
      const again = await a.call('notes_add_note', { text: 'lost alice' });
      expect(again).toMatchObject({ retry: 'reconcile_first', operation_id: lost.operation_id });
      expect(requests.filter((r) => r.text === 'lost alice' && r.tool === 'add_note')).toEqual([
        { sub: 'agent-alice', act: null, tool: 'add_note', text: 'lost alice' },
      ]);
      // Bob asks to reconcile alice's operation: his token may not see her note, so his "not
      // found" would prove nothing. The lookup is not sent as him and the outcome stays unknown.
      const byBob = await b.call('reconcile_operation', { operation_id: lost.operation_id });
      expect(byBob).toMatchObject({ ok: false, remote_effect: 'unknown' });
      expect(requests.filter((r) => r.tool === 'find_notes')).toEqual([]);
      const settled = await a.call('reconcile_operation', { operation_id: lost.operation_id });
      expect(settled).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
      expect(requests.filter((r) => r.tool === 'find_notes').map((r) => r.sub)).toEqual([
        'agent-alice',
      ]);
    } finally {
      for (const cl of clients) await cl.close().catch(() => undefined);
      await gw.close();
    }

    // `candor probe mcp` on the per-principal upstream: the operator's own login.
    const probe = await cli(
      [
        'probe',
        'mcp',
        '--config',
        config,
        '--ledger',
        `sqlite:${join(dir, 'probe.db')}`,
        '--tool',
        'add_note',
      ],
      dir,
    );
    expect(probe.stderr + probe.stdout).toContain('duplicates on retry');
    expect(notes.filter((n) => n.text === 'probe-note').map((n) => n.by)).toEqual([
      'operator',
      'operator',
    ]);

    // No token (nor client secret) in any result, ledger byte, log line, span, status or vault.
    await receiver.close();
    const ledgerBytes = ['ledger.db', 'ledger.db-wal', 'probe.db', 'probe.db-wal']
      .map((f) => join(dir, f))
      .filter((f) => existsSync(f))
      .map((f) => readFileSync(f).toString('latin1'))
      .join('');
    const exported = receiver.bodies();
    expect(exported).toContain('notes_add_note');
    const everything = [
      JSON.stringify(envelopes),
      ledgerBytes,
      logs.join('\n'),
      exported,
      alice.stdout + alice.stderr + wrong.stdout + wrong.stderr + bob.stdout + bob.stderr,
      status.stdout + statusText.stdout,
      probe.stdout + probe.stderr,
      readFileSync(vaultPath, 'utf8'),
    ].join('\n');
    expect(upstreamTokens.size).toBeGreaterThan(3);
    for (const token of canaries) expect(everything.includes(token), 'token leaked').toBe(false);
  }, 180_000);
});
