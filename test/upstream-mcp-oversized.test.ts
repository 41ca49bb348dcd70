// A hostile upstream MCP server sends one 300 MB message (test/fixtures/upstream/
// oversized-server.mjs), over stdio (one line) and over Streamable HTTP (one JSON answer). Candor
// reads at most `max_message_bytes` (here 1 MiB): the call is a coded outcome — written, outcome
// unknown, UPSTREAM_MESSAGE_TOO_LARGE, one log line — the connection is closed long before the
// 300 MB were handed over, and the next call on the same upstream is answered normally.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { mcpTransport } from '../src/upstream/adapter.js';
import { UPSTREAM_MESSAGE_TOO_LARGE } from '../src/upstream/bounded.js';
import { upstreamConnection, type UpstreamEndpoint } from '../src/upstream/connection.js';
import { ROOT, tempDir } from './fixtures/mcp/stdio.js';

const SERVER = join(ROOT, 'test', 'fixtures', 'upstream', 'oversized-server.mjs');
const HUGE = 300 * 1024 * 1024;
const LIMIT = 1024 * 1024;

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/**
 * What the server managed to hand over per huge answer. Waits for a whole line: the server appends
 * it when the reader goes away, and under load the file can exist (opened) before its line is in.
 */
async function written(log: string): Promise<Array<{ written: number; of: number }>> {
  let text = '';
  for (let i = 0; i < 600; i++) {
    text = existsSync(log) ? readFileSync(log, 'utf8') : '';
    if (text.endsWith('\n')) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!text.endsWith('\n'))
    throw new Error(`the hostile server wrote no whole line to ${log} in 30 s`);
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { written: number; of: number });
}

async function exercise(endpoint: UpstreamEndpoint, log: string): Promise<void> {
  const lines: string[] = [];
  const conn = upstreamConnection('hostile', () => Promise.resolve(endpoint), {
    log: (l) => lines.push(l),
    max_message_bytes: LIMIT,
  });
  cleanup.push(() => conn.close());
  const transport = mcpTransport({ upstreams: new Map([['hostile', conn]]) });
  expect((await conn.listTools()).map((t) => t.name)).toEqual(['small', 'huge']);

  const out = await transport.dispatch(
    {
      kind: 'mcp',
      id: 'att_huge',
      upstream: 'hostile',
      tool: 'huge',
      arguments: {},
      deadline_ms: 60_000,
    },
    {},
  );
  // Written, and no usable answer: the outcome is unknown, with the code (never "not sent").
  expect(out.evidence).toEqual({
    phase: 'request_sent',
    local_error: 'other',
    error_code: UPSTREAM_MESSAGE_TOO_LARGE,
  });
  expect(out.data).toBeNull();
  const told = lines.filter((l) => l.includes(UPSTREAM_MESSAGE_TOO_LARGE));
  expect(told).toHaveLength(1);
  expect(told[0]).toContain(`past the limit of ${LIMIT} bytes (max_message_bytes)`);

  // The upstream could not hand over its 300 MB: reading stopped and the connection closed.
  const [huge] = await written(log);
  expect(huge!.of).toBe(HUGE);
  expect(huge!.written).toBeLessThan(HUGE / 4);

  // The next call on the same upstream is answered (a stdio child is started again).
  const next = await transport.dispatch(
    {
      kind: 'mcp',
      id: 'att_small',
      upstream: 'hostile',
      tool: 'small',
      arguments: {},
      deadline_ms: 30_000,
    },
    {},
  );
  expect(next.evidence).toEqual({ phase: 'response_complete', mcp_reply: 'result' });
  expect(next.data).toMatchObject({ content: [{ type: 'text', text: 'small answer' }] });
}

describe('a hostile upstream MCP server sending a 300 MB message', () => {
  it('over stdio: one line past max_message_bytes closes the child; the call is UPSTREAM_MESSAGE_TOO_LARGE', async () => {
    const dir = tempDir('oversized-stdio');
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const log = join(dir, 'written.jsonl');
    await exercise(
      {
        kind: 'stdio',
        command: process.execPath,
        args: [SERVER],
        env: { CANDOR_WRITTEN_LOG: log },
      },
      log,
    );
  }, 120_000);

  it('over Streamable HTTP: an answer past max_message_bytes is cut off; the call is UPSTREAM_MESSAGE_TOO_LARGE', async () => {
    const dir = tempDir('oversized-http');
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const log = join(dir, 'written.jsonl');
    const child: ChildProcess = spawn(process.execPath, [SERVER, '--http'], {
      env: { ...process.env, CANDOR_WRITTEN_LOG: log },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    cleanup.push(() => void child.kill());
    const first = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', resolve);
      child.once('exit', () => reject(new Error('the hostile server exited')));
    });
    const { port } = JSON.parse(first) as { port: number };
    await exercise({ kind: 'http', url: `http://127.0.0.1:${port}/mcp`, headers: {} }, log);
  }, 120_000);
});
