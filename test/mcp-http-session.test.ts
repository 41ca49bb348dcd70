// Streamable HTTP in process, over real loopback sockets: Origin allow-list, batches, sessions,
// cancellation (notifications/cancelled is honoured; a dropped connection is not a cancel), and
// a pre-initialize call refused. The fake's ground truth is compared with the ledger each time.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { projectOperation } from '../src/ledger/projection.js';
import type { Gateway } from '../src/mcp/gateway.js';
import { serveHttp, type HttpGateway } from '../src/mcp/http.js';
import { composeGateway } from '../src/mcp/start.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';

let fake: FakeService;
let ledger: LedgerStore;
let gateway: Gateway;
let http: HttpGateway;
const logs: string[] = [];

beforeEach(async () => {
  fake = await startFakeService({ seed: 5, tokens: [{ name: 'agent', token: TEST_TOKEN }] });
  const loaded = parseConfig(testConfigYaml({ origin: fake.url }), 'test.yaml');
  if (!loaded.ok) throw new Error(loaded.failure.message);
  ledger = openMemoryLedger();
  gateway = composeGateway({
    loaded: loaded.value,
    ledger,
    env: { [TEST_TOKEN_VAR]: TEST_TOKEN },
  }).gateway;
  http = await serveHttp(gateway, 0, { log: (l) => logs.push(l) });
});

afterEach(async () => {
  await gateway.idle();
  await http.close();
  await ledger.close();
  await fake.close();
  logs.length = 0;
});

const HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
};

function post(body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) {
  return fetch(http.url, {
    method: 'POST',
    headers: { ...HEADERS, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

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

/** Opens a 2025-11-25 session with raw requests; returns its headers. */
async function openSession(): Promise<Record<string, string>> {
  const r = await post(initialize);
  expect(r.status).toBe(200);
  await r.text();
  const sid = r.headers.get('mcp-session-id');
  expect(sid).toMatch(/^[0-9a-f-]{36}$/);
  const h = { 'mcp-session-id': sid!, 'mcp-protocol-version': '2025-11-25' };
  const ack = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  expect(ack.status).toBe(202);
  return h;
}

async function waitFor(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).toBe(true);
}

async function stateOf(operationId: string): Promise<string | null | undefined> {
  return projectOperation(await ledger.query({ operation_id: operationId }))?.state;
}

describe('HTTP: refusals before any MCP processing', () => {
  it('a foreign Origin gets 403 and nothing is processed; loopback origins are admitted', async () => {
    const evil = await post(initialize, { origin: 'http://evil.example' });
    expect(evil.status).toBe(403);
    expect(await evil.json()).toMatchObject({
      error: { message: 'Forbidden: origin not allowed' },
    });
    expect(http.sessions()).toBe(0);
    expect(logs.join('\n')).toContain('http://evil.example');
    const local = await post(initialize, { origin: 'http://localhost:5173' });
    expect(local.status).toBe(200);
    expect(http.sessions()).toBe(1);
  });

  it('a batch under 2025-11-25 is refused, as is a batch opening a session', async () => {
    const h = await openSession();
    const batch = [
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      {
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'create_record', arguments: { title: 'b' } },
      },
    ];
    const r = await post(batch, h);
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({ error: { code: -32600 } });
    const opening = await post([initialize]);
    expect(opening.status).toBe(400);
    expect(fake.resources.all('records')).toEqual([]);
    expect(await ledger.read()).toEqual([]);
  });

  it('tools/call without a session (before initialize) is refused; a non-JSON body is a parse error with one log line', async () => {
    const early = await post({
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: { name: 'create_record', arguments: { title: 'early' } },
    });
    expect(early.status).toBe(400);
    expect(fake.resources.all('records')).toEqual([]);
    const junk = await post('{not json', {});
    expect(junk.status).toBe(400);
    expect(await junk.json()).toMatchObject({ error: { code: -32700 } });
    expect(logs.filter((l) => l.includes('not JSON'))).toHaveLength(1);
  });

  it('a body over the size limit is answered 413 and the gateway keeps serving', async () => {
    const small = await serveHttp(gateway, 0, { maxBodyBytes: 1024, log: (l) => logs.push(l) });
    try {
      const big = await fetch(small.url, {
        method: 'POST',
        headers: HEADERS,
        body: JSON.stringify({ ...initialize, pad: 'x'.repeat(4096) }),
      });
      expect(big.status).toBe(413);
      expect(logs.some((l) => l.includes('over 1024 bytes'))).toBe(true);
      const ok = await fetch(small.url, {
        method: 'POST',
        headers: HEADERS,
        body: JSON.stringify(initialize),
      });
      expect(ok.status).toBe(200);
    } finally {
      await small.close();
    }
  });
});

describe('HTTP: cancellation', () => {
  it('notifications/cancelled is honoured: the call stops waiting and the ledger says unknown, as the fake shows it committed', async () => {
    fake.arm({
      match: { method: 'POST', path: '/v1/deployments' },
      phase: 'after_commit',
      action: 'delay',
      delay_ms: 5_000,
    });
    const client = new Client({ name: 'cancel-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(http.url)));
    try {
      const controller = new AbortController();
      const call = client
        .callTool({ name: 'create_deployment', arguments: { service: 'api' } }, undefined, {
          signal: controller.signal,
        })
        .then(
          () => 'answered',
          () => 'cancelled',
        );
      await waitFor(() => fake.resources.all('deployments').length === 1);
      controller.abort();
      expect(await call).toBe('cancelled');
      await gateway.idle();
      const [opened] = (await ledger.read()).filter((e) => e.kind === 'operation_opened');
      // Honoured: the call ended before the fake's delayed answer, so the outcome is unknown
      // (not succeeded), and the fake confirms one deployment was committed.
      expect(await stateOf(opened!.operation_id!)).toBe('unknown');
      expect(fake.resources.all('deployments')).toHaveLength(1);
    } finally {
      await client.close();
    }
  });

  it('a dropped connection is not a cancel: the call runs to its end and operation_status reports it', async () => {
    fake.arm({
      match: { method: 'POST', path: '/v1/deployments' },
      phase: 'after_commit',
      action: 'delay',
      delay_ms: 300,
    });
    const h = await openSession();
    const drop = new AbortController();
    const call = post(
      {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'create_deployment', arguments: { service: 'web' } },
      },
      h,
      drop.signal,
    )
      .then((r) => r.text())
      .catch(() => 'dropped');
    await waitFor(() => fake.resources.all('deployments').length === 1);
    drop.abort();
    expect(await call).toBe('dropped');
    await gateway.idle();
    const [opened] = (await ledger.read()).filter((e) => e.kind === 'operation_opened');
    const opId = opened!.operation_id!;
    expect(await stateOf(opId)).toBe('succeeded');
    const status = await gateway.callTool('operation_status', { operation_id: opId });
    expect(status.structuredContent).toMatchObject({ ok: true, data: { state: 'succeeded' } });
    expect(fake.resources.all('deployments')).toHaveLength(1);
    expect(http.sessions()).toBe(1);
  });
});
