// Streamable HTTP on loopback, stateless: every POST gets a fresh MCP Server and transport bound to
// the one gateway (shared runtime and ledger). DNS-rebinding protection admits only loopback Host
// headers. A client that disconnects mid-call aborts that call's signal, like a cancellation.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Gateway } from './gateway.js';

export interface HttpGateway {
  /** `http://127.0.0.1:PORT/mcp` */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

export const MCP_PATH = '/mcp';

export async function serveHttp(
  gateway: Gateway,
  port: number,
  log: (line: string) => void = () => undefined,
): Promise<HttpGateway> {
  let allowedHosts: string[] = [];
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== MCP_PATH) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}');
      return;
    }
    if (req.method !== 'POST') {
      // Stateless: no standalone SSE stream and no session to delete.
      res.writeHead(405, { allow: 'POST', 'content-type': 'application/json' });
      res.end(
        '{"jsonrpc":"2.0","error":{"code":-32000,"message":"Method not allowed."},"id":null}',
      );
      return;
    }
    const server = gateway.createServer();
    // No sessionIdGenerator: stateless mode.
    const transport = new StreamableHTTPServerTransport({
      enableJsonResponse: true,
      enableDnsRebindingProtection: true,
      allowedHosts,
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  };
  const http = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log(
        `candor serve: HTTP handler failed: ${error instanceof Error ? error.message : String(error)}`,
      );
      if (!res.headersSent)
        res
          .writeHead(500, { 'content-type': 'application/json' })
          .end('{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"},"id":null}');
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen({ host: '127.0.0.1', port }, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const actual = (http.address() as AddressInfo).port;
  allowedHosts = [`127.0.0.1:${actual}`, `localhost:${actual}`];
  return {
    url: `http://127.0.0.1:${actual}${MCP_PATH}`,
    port: actual,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeIdleConnections();
        http.close(() => resolve());
      }),
  };
}
