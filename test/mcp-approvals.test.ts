// Approvals through the MCP gateway: a client that supports elicitation is asked; a "no" ends the
// call with approval_denied and the fake service receives nothing. A read never asks.
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalQueue } from '../src/approvals/index.js';
import { parseConfig } from '../src/config/load.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { composeGateway } from '../src/mcp/start.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';

let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 'test', token: TEST_TOKEN }] });
});
afterAll(async () => {
  await fake.close();
});

async function connect(
  answers: boolean[],
  opts: { waitMs?: number; dir?: string; elicitation?: Record<string, unknown> | null } = {},
) {
  const yaml =
    `${testConfigYaml({ origin: fake.url })}approvals:\n  approver: elicitation\n` +
    (opts.waitMs !== undefined ? `  wait_ms: ${opts.waitMs}\n` : '') +
    (opts.dir ? `  dir: '${opts.dir}'\n` : '');
  const loaded = parseConfig(yaml, 'candor.yaml');
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
  const ledger = openMemoryLedger();
  const { gateway, approvals } = composeGateway({
    loaded: loaded.value,
    ledger,
    env: { [TEST_TOKEN_VAR]: TEST_TOKEN },
  });
  const server = gateway.createServer();
  const client = new Client(
    { name: 'approval-test', version: '1.0.0' },
    {
      capabilities:
        opts.elicitation === null ? {} : { elicitation: opts.elicitation ?? { form: {} } },
    },
  );
  const asked: string[] = [];
  if (opts.elicitation !== null)
    client.setRequestHandler(ElicitRequestSchema, (req) => {
      asked.push(req.params.message);
      const yes = answers.shift() ?? false;
      return { action: 'accept', content: { approve: yes } };
    });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await Promise.all([server.connect(a), client.connect(b)]);
  const call = async (name: string, args: Record<string, unknown>, signal?: AbortSignal) => {
    const r = (await client.callTool(
      { name, arguments: args },
      undefined,
      signal ? { signal } : {},
    )) as CallToolResult;
    return {
      isError: r.isError,
      env: r.structuredContent as {
        category: string;
        remote_effect: string;
        correlation_id: string;
        operation_id: string;
        retry: string;
        data: unknown;
      },
    };
  };
  return { call, asked, ledger, gateway, approvals, client, close: () => client.close() };
}

/**
 * Resolves once a card waits in the console queue under `dir`: woken by the queue folder's change
 * events (the card is renamed into place), not by polling on a timer.
 */
