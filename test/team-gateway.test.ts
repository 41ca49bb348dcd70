// The gateway a team shares: Candor as an OAuth 2.1 resource server in front of real MCP clients,
// against a real local authorization server (oidc-provider) issuing real JWT access tokens whose
// `aud` is the gateway's resource URI (RFC 8707). What the fake received and what the ledger holds
// are checked each time: a refused caller sends nothing, an accepted one is recorded by name.
import { createHash } from 'node:crypto';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider as CredentialsV1 } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import {
  Client as ClientV2,
  ClientCredentialsProvider as CredentialsV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import type { LedgerStore } from '../src/ledger/store.js';
import type { StoredEvent } from '../src/ledger/events.js';
import { serveHttp, type HttpGateway } from '../src/mcp/http.js';
import { composeGateway } from '../src/mcp/start.js';
import { createResourceServer } from '../src/auth/resource-server.js';
import type { Gateway } from '../src/mcp/gateway.js';
import * as api from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { openTelemetry } from '../src/telemetry/otel.js';
import { formatOperation } from '../src/cli/commands/ops.js';
import { projectOperation } from '../src/ledger/projection.js';
import { createUi, TOKEN_COOKIE } from '../src/web/server.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';
import { startTestIssuer, type TestClient, type TestIssuer } from './support/oidc.js';

const AGENT_A: TestClient = {
  client_id: 'agent-a',
  client_secret: 'secret-a-0123456789abcdef',
  scope: 'mcp:tools records:write',
};
const AGENT_B: TestClient = {
  client_id: 'agent-b',
  client_secret: 'secret-b-0123456789abcdef',
  scope: 'mcp:tools',
};
const OUTSIDER: TestClient = {
  client_id: 'outsider',
  client_secret: 'secret-o-0123456789abcdef',
  scope: 'records:write',
};
const STATIC_TOKEN = 'static-ci-token-5b1f0e9d7c3a';
const OTHER_RESOURCE = 'http://other.example/mcp';

let issuer: TestIssuer;
let stranger: TestIssuer;
let fake: FakeService;
let ledger: LedgerStore;
let gateway: Gateway;
let http: HttpGateway;
const logs: string[] = [];
const spans = new InMemorySpanExporter();

function authYaml(issuerUrl: string): string {
  const hash = createHash('sha256').update(STATIC_TOKEN).digest('hex');
  return `mcp:
  http:
    auth:
      issuer: ${issuerUrl}
      scopes: [mcp:tools]
      clock_tolerance_s: 0
      static_tokens:
        - { name: ci-bot, sha256: ${hash}, scopes: [mcp:tools, records:write] }
      access:
        - { tools: [create_record, add_note], scopes: [records:write] }
        - { tools: [get_record] }
`;
}

beforeAll(async () => {
  issuer = await startTestIssuer([AGENT_A, AGENT_B, OUTSIDER]);
  stranger = await startTestIssuer([AGENT_A]);
  fake = await startFakeService({ seed: 33, tokens: [{ name: 'agent', token: TEST_TOKEN }] });
  const loaded = parseConfig(
    testConfigYaml({ origin: fake.url }) + authYaml(issuer.issuer),
    'team.yaml',
  );
  if (!loaded.ok) throw new Error(loaded.failure.message);
  ledger = openMemoryLedger();
  gateway = composeGateway({
    loaded: loaded.value,
    ledger,
    env: { [TEST_TOKEN_VAR]: TEST_TOKEN },
    telemetry: openTelemetry(api, {
      tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }),
    }),
  }).gateway;
  const auth = loaded.value.config.mcp!.http!.auth!;
  http = await serveHttp(gateway, 0, {
    log: (l) => logs.push(l),
    auth: (resource) => createResourceServer({ auth, resource }),
  });
  issuer.resources.push(http.resource, OTHER_RESOURCE);
  stranger.resources.push(http.resource);
});

afterAll(async () => {
  await gateway?.idle();
  await http?.close();
  await ledger?.close();
  await fake?.close();
  await issuer?.close();
  await stranger?.close();
});

beforeEach(() => {
  fake.reset();
  logs.length = 0;
});

const HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
};

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-11-25',
    capabilities: {},
    clientInfo: { name: 'raw', version: '1' },
  },
};

function post(body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(http.url, {
    method: 'POST',
    headers: { ...HEADERS, ...headers },
    body: JSON.stringify(body),
  });
}

const metadataUrl = (): string =>
  `${new URL(http.url).origin}/.well-known/oauth-protected-resource/mcp`;

/** Parses `Bearer k="v", k2="v2"` into its parameters. */
function challenge(res: Response): Record<string, string> {
  const h = res.headers.get('www-authenticate') ?? '';
  expect(h.startsWith('Bearer ')).toBe(true);
  const out: Record<string, string> = {};
  for (const m of h.matchAll(/(\w+)="([^"]*)"/g)) out[m[1]!] = m[2]!;
  return out;
}

async function openedBy(subject: string): Promise<StoredEvent[]> {
  return (await ledger.read()).filter(
    (e) =>
      e.kind === 'operation_opened' &&
      (e.data as { caller?: { subject: string } }).caller?.subject === subject,
  );
}

describe('protected resource metadata (RFC 9728)', () => {
  it('names the resource, the issuer and the scopes, at both well-known paths', async () => {
    for (const url of [
      metadataUrl(),
      `${new URL(http.url).origin}/.well-known/oauth-protected-resource`,
    ]) {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        resource: http.resource,
        authorization_servers: [issuer.issuer],
        scopes_supported: ['mcp:tools', 'records:write'],
        bearer_methods_supported: ['header'],
        resource_name: 'Candor MCP gateway',
      });
    }
  });
});

