// An upstream over Streamable HTTP (a small notes server on the MCP SDK, started by the test, with
// a bearer token Candor takes from the vault): the same operation trail and classification as
// stdio. The notes array is the ground truth; the stream is dropped after the note was stored.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { envelopeSchema, type Envelope } from '../src/core/envelope.js';
import { createKeyFile, initVault } from '../src/vault/index.js';
import {
  connectStdio,
  ROOT,
  tempDir,
  writeConfig,
  type StdioGateway,
} from './fixtures/mcp/stdio.js';

const TOKEN = 'notes-bearer-5e1f0c9a7b';
const notes: string[] = [];
const asked: string[] = [];
let dropNext = false;
/** JSON-RPC methods of every message the server received (notifications included). */
const received: string[] = [];
let slowStarted: () => void = () => undefined;
let http: Server;
let url: string;

function notesServer(): McpServer {
  const s = new McpServer({ name: 'notes', version: '1.0.0' });
  s.registerTool(
    'add_note',
    {
      description: 'Adds a note',
      inputSchema: { text: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    },
    ({ text }) => {
      notes.push(text);
      return { content: [{ type: 'text', text: `added ${text}` }] };
    },
  );
  s.registerTool(
    'slow_note',
    {
      description: 'Adds a note after a while',
      inputSchema: { text: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    },
    async ({ text }) => {
      slowStarted();
      await new Promise((r) => setTimeout(r, 3_000));
      notes.push(text);
      return { content: [{ type: 'text', text: `added ${text}` }] };
    },
  );
  s.registerTool(
    'find_notes',
    {
      description: 'Notes with this text',
      inputSchema: { text: z.string() },
      outputSchema: { notes: z.array(z.string()) },
      annotations: { readOnlyHint: true },
    },
    ({ text }) => {
      const found = notes.filter((n) => n === text);
      return {
        content: [{ type: 'text', text: JSON.stringify(found) }],
        structuredContent: { notes: found },
      };
    },
  );
  return s;
}

beforeAll(async () => {
  http = createServer((req, res) => {
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401).end();
      return;
    }
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const parsed = body
        ? (JSON.parse(body) as { method?: string; params?: { name?: string } })
        : undefined;
      if (parsed?.method) received.push(parsed.method);
      if (parsed?.method === 'tools/call') asked.push(parsed.params?.name ?? '');
      if (parsed?.method === 'tools/call' && parsed.params?.name === 'add_note' && dropNext) {
        dropNext = false;
        // The note is stored, then the stream drops before any answer.
        notes.push((parsed.params as { arguments?: { text?: string } }).arguments?.text ?? '');
        req.socket.destroy();
        return;
      }
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
      const server = notesServer();
      res.on('close', () => void transport.close().then(() => server.close()));
      void server.connect(transport).then(() => transport.handleRequest(req, res, parsed));
    });
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
});
afterAll(() => new Promise<void>((r) => http.close(() => r())));

async function call(
  gw: StdioGateway,
  name: string,
  args: Record<string, unknown>,
): Promise<Envelope> {
  const r = await gw.client.callTool({ name, arguments: args });
  return envelopeSchema.parse(r.structuredContent);
}

async function vaultWithToken(dir: string): Promise<string> {
  const keyFile = join(dir, 'vault.key');
  const vaultPath = join(dir, 'vault.json');
  expect((await createKeyFile(keyFile)).ok).toBe(true);
  const v = await initVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
  if (!v.ok) throw new Error(v.failure.message);
  const set = await v.value.set({
    name: 'notes',
    type: 'bearer',
    secret: TOKEN,
    bindings: [{ kind: 'http', origin: new URL(url).origin, path_prefix: '/mcp' }],
  });
  expect(set.ok).toBe(true);
  v.value.close();
  return `vault: { key_file: ${JSON.stringify(keyFile)}, path: ${JSON.stringify(vaultPath)} }\n`;
}

