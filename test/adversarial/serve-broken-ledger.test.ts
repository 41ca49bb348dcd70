// Issue 12, item 11: a ledger that breaks while the gateway serves. The call's answer says the
// ledger is broken and that a person must look (never "whatever was dispatched is recorded in the
// ledger"), the operator gets one line without a stack or a driver class name, nothing is sent
// when the write-ahead record cannot be written, and the gateway keeps answering.
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { envelopeSchema } from '../../src/core/envelope.js';
import type { FakeService } from '../../src/fakes/index.js';
import { startGatewayWithFake, type StdioGateway } from '../fixtures/mcp/stdio.js';

let fake: FakeService;
let gw: StdioGateway;
let dir: string;
let stop: () => Promise<void>;

beforeAll(async () => {
  ({ fake, gw, dir, close: stop } = await startGatewayWithFake(12, 'candor-broken-ledger-'));
});

afterAll(async () => {
  await stop?.();
});

/** Every event into the main file, then all its pages but the first overwritten; a write by a
 * second connection makes the gateway's connection drop its page cache and read them. */
function corrupt(file: string): void {
  const other = new Database(file);
  other.pragma('wal_checkpoint(TRUNCATE)');
  const size = statSync(file).size;
  const fd = openSync(file, 'r+');
  writeSync(fd, Buffer.alloc(size - 4096, 0xa5), 0, size - 4096, 4096);
  closeSync(fd);
  other.pragma('user_version = 77');
  other.close();
}

describe('a ledger that breaks while serving', () => {
  it('answers with an envelope that says the ledger is broken, sends nothing, keeps serving', async () => {
    const before = await gw.client.callTool({
      name: 'create_record',
      arguments: { title: 'before' },
    });
    expect(envelopeSchema.parse(before.structuredContent).category).toBe('succeeded');
    const postsBefore = fake.groundTruth().filter((t) => t.event === 'received').length;

    corrupt(join(dir, 'ledger.db'));

    const after = await gw.client.callTool({
      name: 'create_record',
      arguments: { title: 'after' },
    });
    expect(after.isError).toBe(true);
    const envelope = envelopeSchema.parse(after.structuredContent);
    expect(envelope).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      retry: 'escalate',
      remote_effect: 'unknown',
      operation: 'create_record',
    });
    expect(envelope.message).toMatch(/^The ledger is broken \(database disk image is malformed/);
    expect(envelope.message).toContain('candor audit verify');
    const text = (after.content as { type: string; text: string }[])[0]!.text;
    expect(text).not.toMatch(/recorded in the ledger|SqliteError|TypeError/);

    // The write-ahead record could not be written, so nothing left for the destination.
    expect(fake.groundTruth().filter((t) => t.event === 'received').length).toBe(postsBefore);

    // One line for the operator: no stack, no driver class name. stderr is its own pipe: the
    // line may reach us after the answer did.
    const brokenLines = (): string[] =>
      gw
        .stderr()
        .split('\n')
        .filter((l) => l.includes('ledger is broken'));
    await vi.waitFor(() => expect(brokenLines().length).toBeGreaterThan(0), { timeout: 10_000 });
    const lines = brokenLines();
    expect(lines).toEqual([
      expect.stringMatching(/^candor serve: the ledger is broken \(during create_record\): /),
    ]);
    expect(gw.stderr()).not.toMatch(/SqliteError|^\s+at /m);

    // Still serving: the protocol works and a read of the broken ledger is answered too.
    expect((await gw.client.listTools()).tools.length).toBeGreaterThan(0);
    const status = await gw.client.callTool({ name: 'list_unresolved_operations', arguments: {} });
    expect(status.isError).toBe(true);
    expect(JSON.stringify(status.structuredContent)).toContain('ledger is broken');
  });
});
