// `candor serve --http 0` as a process: prints its loopback URL, serves Streamable HTTP statelessly,
// and stops cleanly on SIGTERM after closing its ledger.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { approvalQueue } from '../src/approvals/index.js';
import { openLedger } from '../src/ledger/open.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';
import { ROOT, serveCommand, tempDir, writeConfig } from './fixtures/mcp/stdio.js';

let fake: FakeService;

beforeAll(async () => {
  fake = await startFakeService({ seed: 9, tokens: [{ name: 'agent', token: TEST_TOKEN }] });
});
afterAll(async () => {
  await fake?.close();
});

describe('candor serve --http', () => {
  it('serves MCP on 127.0.0.1 and exits 0 on SIGTERM', async () => {
    const dir = tempDir('candor-mcp-http-');
    const config = writeConfig(dir, testConfigYaml({ origin: fake.url }));
    const ledgerUrl = `sqlite:${join(dir, 'ledger.db')}`;
    const child = spawn(
      process.execPath,
      [...serveCommand(), '--config', config, '--http', '0', '--ledger', ledgerUrl],
      { cwd: ROOT, env: { PATH: process.env['PATH'] ?? '', [TEST_TOKEN_VAR]: TEST_TOKEN } },
    );
    const exited = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => resolve(code)),
    );
    let out = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString('utf8');
        const m = /MCP on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.once('exit', () => reject(new Error(`exited before listening: ${out}`)));
    });
    const client = new Client({ name: 'http-process-test', version: '1.0.0' });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
      const r = await client.callTool({ name: 'create_record', arguments: { title: 'via http' } });
      expect(r.isError).toBe(false);
      expect(r.structuredContent).toMatchObject({ ok: true, category: 'succeeded' });
    } finally {
      await client.close();
    }
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const opened = await openLedger(ledgerUrl, { mustExist: true });
    if (!opened.ok) throw new Error(opened.failure.message);
    const kinds = (await opened.value.read()).map((e) => e.kind);
    await opened.value.close();
    expect(kinds).toEqual(
      expect.arrayContaining(['operation_opened', 'attempt_started', 'attempt_finished']),
    );
    expect(kinds.at(-1)).toBe('session_ended');
    expect(fake.resources.all('records')).toHaveLength(1);
  });

  it('SIGTERM with a call waiting on a person: the card is denied, the call answered, exit 0', async () => {
    const dir = tempDir('candor-mcp-http-sigterm-');
    const queueDir = join(dir, 'q');
    const config = writeConfig(
      dir,
      `${testConfigYaml({ origin: fake.url })}approvals:\n  approver: console\n  wait_ms: 600000\n  dir: '${queueDir}'\n`,
    );
    const ledgerUrl = `sqlite:${join(dir, 'ledger.db')}`;
    const child = spawn(
      process.execPath,
      [...serveCommand(), '--config', config, '--http', '0', '--ledger', ledgerUrl],
      { cwd: ROOT, env: { PATH: process.env['PATH'] ?? '', [TEST_TOKEN_VAR]: TEST_TOKEN } },
    );
    const exited = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => resolve(code)),
    );
    let out = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString('utf8');
        const m = /MCP on (http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.once('exit', () => reject(new Error(`exited before listening: ${out}`)));
    });
    const client = new Client({ name: 'sigterm-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    const call = client.callTool({ name: 'delete_record', arguments: { id: 'rec_0001' } });
    const queue = approvalQueue(queueDir);
    for (let i = 0; i < 500 && (await queue.pending(Date.now())).length === 0; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(await queue.pending(Date.now())).toHaveLength(1);
    child.kill('SIGTERM');
    const answered = await call;
    expect(answered.structuredContent).toMatchObject({
      category: 'approval_denied',
      remote_effect: 'none',
    });
    expect(await exited).toBe(0);
    await client.close().catch(() => undefined);
    const opened = await openLedger(ledgerUrl, { mustExist: true });
    if (!opened.ok) throw new Error(opened.failure.message);
    const events = await opened.value.read();
    await opened.value.close();
    expect(events.filter((e) => e.kind === 'approval_decided').map((e) => e.data)).toMatchObject([
      { decision: 'denied', approver: 'gateway:stopped' },
    ]);
    expect(events.filter((e) => e.kind === 'attempt_started')).toEqual([]);
    expect(events.at(-1)?.kind).toBe('session_ended');
  });
});
