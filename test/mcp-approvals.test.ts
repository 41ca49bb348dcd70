// Approvals through the MCP gateway: a client that supports elicitation is asked; a "no" ends the
// call with approval_denied and the fake service receives nothing. A read never asks.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { closeHttpPools } from '../src/http/transport.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { composeGateway } from '../src/mcp/start.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';

let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 'test', token: TEST_TOKEN }] });
});
afterAll(async () => {
  await fake.close();
  await closeHttpPools();
});

async function connect(answers: boolean[]) {
  const yaml = `${testConfigYaml({ origin: fake.url })}approvals:\n  approver: elicitation\n`;
  const loaded = parseConfig(yaml, 'candor.yaml');
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
  const ledger = openMemoryLedger();
  const { gateway } = composeGateway({
    loaded: loaded.value,
    ledger,
    env: { [TEST_TOKEN_VAR]: TEST_TOKEN },
  });
  const server = gateway.createServer();
  const client = new Client(
    { name: 'approval-test', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  const asked: string[] = [];
  client.setRequestHandler(ElicitRequestSchema, (req) => {
    asked.push(req.params.message);
    const yes = answers.shift() ?? false;
    return { action: 'accept', content: { approve: yes } };
  });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await Promise.all([server.connect(a), client.connect(b)]);
  const call = async (name: string, args: Record<string, unknown>) => {
    const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
    return {
      isError: r.isError,
      env: r.structuredContent as {
        category: string;
        remote_effect: string;
        correlation_id: string;
      },
    };
  };
  return { call, asked, ledger, close: () => client.close() };
}

describe('approvals over MCP elicitation', () => {
  it('asks the client; "no" gives approval_denied and the service receives nothing', async () => {
    const c = await connect([false]);
    const denied = await c.call('create_record', { title: 'needs a yes' });
    expect(denied.isError).toBe(true);
    expect(denied.env).toMatchObject({ category: 'approval_denied', remote_effect: 'none' });
    expect(c.asked).toHaveLength(1);
    expect(c.asked[0]).toContain('create_record');
    expect(fake.groundTruth(denied.env.correlation_id)).toEqual([]);
    expect(
      fake.resources.list('records', {}).filter((r) => r.title === 'needs a yes'),
    ).toHaveLength(0);
    const kinds = (await c.ledger.read()).map((e) => e.kind);
    expect(kinds).toContain('approval_requested');
    expect(kinds).toContain('approval_decided');
    await c.close();
  });

  it('"yes" lets the call run; a read never asks', async () => {
    const c = await connect([true]);
    const created = await c.call('create_record', { title: 'approved one' });
    expect(created.env.category).toBe('succeeded');
    const id = (created.env as unknown as { data: { id: string } }).data.id;
    const read = await c.call('get_record', { id });
    expect(read.env.category).toBe('succeeded');
    expect(c.asked).toHaveLength(1);
    await c.close();
  });
});
