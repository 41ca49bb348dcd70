// The transport contract (test/transport.case.ts) over the upstream MCP adapter, with a real stdio
// MCP server (test/fixtures/upstream/hostile-server.mjs): a normal result, a JSON-RPC refusal, a
// tool that never answers, and an upstream whose command does not exist. An MCP lookup's answer is
// read by the configured rule, so the transport itself never says absent.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { McpPrepared } from '../src/core/transport.js';
import { mcpTransport } from '../src/upstream/adapter.js';
import { upstreamConnection } from '../src/upstream/connection.js';
import { transportContract } from './transport.case.js';

const HOSTILE = join(import.meta.dirname, 'fixtures', 'upstream', 'hostile-server.mjs');

transportContract('MCP (a real stdio upstream)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'candor-transport-mcp-'));
  const env = { CANDOR_TRUTH: join(dir, 'truth.jsonl'), CANDOR_CALL_LOG: join(dir, 'calls.jsonl') };
  const upstreams = new Map([
    [
      'hostile',
      upstreamConnection('hostile', () =>
        Promise.resolve({
          kind: 'stdio' as const,
          command: process.execPath,
          args: [HOSTILE],
          env,
        }),
      ),
    ],
    [
      'missing',
      upstreamConnection('missing', () =>
        Promise.resolve({
          kind: 'stdio' as const,
          command: join(dir, 'no-such-server'),
          args: [],
          env: {},
        }),
      ),
    ],
  ]);
  const transport = mcpTransport({ upstreams });
  const call = (tool: string, upstream = 'hostile'): McpPrepared => ({
    kind: 'mcp',
    id: `att_${tool}`,
    upstream,
    tool,
    arguments: { customer: 'acme', amount: 5 },
    deadline_ms: 60_000,
  });
  return Promise.resolve({
    transport,
    answered: call('invoice_ok'),
    failing: call('invoice_ok', 'missing'),
    held: call('invoice_hang'),
    lookups: {
      found: call('invoice_ok'),
      absent: null,
      failed: call('invoice_reject'),
      held: call('invoice_hang'),
    },
    close: async () => {
      for (const u of upstreams.values()) await u.close();
      rmSync(dir, { recursive: true, force: true });
    },
  });
});