describe('refusals at the door: 401 with the challenge, nothing done', () => {
  it('no token: 401 pointing at the metadata, with the scope', async () => {
    const res = await post(initialize);
    expect(res.status).toBe(401);
    expect(challenge(res)).toEqual({
      resource_metadata: metadataUrl(),
      scope: 'mcp:tools records:write',
    });
  });

  it('a token for another resource (aud): 401 invalid_token', async () => {
    const token = await issuer.token(AGENT_A, OTHER_RESOURCE, 'mcp:tools records:write');
    const res = await post(initialize, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(401);
    const c = challenge(res);
    expect(c).toMatchObject({ resource_metadata: metadataUrl(), error: 'invalid_token' });
    expect(c['error_description']).toMatch(/another resource/);
  });

  it('an expired token signed by the issuer: 401 invalid_token', async () => {
    const now = Math.floor(Date.now() / 1000);
    const token = await issuer.sign({
      iss: issuer.issuer,
      aud: http.resource,
      sub: 'agent-a',
      client_id: 'agent-a',
      scope: 'mcp:tools records:write',
      iat: now - 600,
      exp: now - 300,
    });
    const res = await post(initialize, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(401);
    expect(challenge(res)).toMatchObject({
      error: 'invalid_token',
      error_description: 'the token has expired',
    });
  });

  it('a token from another issuer for this very resource: 401 invalid_token', async () => {
    const token = await stranger.token(AGENT_A, http.resource, 'mcp:tools records:write');
    const res = await post(initialize, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(401);
    expect(challenge(res)).toMatchObject({ error: 'invalid_token' });
  });

  it('a valid token without the gateway scope: 403 insufficient_scope', async () => {
    const token = await issuer.token(OUTSIDER, http.resource, 'records:write');
    const res = await post(initialize, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(403);
    expect(challenge(res)).toMatchObject({ error: 'insufficient_scope', scope: 'mcp:tools' });
  });

  it('garbage and unknown static tokens: 401, and no refusal logs the token', async () => {
    for (const header of ['Bearer not-a-known-token', 'Basic dXNlcjpwYXNz']) {
      const res = await post(initialize, { authorization: header });
      expect(res.status).toBe(401);
    }
    expect(logs.join('\n')).not.toContain('not-a-known-token');
    expect(fake.groundTruth()).toEqual([]);
  });
});

describe('MCP SDK clients with their OAuth support', () => {
  it('v1: discovers the metadata, gets a token (client credentials), calls through, recorded by name', async () => {
    const provider = new CredentialsV1({
      clientId: AGENT_A.client_id,
      clientSecret: AGENT_A.client_secret,
      scope: 'mcp:tools records:write',
    });
    const client = new ClientV1({ name: 'team-v1', version: '1.0.0' });
    await client.connect(new TransportV1(new URL(http.url), { authProvider: provider }));
    try {
      const r = await client.callTool({ name: 'create_record', arguments: { title: 'from v1' } });
      expect(r.structuredContent).toMatchObject({ ok: true, category: 'succeeded' });
    } finally {
      await client.close();
    }
    expect(fake.resources.all('records').map((x) => x['title'])).toEqual(['from v1']);
    const opened = await openedBy('agent-a');
    expect(opened.length).toBeGreaterThan(0);
    expect((opened.at(-1)!.data as { caller: unknown }).caller).toEqual({
      kind: 'token',
      subject: 'agent-a',
      client_id: 'agent-a',
      issuer: issuer.issuer,
      scopes: ['mcp:tools', 'records:write'],
    });
    // The caller's token stays at the gateway: nothing recorded or sent carries it.
    const token = provider.tokens()?.access_token;
    expect(token).toBeTruthy();
    expect(JSON.stringify(await ledger.read())).not.toContain(token!);
    expect(fake.groundTruthJsonl()).not.toContain(token!);

    // The identity where investigators look: ops show, the web view, the span.
    const opId = opened.at(-1)!.operation_id!;
    const view = projectOperation(await ledger.query({ operation_id: opId }))!;
    expect(formatOperation(view)).toContain(
      `caller       agent-a (token; client agent-a; issuer ${issuer.issuer}; scopes mcp:tools records:write)`,
    );
    const ui = await createUi({
      store: ledger,
      ledger: 'memory:',
      hosts: ['ui.test:1'],
      token: 't',
    });
    const page = await ui.app.request(`/op/${opId}`, {
      headers: { host: 'ui.test:1', cookie: `${TOKEN_COOKIE}=t` },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(
      /<dt>caller<\/dt>\s*<dd class="caller">agent-a \(token; client agent-a;/,
    );
    const span = spans
      .getFinishedSpans()
      .find(
        (s) => s.name.startsWith('execute_tool') && s.attributes['candor.operation.id'] === opId,
      );
    expect(span?.attributes).toMatchObject({
      'enduser.id': 'agent-a',
      'candor.caller.client_id': 'agent-a',
      'enduser.scope': 'mcp:tools records:write',
    });
    expect(JSON.stringify(spans.getFinishedSpans().map((s) => s.attributes))).not.toContain(token!);
  });

  it('v2: the same with the v2 client and its provider (expected issuer pinned)', async () => {
    const provider = new CredentialsV2({
      clientId: AGENT_A.client_id,
      clientSecret: AGENT_A.client_secret,
      scope: 'mcp:tools records:write',
      expectedIssuer: issuer.issuer,
    });
    const client = new ClientV2({ name: 'team-v2', version: '1.0.0' });
    await client.connect(new TransportV2(new URL(http.url), { authProvider: provider }));
    try {
      const r = await client.callTool({ name: 'create_record', arguments: { title: 'from v2' } });
      expect(r.structuredContent).toMatchObject({ ok: true, category: 'succeeded' });
    } finally {
      await client.close();
    }
    expect(fake.resources.all('records').map((x) => x['title'])).toEqual(['from v2']);
  });
});

describe('per-caller tool access', () => {
  it('a caller without the tool scope: authorization_denied, recorded with its name, nothing sent', async () => {
    const token = await issuer.token(AGENT_B, http.resource, 'mcp:tools');
    const client = new ClientV1({ name: 'team-b', version: '1.0.0' });
    await client.connect(
      new TransportV1(new URL(http.url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    let envelope: Record<string, unknown>;
    try {
      const r = await client.callTool({ name: 'create_record', arguments: { title: 'not mine' } });
      expect(r.isError).toBe(true);
      envelope = r.structuredContent as Record<string, unknown>;
    } finally {
      await client.close();
    }
    expect(envelope).toMatchObject({
      ok: false,
      category: 'authorization_denied',
      retry: 'never',
      remote_effect: 'none',
      data: { refusal: { code: 'caller_not_permitted' } },
    });
    expect(String(envelope['message'])).toMatch(/nothing was sent/);
    expect(fake.groundTruth()).toEqual([]);
    expect(fake.resources.all('records')).toEqual([]);
    const opId = String(envelope['operation_id']);
    const events = await ledger.query({ operation_id: opId });
    expect(events.map((e) => e.kind)).toEqual(['operation_opened', 'operation_resolved']);
    expect(events[0]!.data).toMatchObject({
      caller: { subject: 'agent-b', scopes: ['mcp:tools'] },
    });
    expect(events[1]!.data).toMatchObject({ state: 'cancelled', category: 'authorization_denied' });
  });

  it('a static token (stored as its hash) stands for its name and its scopes', async () => {
    const client = new ClientV1({ name: 'ci', version: '1.0.0' });
    await client.connect(
      new TransportV1(new URL(http.url), {
        requestInit: { headers: { authorization: `Bearer ${STATIC_TOKEN}` } },
      }),
    );
    try {
      const r = await client.callTool({ name: 'create_record', arguments: { title: 'from ci' } });
      expect(r.structuredContent).toMatchObject({ ok: true });
    } finally {
      await client.close();
    }
    const opened = await openedBy('ci-bot');
    expect((opened.at(-1)!.data as { caller: unknown }).caller).toEqual({
      kind: 'token',
      subject: 'ci-bot',
      client_id: null,
      issuer: null,
      scopes: ['mcp:tools', 'records:write'],
    });
  });
});

describe('sessions belong to the principal that opened them', () => {
  it("another principal presenting A's session id gets 404 and nothing is done", async () => {
    const tokenA = await issuer.token(AGENT_A, http.resource, 'mcp:tools records:write');
    const opened = await post(initialize, { authorization: `Bearer ${tokenA}` });
    expect(opened.status).toBe(200);
    await opened.text();
    const sid = opened.headers.get('mcp-session-id')!;
    const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    const ack = await post(
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      {
        ...h,
        authorization: `Bearer ${tokenA}`,
      },
    );
    expect(ack.status).toBe(202);
    const call = {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'create_record', arguments: { title: 'hijack' } },
    };
    const before = (await ledger.read()).length;
    // Even the static token, which may create records, cannot ride A's session.
    const stolen = await post(call, { ...h, authorization: `Bearer ${STATIC_TOKEN}` });
    expect(stolen.status).toBe(404);
    expect(fake.groundTruth()).toEqual([]);
    expect((await ledger.read()).length).toBe(before);
    // A itself still can.
    const own = await post(call, { ...h, authorization: `Bearer ${tokenA}` });
    expect(own.status).toBe(200);
    expect(await own.text()).toContain('succeeded');
    expect(fake.resources.all('records').map((x) => x['title'])).toEqual(['hijack']);
  });
});

describe('configuration', () => {
  it('listening beyond loopback without auth is refused at load, at the field', () => {
    const r = parseConfig(
      `${testConfigYaml({ origin: fake.url })}mcp:\n  http:\n    host: 0.0.0.0\n`,
      'team.yaml',
    );
    expect(r.ok).toBe(false);
    expect(r.failure?.message).toMatch(
      /^team\.yaml:\d+:\d+: .*mcp\.http\.host.*allow_unauthenticated: true/m,
    );
  });

  it('allow_unauthenticated: true accepts it on purpose', () => {
    const r = parseConfig(
      `${testConfigYaml({ origin: fake.url })}mcp:\n  http:\n    host: 0.0.0.0\n    allow_unauthenticated: true\n`,
      'team.yaml',
    );
    expect(r.ok).toBe(true);
  });

  it('auth without an issuer or a static token is an error at the field', () => {
    const r = parseConfig(
      `${testConfigYaml({ origin: fake.url })}mcp:\n  http:\n    auth: { scopes: [a] }\n`,
      'team.yaml',
    );
    expect(r.failure?.message).toMatch(
      /team\.yaml:\d+:\d+: mcp\.http\.auth\.issuer: .*static_tokens/,
    );
  });
});