async function untilQueued(dir: string): Promise<void> {
  const requests = join(dir, 'requests');
  mkdirSync(requests, { recursive: true });
  const watcher = watch(requests);
  try {
    for (;;) {
      // Listening before looking: a card renamed in between still wakes the next wait.
      const changed = once(watcher, 'change');
      if ((await approvalQueue(dir).pending(Date.now())).length > 0) return;
      await changed;
    }
  } finally {
    watcher.close();
  }
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

function decisions(events: Array<{ kind: string; data: unknown }>) {
  return events
    .filter((e) => e.kind === 'approval_decided')
    .map((e) => {
      const d = e.data as { decision: string; approver: string };
      return { decision: d.decision, approver: d.approver };
    });
}

describe('approvals that never hang a call', () => {
  it('a client without form elicitation (URL only) is never asked through it: approval_pending, then yes on the console proceeds', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-mcp-approvals-'));
    // wait_ms above the console poll interval (250 ms), so the second call sees the decision.
    const c = await connect([true], { waitMs: 1_000, dir, elicitation: { url: {} } });
    const rec = fake.resources.create(
      'records',
      { title: 'to delete (url-only)' },
      { correlation_id: null, request: 0 },
    );
    const pending = await c.call('delete_record', { id: rec.id });
    expect(c.asked).toEqual([]);
    expect(pending.isError).toBe(true);
    expect(pending.env).toMatchObject({
      category: 'approval_pending',
      retry: 'after_approval',
      remote_effect: 'none',
    });
    const card = (pending.env.data as { approval_id: string }).approval_id;
    expect(fake.groundTruth(pending.env.correlation_id)).toEqual([]);
    const queue = approvalQueue(dir);
    expect((await queue.pending(Date.now())).map((x) => x.approval_id)).toEqual([card]);
    expect((await queue.decide(card, 'approved', 'console:test', Date.now())).ok).toBe(true);
    const done = await c.call('delete_record', {
      id: rec.id,
      operation_id: pending.env.operation_id,
    });
    expect(done.env).toMatchObject({
      category: 'succeeded',
      operation_id: pending.env.operation_id,
    });
    expect(fake.resources.all('records').find((r) => r.id === rec.id)).toMatchObject({
      state: 'deleted',
    });
    // The grant is bound to the operation and its request: it was used once, by this operation.
    expect(decisions(await c.ledger.read())).toEqual([
      { decision: 'approved', approver: 'console:test' },
    ]);
    await c.close();
  });

  it('a decline after approval_pending makes the next call approval_denied, with nothing sent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-mcp-approvals-'));
    const c = await connect([], { waitMs: 1_000, dir, elicitation: null });
    const rec = fake.resources.create(
      'records',
      { title: 'kept' },
      { correlation_id: null, request: 0 },
    );
    const pending = await c.call('delete_record', { id: rec.id });
    expect(pending.env.category).toBe('approval_pending');
    const card = (pending.env.data as { approval_id: string }).approval_id;
    await approvalQueue(dir).decide(card, 'denied', 'console:test', Date.now());
    const denied = await c.call('delete_record', {
      id: rec.id,
      operation_id: pending.env.operation_id,
    });
    expect(denied.env).toMatchObject({ category: 'approval_denied', remote_effect: 'none' });
    expect(fake.resources.get('records', rec.id)).toMatchObject({ state: 'active' });
    expect(fake.groundTruth(pending.env.correlation_id)).toEqual([]);
    await c.close();
  });

  it('a cancelled call withdraws its card: recorded, and gone from the console queue', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-mcp-approvals-'));
    const c = await connect([], { waitMs: 60_000, dir, elicitation: null });
    const rec = fake.resources.create(
      'records',
      { title: 'cancelled delete' },
      { correlation_id: null, request: 0 },
    );
    const queue = approvalQueue(dir);
    const controller = new AbortController();
    const call = c.call('delete_record', { id: rec.id }, controller.signal).then(
      () => 'answered',
      () => 'cancelled',
    );
    await untilQueued(dir);
    expect(await queue.pending(Date.now())).toHaveLength(1);
    controller.abort();
    expect(await call).toBe('cancelled');
    await c.gateway.idle();
    expect(decisions(await c.ledger.read())).toEqual([
      { decision: 'expired', approver: 'withdrawn' },
    ]);
    expect(await queue.pending(Date.now())).toEqual([]);
    expect(c.approvals?.open()).toBe(0);
    expect(fake.resources.get('records', rec.id)).toMatchObject({ state: 'active' });
    await c.close();
  });

  it('shutdown denies every open card at once and the waiting call is answered', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-mcp-approvals-'));
    const c = await connect([], { waitMs: 60_000, dir, elicitation: null });
    const rec = fake.resources.create(
      'records',
      { title: 'shutdown delete' },
      { correlation_id: null, request: 0 },
    );
    const queue = approvalQueue(dir);
    const call = c.call('delete_record', { id: rec.id });
    await untilQueued(dir);
    await c.approvals!.shutdown();
    const answered = await call;
    expect(answered.env).toMatchObject({ category: 'approval_denied', remote_effect: 'none' });
    expect(decisions(await c.ledger.read())).toEqual([
      { decision: 'denied', approver: 'gateway:stopped' },
    ]);
    expect(await queue.pending(Date.now())).toEqual([]);
    await c.close();
  });
});
