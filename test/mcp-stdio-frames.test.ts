// `candor serve` over stdio, driven with raw frames (no SDK client, so nothing is smoothed over):
// a tools/call before initialize is refused, an unparseable line gets a parse error and one log
// line, a frame over the size limit gets an error answer naming its id and one log line, and the
// gateway keeps serving after each; an unknown tool's error message is not double-prefixed.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { DEFAULT_MAX_LINE_BYTES } from '../src/mcp/stdio.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';
import { ROOT, serveCommand, tempDir, writeConfig } from './fixtures/mcp/stdio.js';

let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ seed: 12, tokens: [{ name: 'agent', token: TEST_TOKEN }] });
});
afterAll(async () => {
  await fake?.close();
});

describe('candor serve over stdio: bad frames', () => {
  it('refuses, answers and logs each bad frame with one line, and keeps serving', async () => {
    const dir = tempDir('candor-stdio-frames-');
    const config = writeConfig(dir, testConfigYaml({ origin: fake.url }));
    const child = spawn(process.execPath, [...serveCommand(), '--config', config], {
      cwd: ROOT,
      env: { PATH: process.env['PATH'] ?? '', [TEST_TOKEN_VAR]: TEST_TOKEN },
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const answers = new Map<string, Record<string, unknown>>();
    const waiters = new Map<string, (m: Record<string, unknown>) => void>();
    createInterface({ input: child.stdout }).on('line', (line) => {
      const m = JSON.parse(line) as Record<string, unknown>;
      const key = JSON.stringify(m['id'] ?? null);
      answers.set(key, m);
      waiters.get(key)?.(m);
    });
    const answer = (id: unknown) =>
      new Promise<Record<string, unknown>>((resolve) => {
        const key = JSON.stringify(id);
        const seen = answers.get(key);
        if (seen) resolve(seen);
        else waiters.set(key, resolve);
      });
    const send = (m: unknown) => child.stdin.write(`${JSON.stringify(m)}\n`);

    send({
      jsonrpc: '2.0',
      id: 'early',
      method: 'tools/call',
      params: { name: 'create_record', arguments: { title: 'too early' } },
    });
    expect(await answer('early')).toMatchObject({
      error: { code: -32600, message: expect.stringContaining('before initialize') },
    });
    expect(fake.resources.all('records')).toEqual([]);

    child.stdin.write('this is not json\n');
    expect(await answer(null)).toMatchObject({ error: { code: -32700 } });

    send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'raw', version: '1' },
      },
    });
    expect(await answer(1)).toMatchObject({ result: { protocolVersion: '2025-11-25' } });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });

    send({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: {
        name: 'create_record',
        arguments: { title: 'x'.repeat(DEFAULT_MAX_LINE_BYTES + 10) },
      },
    });
    expect(await answer(2)).toMatchObject({ error: { code: -32600 } });

    send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'nope', arguments: {} } });
    const unknown = (await answer(3))['error'] as { message: string };
    expect(unknown.message).toBe('unknown tool "nope"');

    send({
      jsonrpc: '2.0',
      id: 4,
      method: 'tools/call',
      params: { name: 'create_record', arguments: { title: 'still serving' } },
    });
    expect(await answer(4)).toMatchObject({
      result: { isError: false, structuredContent: { ok: true } },
    });
    expect(fake.resources.all('records').map((r) => r['title'])).toEqual(['still serving']);

    child.stdin.end();
    expect(await exited).toBe(0);
    const lines = stderr.trim().split('\n');
    expect(lines.filter((l) => l.includes('is not JSON'))).toHaveLength(1);
    expect(lines.filter((l) => l.includes('refused a message of'))).toHaveLength(1);
    expect(stderr).not.toContain('x'.repeat(100));
    expect(stderr).not.toContain('    at '); // no stack trace
  });
});
