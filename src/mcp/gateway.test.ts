// The gateway through a real MCP SDK client (in-memory MCP transport; the actions go over real
// loopback sockets to the fault-injecting fake). The stdio process path is in test/mcp-*.test.ts.
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from '../../test/fixtures/mcp/config.js';
import { parseConfig } from '../config/load.js';
import { envelopeSchema, type Envelope } from '../core/envelope.js';
import { startFakeService, type FakeService } from '../fakes/index.js';
import { openMemoryLedger } from '../ledger/memory/store.js';
import type { LedgerStore } from '../ledger/store.js';
import type { Gateway } from './gateway.js';
import { serveHttp } from './http.js';
import { composeGateway } from './start.js';

let fake: FakeService;
let ledger: LedgerStore;
let gateway: Gateway;
let client: Client;
const outputs: string[] = [];

beforeEach(async () => {
  fake = await startFakeService({ seed: 3, tokens: [{ name: 'agent', token: TEST_TOKEN }] });
  const loaded = parseConfig(
    testConfigYaml({ origin: fake.url, createDeadlineMs: 300 }),
    'test.yaml',
  );
  if (!loaded.ok) throw new Error(loaded.failure.message);
  ledger = openMemoryLedger();
  gateway = composeGateway({
    loaded: loaded.value,
    ledger,
    env: { [TEST_TOKEN_VAR]: TEST_TOKEN },
    log: (line) => outputs.push(line),
  }).gateway;
  const [a, b] = InMemoryTransport.createLinkedPair();
  await gateway.createServer().connect(b);
  client = new Client({ name: 'gateway-test', version: '1.0.0' });
  await client.connect(a);
});

afterEach(async () => {
  await client.close();
  await gateway.idle();
  await ledger.close();
  await fake.close();
  expect(outputs.join('\n')).not.toContain(TEST_TOKEN);
  outputs.length = 0;
});

async function call(
  name: string,
  args: Record<string, unknown>,
  options: Parameters<Client['callTool']>[2] = {},
): Promise<{ isError: boolean; env: Envelope; text: string }> {
  const r = await client.callTool({ name, arguments: args }, undefined, options);
  const text = JSON.stringify(r);
  outputs.push(text);
  const content = r.content as Array<{ type: string; text: string }>;
  expect(content).toHaveLength(1);
  // The text mirror: one plain line first (DONE / NOT DONE / OUTCOME UNKNOWN / DONE, BUT), then
  // the JSON envelope; NOT DONE exactly when nothing was applied.
  const [first, ...rest] = content[0]!.text.split('\n');
  const effect = (r.structuredContent as { remote_effect?: string }).remote_effect;
  expect(first).toMatch(
    !r.isError
      ? /^DONE( — | EARLIER, THIS CALL REFUSED — )/
      : effect === 'none'
        ? /^NOT DONE/
        : /^(OUTCOME UNKNOWN|DONE, BUT|DONE MORE)/,
  );
  expect(JSON.parse(rest.join('\n'))).toEqual(r.structuredContent);
  return { isError: r.isError === true, env: envelopeSchema.parse(r.structuredContent), text };
}

async function protocolError(name: string, args: Record<string, unknown>): Promise<McpError> {
  const err: unknown = await client.callTool({ name, arguments: args }).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(McpError);
  return err as McpError;
}

