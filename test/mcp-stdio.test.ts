// Acceptance over stdio: a real MCP SDK client spawns `candor serve`, lists the tools (outputSchema,
// annotations) and gets isError true plus a structured envelope for a failing action, isError
// false for a success. A bad configuration stops the process at start with FILE:LINE:COL.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelopeSchema } from '../src/core/envelope.js';
import type { FakeService } from '../src/fakes/index.js';
import { openLedger } from '../src/ledger/open.js';
import { TEST_TOKEN, testConfigYaml } from './fixtures/mcp/config.js';
import {
  ROOT,
  serveCommand,
  startGatewayWithFake,
  tempDir,
  writeConfig,
  type StdioGateway,
} from './fixtures/mcp/stdio.js';

let fake: FakeService;
let gw: StdioGateway;
let dir: string;
let stop: () => Promise<void>;

beforeAll(async () => {
  ({ fake, gw, dir, close: stop } = await startGatewayWithFake(5, 'candor-mcp-stdio-'));
});

afterAll(async () => {
  await stop?.();
});

describe('candor serve over stdio', () => {
  it('negotiates the 2025-11-25 protocol and lists tools with outputSchema and annotations', async () => {
    expect(gw.protocolVersion()).toBe('2025-11-25');
    expect(gw.client.getServerVersion()).toMatchObject({ name: 'candor' });
    const { tools } = await gw.client.listTools();
    const create = tools.find((t) => t.name === 'create_record');
    expect(create?.outputSchema).not.toHaveProperty('$id');
    expect(create?.outputSchema).toMatchObject({
      type: 'object',
      required: expect.arrayContaining(['ok', 'category', 'retry', 'remote_effect']),
    });
    expect(create?.annotations).toEqual({
      title: 'Create record',
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: true,
    });
    expect(tools.find((t) => t.name === 'delete_record')?.annotations?.destructiveHint).toBe(true);
    expect(tools.find((t) => t.name === 'get_record')?.annotations?.readOnlyHint).toBe(true);
    expect(tools.map((t) => t.name)).toEqual(
      expect.arrayContaining([
        'operation_status',
        'reconcile_operation',
        'list_unresolved_operations',
      ]),
    );
  });

  it('returns isError false with the envelope for a success', async () => {
    const r = await gw.client.callTool({ name: 'create_record', arguments: { title: 'stdio' } });
    expect(r.isError).toBe(false);
    const env = envelopeSchema.parse(r.structuredContent);
    expect(env).toMatchObject({
      ok: true,
      category: 'succeeded',
      operation: 'create_record',
      data: { title: 'stdio' },
    });
    expect(r.content).toEqual([
      {
        type: 'text',
        text: `DONE — create_record succeeded.\n${JSON.stringify(r.structuredContent)}`,
      },
    ]);
    expect(fake.resources.all('records')).toHaveLength(1);
  });

  it('returns isError true with a structured envelope for a failing action', async () => {
    fake.arm({ match: { method: 'PATCH', path: '/v1/records/:id' }, phase: 'status', status: 403 });
    const r = await gw.client.callTool({
      name: 'set_record_state',
      arguments: { id: 'rec_0001', state: 'archived' },
    });
    expect(r.isError).toBe(true);
    const env = envelopeSchema.parse(r.structuredContent);
    expect(env).toMatchObject({
      ok: false,
      category: 'authorization_denied',
      retry: 'never',
      remote_effect: 'none',
      operation: 'set_record_state',
    });
    expect(env.operation_id).toMatch(/^op_/);
    const [line, json] = (r.content as Array<{ text: string }>)[0]!.text.split('\n');
    expect(line).toBe('NOT DONE — authorization_denied: do not retry this call');
    expect(JSON.parse(json!)).toEqual(env);
    expect(fake.resources.all('records')[0]).toMatchObject({ state: 'active' });
    expect(JSON.stringify(r)).not.toContain(TEST_TOKEN);
  });

  it('records every call in the ledger named by --ledger, and never logs the credential', async () => {
    await gw.close();
    const opened = await openLedger(`sqlite:${join(dir, 'ledger.db')}`, { mustExist: true });
    if (!opened.ok) throw new Error(opened.failure.message);
    const events = await opened.value.read();
    await opened.value.close();
    const kinds = events.map((e) => e.kind);
    expect(kinds.filter((k) => k === 'operation_opened')).toHaveLength(2);
    expect(kinds.filter((k) => k === 'attempt_finished')).toHaveLength(2);
    expect(kinds.at(-1)).toBe('session_ended');
    expect(JSON.stringify(events)).not.toContain(TEST_TOKEN);
    expect(gw.stderr()).not.toContain(TEST_TOKEN);
  });
});

describe('candor serve with a bad configuration', () => {
  it('exits 2 before serving, naming FILE:LINE:COL and the field', () => {
    const bad = writeConfig(
      tempDir('candor-mcp-bad-'),
      testConfigYaml({ origin: 'http://127.0.0.1:9' }).replace('class: append', 'class: appendix'),
    );
    const r = spawnSync(process.execPath, [...serveCommand(), '--config', bad], {
      cwd: ROOT,
      encoding: 'utf8',
      input: '',
    });
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      new RegExp(
        `^${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:12: actions\\[2\\]\\.class: Invalid option`,
      ),
    );
  });
});