describe('an upstream over Streamable HTTP', () => {
  it('proxies with the vault credential; a dropped stream after the write is outcome_unknown and the lookup settles it', async () => {
    const dir = tempDir('candor-up-http-');
    const keyFile = join(dir, 'vault.key');
    const vaultPath = join(dir, 'vault.json');
    expect((await createKeyFile(keyFile)).ok).toBe(true);
    const v = await initVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
    if (!v.ok) throw new Error(v.failure.message);
    const origin = new URL(url).origin;
    expect(
      (
        await v.value.set({
          name: 'notes',
          type: 'bearer',
          secret: TOKEN,
          bindings: [{ kind: 'http', origin, path_prefix: '/mcp' }],
        })
      ).ok,
    ).toBe(true);
    v.value.close();
    const config = writeConfig(
      dir,
      `vault: { key_file: ${JSON.stringify(keyFile)}, path: ${JSON.stringify(vaultPath)} }
upstreams:
  notes:
    url: ${JSON.stringify(url)}
    credential: vault:notes
    deadline_ms: 20000
    tools:
      add_note:
        lookup:
          tool: find_notes
          arguments: { text: '{{input.text}}' }
          match: { kind: count, array: notes }
`,
    );
    const gw = await connectStdio(
      ['--config', config, '--ledger', `sqlite:${join(dir, 'ledger.db')}`],
      {},
      dir,
    );
    try {
      const ok = await call(gw, 'notes_add_note', { text: 'first' });
      expect(ok).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
      expect(notes).toEqual(['first']);

      dropNext = true;
      const lost = await call(gw, 'notes_add_note', { text: 'second' });
      expect(lost).toMatchObject({
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
      });
      expect(notes).toEqual(['first', 'second']);
      // The agent repeats: held by the duplicate guard, never sent.
      const again = await call(gw, 'notes_add_note', { text: 'second' });
      expect(again).toMatchObject({ retry: 'reconcile_first', operation_id: lost.operation_id });
      expect(asked.filter((n) => n === 'add_note')).toHaveLength(2);
      const r = await call(gw, 'reconcile_operation', { operation_id: lost.operation_id });
      expect(r).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
      expect(notes).toEqual(['first', 'second']);
      expect(JSON.stringify([ok, lost, again, r])).not.toContain(TOKEN);
    } finally {
      await gw.close();
    }
    expect(gw.stderr()).not.toContain(TOKEN);
  });
});

describe('candor probe mcp over Streamable HTTP', () => {
  it('reports add_note as duplicating on retry, as the notes show', async () => {
    const dir = tempDir('candor-up-http-probe-');
    const config = writeConfig(
      dir,
      `${await vaultWithToken(dir)}upstreams:
  notes:
    url: ${JSON.stringify(url)}
    credential: vault:notes
    tools:
      add_note:
        lookup:
          tool: find_notes
          arguments: { text: '{{input.text}}' }
          match: { kind: count, array: notes }
        probe:
          arguments: { text: probe-note }
`,
    );
    const json = join(dir, 'probe.json');
    // Asynchronously: the notes server runs in this process and must keep answering.
    const r = await new Promise<{ status: number | null; stdout: string; stderr: string }>(
      (done) => {
        execFile(
          process.execPath,
          [join(ROOT, 'bin', 'candor.js'), 'probe', 'mcp', '--config', config, '--json', json],
          { cwd: dir, encoding: 'utf8' },
          (error, stdout, stderr) =>
            done({
              status: error ? ((error as { code?: number }).code ?? null) : 0,
              stdout,
              stderr,
            }),
        );
      },
    );
    expect(r.status, r.stderr).toBe(1);
    const report = JSON.parse(readFileSync(json, 'utf8')) as {
      tools: Array<{ tool: string; verdict: string; reason: string }>;
    };
    expect(report.tools).toEqual([
      expect.objectContaining({ tool: 'add_note', verdict: 'duplicates on retry' }),
      // No lookup mapped: not called, not guessed.
      expect.objectContaining({
        tool: 'slow_note',
        verdict: 'not determinable',
        reason: 'no lookup',
      }),
      // Every tool is reported; a read without probe arguments is not called.
      expect.objectContaining({ tool: 'find_notes', verdict: 'read' }),
    ]);
    expect(notes.filter((n) => n === 'probe-note')).toHaveLength(2);
    expect(r.stdout + r.stderr + readFileSync(json, 'utf8')).not.toContain(TOKEN);
  });
});

describe('cancellation through Candor', () => {
  it('the agent cancels a call in flight: notifications/cancelled reaches the upstream, the operation is recorded unknown', async () => {
    const dir = tempDir('candor-up-http-cancel-');
    const config = writeConfig(
      dir,
      `${await vaultWithToken(dir)}upstreams:
  notes:
    url: ${JSON.stringify(url)}
    credential: vault:notes
`,
    );
    const gw = await connectStdio(
      ['--config', config, '--ledger', `sqlite:${join(dir, 'ledger.db')}`],
      {},
      dir,
    );
    try {
      const started = new Promise<void>((r) => (slowStarted = r));
      const abort = new AbortController();
      const pending = gw.client
        .callTool({ name: 'notes_slow_note', arguments: { text: 'slow' } }, undefined, {
          signal: abort.signal,
        })
        .catch((e: unknown) => e);
      await started;
      abort.abort();
      await pending;
      // Candor forwarded the cancellation to the upstream.
      await expect.poll(() => received.includes('notifications/cancelled')).toBe(true);
      const list = await call(gw, 'list_unresolved_operations', {});
      const ops = (
        list.data as {
          operations: Array<{ operation: string; state: string; remote_effect: string }>;
        }
      ).operations;
      expect(ops).toEqual([
        expect.objectContaining({ operation: 'notes_slow_note', remote_effect: 'unknown' }),
      ]);
    } finally {
      await gw.close();
    }
  });
});
