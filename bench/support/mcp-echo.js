// The upstream of bench/gateway-vs-proxy.js: an MCP server over stdio (the SDK's McpServer) with
// two tools that answer at once: `read` (readOnlyHint) and `write` (neither read-only nor
// destructive: a `create` for Candor). Both echo their `text` back, so what is measured is the
// path in front of the server, not the server.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'bench-echo', version: '1.0.0' });
let writes = 0;
server.registerTool(
  'read',
  {
    description: 'Echoes text (read-only).',
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: true },
  },
  ({ text }) => ({ content: [{ type: 'text', text }] }),
);
server.registerTool(
  'write',
  {
    description: 'Echoes text and counts the call (a write).',
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
  },
  ({ text }) => ({ content: [{ type: 'text', text: `${++writes}:${text}` }] }),
);
await server.connect(new StdioServerTransport());