describe('tools/list', () => {
  it('lists every action and the built-ins with the envelope outputSchema and class annotations', async () => {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect([...byName.keys()].sort()).toEqual(
      [
        'add_note',
        'create_deployment',
        'create_record',
        'delete_record',
        'get_record',
        'list_unresolved_operations',
        'operation_status',
        'reconcile_operation',
        'set_record_state',
      ].sort(),
    );
    for (const t of tools) {
      expect(t.outputSchema).toMatchObject({ type: 'object', required: expect.any(Array) });
      expect(t.inputSchema.type).toBe('object');
      expect(t.title).toEqual(expect.any(String));
    }
    const create = byName.get('create_record')!;
    expect(create.title).toBe('Create record');
    expect(create.annotations).toEqual({
      title: 'Create record',
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: true,
    });
    expect(Object.keys(create.inputSchema.properties!)).toEqual(['title', 'operation_id']);
    expect(create.inputSchema.required).toEqual(['title']);
    expect(create.description).toContain(
      'never start a new call for the same intent after outcome_unknown',
    );
    expect(byName.get('get_record')!.annotations).toMatchObject({
      readOnlyHint: true,
      idempotentHint: true,
    });
    expect(byName.get('set_record_state')!.annotations).toMatchObject({
      destructiveHint: true,
      idempotentHint: true,
    });
    expect(byName.get('delete_record')!.annotations).toMatchObject({
      destructiveHint: true,
      idempotentHint: false,
    });
    // reconcile_operation may resend the operation's own request under an honoured key.
    expect(byName.get('reconcile_operation')!.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: true,
    });
    expect(byName.get('operation_status')!.annotations).toMatchObject({ readOnlyHint: true });
  });

  it('gives every tool its own portable outputSchema: no $id, no empty subschema, no type array', async () => {
    const { tools } = await client.listTools();
    const problems: string[] = [];
    const walk = (node: unknown, at: string): void => {
      if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${at}[${i}]`));
      if (node === null || typeof node !== 'object') return;
      const o = node as Record<string, unknown>;
      if (Object.keys(o).length === 0) problems.push(`${at}: empty subschema`);
      if ('$id' in o) problems.push(`${at}: $id`);
      if (Array.isArray(o['type'])) problems.push(`${at}: type array`);
      for (const [k, v] of Object.entries(o))
        if (k !== 'enum' && k !== 'required') walk(v, `${at}.${k}`);
    };
    for (const t of tools) walk(t.outputSchema, t.name);
    expect(problems).toEqual([]);
    const data = (tools[0]!.outputSchema as { properties: Record<string, unknown> }).properties;
    expect(data['data']).toEqual({
      anyOf: expect.arrayContaining([{ type: 'object' }, { type: 'null' }]),
    });
  });
});

describe('tools/call', () => {
  it('returns isError false and the envelope for a success, isError true for a refusal', async () => {
    const created = await call('create_record', { title: 'first' });
    expect(created.isError).toBe(false);
    expect(created.env).toMatchObject({
      ok: true,
      category: 'succeeded',
      operation: 'create_record',
      remote_effect: 'applied',
      data: { id: 'rec_0001', title: 'first' },
    });
    expect(fake.resources.all('records')).toHaveLength(1);
    expect(fake.resources.all('records')[0]).toMatchObject({
      client_ref: created.env.operation_id,
    });

    const missing = await call('get_record', { id: 'rec_9999' });
    expect(missing.isError).toBe(true);
    expect(missing.env).toMatchObject({
      ok: false,
      category: 'confirmed_rejection',
      retry: 'never',
      remote_effect: 'none',
      data: null,
    });
    expect(missing.env.diagnostics_ref).toMatch(/^diag_/);
    expect(missing.text).not.toContain('not_found'); // the provider's body stays in diagnostics
  });

  it('answers invalid arguments with an invalid_input result naming the field; an unknown tool is a protocol error', async () => {
    const unknownTool = await protocolError('no_such_tool', {});
    expect(unknownTool.code).toBe(ErrorCode.InvalidParams);
    // Not double-prefixed ("MCP error -32602: MCP error -32602: ...").
    expect(unknownTool.message.match(/MCP error/g) ?? []).toHaveLength(1);
    const bad = await call('create_record', { title: 7 });
    expect(bad.isError).toBe(true);
    expect(bad.env).toMatchObject({
      category: 'invalid_input',
      retry: 'never',
      remote_effect: 'none',
      data: { field: 'title' },
    });
    expect(bad.env.message).toContain('title');
    expect(bad.text).not.toContain('invalid_type'); // no raw zod dump
    const badId = await call('create_record', { title: 'x', operation_id: 'nope' });
    expect(badId.env).toMatchObject({ category: 'invalid_input', data: { field: 'operation_id' } });
    // An operation id this ledger does not hold: nothing sent, and never "not applied" — an earlier
    // call under that id (another ledger, a reset one) may have applied its effect.
    const unknown = await call('operation_status', {
      operation_id: 'op_01ZZZZZZZZZZZZZZZZZZZZZZZZ',
    });
    expect(unknown.env).toMatchObject({
      category: 'outcome_unknown',
      retry: 'escalate',
      remote_effect: 'unknown',
      data: { refusal: { code: 'unknown_operation' } },
    });
    expect(unknown.env.message).toContain('holds no operation op_01ZZZZZZZZZZZZZZZZZZZZZZZZ');
    const retryUnknown = await call('create_record', {
      title: 'x',
      operation_id: 'op_01ZZZZZZZZZZZZZZZZZZZZZZZZ',
    });
    expect(retryUnknown.env).toMatchObject({
      category: 'outcome_unknown',
      retry: 'escalate',
      remote_effect: 'unknown',
      operation_id: 'op_01ZZZZZZZZZZZZZZZZZZZZZZZZ',
    });
    expect(retryUnknown.text).toContain('refused: unknown_operation');
    const reconcileUnknown = await call('reconcile_operation', {
      operation_id: 'op_01ZZZZZZZZZZZZZZZZZZZZZZZZ',
    });
    expect(reconcileUnknown.env).toMatchObject({ remote_effect: 'unknown', retry: 'escalate' });
    const extra = await call('list_unresolved_operations', { extra: 1 });
    expect(extra.env.category).toBe('invalid_input');
    expect(fake.resources.all('records')).toEqual([]);
    expect(await ledger.read()).toEqual([]);
  });

  it('refuses a "retry" whose request changed: that is a new operation', async () => {
    fake.arm({
      match: { method: 'POST', path: '/v1/deployments' },
      phase: 'after_commit',
      action: 'fin',
      times: 'always',
    });
    const first = await call('create_deployment', { service: 'api' });
    expect(first.env.category).toBe('outcome_unknown');
    const changed = await call('create_deployment', {
      service: 'web',
      operation_id: first.env.operation_id,
    });
    // Refused and not sent: the envelope states the operation (its first attempt may have
    // applied), with the refusal's code (issue 29).
    expect(changed.env).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      operation_id: first.env.operation_id,
      data: { refusal: { code: 'request_changed' }, reason: 'other_input' },
    });
    expect(changed.env.message).toContain('changed');
  });

  it('arguments that break the schema on an existing operation describe the operation, never "not applied"', async () => {
    // A lost reply: the fake committed the deployment, the operation is unknown.
    fake.arm({
      match: { method: 'POST', path: '/v1/deployments' },
      phase: 'after_commit',
      action: 'rst',
      times: 'always',
    });
    const lost = await call('create_deployment', { service: 'api' });
    expect(lost.env.remote_effect).toBe('unknown');
    const sent = fake.groundTruth().filter((t) => t.event === 'received').length;
    const bad = await call('create_deployment', {
      service: 7,
      operation_id: lost.env.operation_id,
    });
    expect(bad.env).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      operation_id: lost.env.operation_id,
      data: { refusal: { code: 'invalid_input' }, field: 'service' },
    });
    expect(bad.env.retry).not.toBe('never');
    expect(bad.env.message).toMatch(/^This call was refused and sent nothing/);
    // A succeeded operation: the refused call says done earlier, and sends nothing either.
    fake.disarm();
    const done = await call('create_record', { title: 'kept' });
    expect(done.env.category).toBe('succeeded');
    const again = await call('create_record', { title: 7, operation_id: done.env.operation_id });
    expect(again.env).toMatchObject({
      ok: true,
      category: 'succeeded',
      remote_effect: 'applied',
      data: { refusal: { code: 'invalid_input' } },
    });
    expect(again.text).toContain('DONE EARLIER, THIS CALL REFUSED');
    expect(fake.groundTruth().filter((t) => t.event === 'received').length).toBe(sent + 1);
    expect(fake.resources.all('records')).toHaveLength(1);
  });

  it('after outcome_unknown, reconcile_operation finds the record instead of creating another', async () => {
    fake.arm({
      match: { method: 'POST', path: '/v1/records' },
      phase: 'after_commit',
      action: 'delay',
      delay_ms: 2_000,
    });
    const lost = await call('create_record', { title: 'late' });
    expect(lost.isError).toBe(true);
    expect(lost.env).toMatchObject({
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      remote_effect: 'unknown',
    });
    const found = await call('reconcile_operation', { operation_id: lost.env.operation_id });
    expect(found.env).toMatchObject({
      ok: true,
      category: 'succeeded',
      operation_id: lost.env.operation_id,
      data: { id: 'rec_0001', title: 'late' },
    });
    expect(fake.resources.all('records')).toHaveLength(1);
    const status = await call('operation_status', { operation_id: lost.env.operation_id });
    expect(status.env).toMatchObject({
      ok: true,
      data: { state: 'succeeded', attempts: 1, observations: 1 },
    });
  });
});

describe('cancellation', () => {
  it.each([
    ['notifications/cancelled', 'abort'],
    ['a client-side request timeout', 'timeout'],
  ] as const)(
    '%s mid-flight: the dispatch is still recorded and reported later',
    async (_, how) => {
      fake.arm({
        match: { method: 'POST', path: '/v1/deployments' },
        phase: 'after_commit',
        action: 'delay',
        delay_ms: 5_000,
      });
      const controller = new AbortController();
      const pending = client
        .callTool({ name: 'create_deployment', arguments: { service: 'api' } }, undefined, {
          ...(how === 'abort' ? { signal: controller.signal } : { timeout: 400 }),
        })
        .then(
          () => 'answered',
          () => 'cancelled',
        );
      if (how === 'abort') {
        // Cancelled once the deployment is committed (its reply is held back by the fault).
        await fake.whenTruth(
          (e) => e.event === 'mutation_committed' && e.resource_kind === 'deployments',
        );
        controller.abort();
      }
      expect(await pending).toBe('cancelled');
      await gateway.idle();
      expect(fake.resources.all('deployments')).toHaveLength(1);

      const list = await call('list_unresolved_operations', {});
      expect(list.env).toMatchObject({
        ok: true,
        category: 'succeeded',
        retry: 'never',
        remote_effect: 'none',
      });
      const ops = (list.env.data as { operations: Array<Record<string, unknown>> }).operations;
      expect(ops).toHaveLength(1);
      expect(ops[0]).toMatchObject({
        operation: 'create_deployment',
        state: 'unknown',
        category: 'outcome_unknown',
      });

      const opId = ops[0]!['operation_id'] as string;
      const status = await call('operation_status', { operation_id: opId });
      expect(status.env).toMatchObject({
        category: 'outcome_unknown',
        remote_effect: 'unknown',
        data: { state: 'unknown', attempts: 1, last_dispatch_state: 'sent_no_response' },
      });
      const found = await call('reconcile_operation', { operation_id: opId });
      expect(found.env).toMatchObject({ ok: true, data: { id: 'dep_0001', service: 'api' } });
      const after = await call('list_unresolved_operations', {});
      expect(after.env.data).toEqual({ operations: [] });
      expect(fake.resources.all('deployments')).toHaveLength(1);
    },
  );
});

describe('list_unresolved_operations', () => {
  it('does not list an operation that was resolved between the list and its status (fleet history seed 36406)', async () => {
    const created = await call('create_record', { title: 'settled meanwhile' });
    expect(created.env).toMatchObject({ ok: true, category: 'succeeded' });
    const id = created.env.operation_id!;
    // The race made deterministic: the ids were read while the operation was still unknown, and
    // another gateway's reconciliation settled it before its status was read.
    const real = ledger.unresolved.bind(ledger);
    ledger.unresolved = async () => [...(await real()), id];
    const list = await call('list_unresolved_operations', {});
    expect(list.env).toMatchObject({ ok: true, message: 'No operation is unresolved.' });
    expect(list.env.data).toEqual({ operations: [] });
  });
});

describe('Streamable HTTP', () => {
  it('serves the same tools on loopback with sessions', async () => {
    const http = await serveHttp(gateway, 0);
    const c = new Client({ name: 'http-test', version: '1.0.0' });
    try {
      await c.connect(new StreamableHTTPClientTransport(new URL(http.url)));
      expect((await c.listTools()).tools.map((t) => t.name)).toContain('create_record');
      const r = await c.callTool({ name: 'create_record', arguments: { title: 'over http' } });
      expect(r.isError).toBe(false);
      expect(r.structuredContent).toMatchObject({ ok: true, data: { title: 'over http' } });
      // DNS-rebinding protection: a foreign Host header is refused before any MCP handling.
      const bad = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(http.url, {
          method: 'POST',
          headers: {
            host: 'evil.example',
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          },
        });
        req.on('response', (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
      });
      expect(bad).toBe(403);
    } finally {
      await c.close();
      await http.close();
    }
  });
});

describe('examples/candor.yaml', () => {
  it('loads and runs against the fake once pointed at it', async () => {
    const text = readFileSync(new URL('../../examples/candor.yaml', import.meta.url), 'utf8');
    expect(text).toContain('http://127.0.0.1:8787');
    const loaded = parseConfig(text.replaceAll('http://127.0.0.1:8787', fake.url), 'candor.yaml');
    if (!loaded.ok) throw new Error(loaded.failure.message);
    expect(loaded.value.config.ledger).toBe('sqlite:./.candor/ledger.db');
    const example = composeGateway({
      loaded: loaded.value,
      ledger,
      env: { CANDOR_FAKE_TOKEN: TEST_TOKEN },
    }).gateway;
    const env = (r: { structuredContent?: unknown }) => envelopeSchema.parse(r.structuredContent);
    const dep = await example.callTool('create_deployment', { service: 'api', revision: '1.2.0' });
    expect(env(dep)).toMatchObject({ ok: true, data: { service: 'api', revision: '1.2.0' } });
    const del = await example.callTool('delete_release', { id: 'rel_0404' });
    expect(del.isError).toBe(true);
    expect(env(del)).toMatchObject({ category: 'confirmed_rejection', remote_effect: 'none' });
    const noToken = composeGateway({ loaded: loaded.value, ledger, env: {} }).gateway;
    const refused = env(await noToken.callTool('get_record', { id: 'rec_0001' }));
    // Without the variable nothing is sent: an honest local failure, never an anonymous request.
    expect(refused).toMatchObject({ category: 'local_failure', remote_effect: 'none' });
  });
});
