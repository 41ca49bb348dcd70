// Streamable HTTP on loopback, both protocol eras on one endpoint:
//   - 2026-07-28 requests (per-request `_meta` envelope, `server/discover`) go to the v2 SDK's
//     modern handler, one server instance per request.
//   - 2025-era clients get stateful sessions (`Mcp-Session-Id`): the session's server knows the
//     client's capabilities (form elicitation for approvals) and hears `notifications/cancelled`.
//     A dropped connection is not a cancellation: the call runs to its end and its outcome stays
//     retrievable with operation_status.
// Checks before any MCP processing: the Host header (DNS rebinding) and the Origin header against
// an allow-list (default: loopback origins only) → 403; a body over the size limit → 413 with a
// JSON-RPC error and one log line; unparseable JSON → a parse error and one log line; a JSON-RPC
// batch where the protocol version forbids it (2025-06-18 and later, and any batch opening a
// session) → 400. A 2025-era request other than `initialize` without a session is refused.
// With inbound authentication (src/auth/resource-server.ts), every MCP request is authenticated
// first (401/403 with the RFC 6750 challenge pointing at the RFC 9728 metadata, served here), runs
// as its principal (src/auth/context.ts), and a 2025-era session belongs to the principal that
// opened it: another principal presenting its Mcp-Session-Id is told the session does not exist.
// The Authorization header is consumed here and never reaches a destination.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeStreamableHTTPServerTransport, toWebRequest } from '@modelcontextprotocol/node';
import { createMcpHandler, isLegacyRequest, type Server } from '@modelcontextprotocol/server';
import type { Gateway } from './gateway.js';
import { runAs } from '../auth/context.js';
import { asUpstreamPrincipal } from '../upstream/oauth/principal.js';
import type { Principal, ResourceServer } from '../auth/resource-server.js';

export interface HttpGateway {
  /** `http://127.0.0.1:PORT/mcp`, or the configured public URL. */
  readonly url: string;
  /** The OAuth resource URI (RFC 8707) tokens must name: the URL. */
  readonly resource: string;
  readonly port: number;
  /** Open 2025-era sessions. */
  sessions(): number;
  close(): Promise<void>;
}

export interface HttpOptions {
  log?: (line: string) => void;
  /** Origins admitted besides loopback ones (`http://127.0.0.1:*`, `http://localhost:*`, `[::1]`). */
  allowedOrigins?: readonly string[];
  /** Largest request body accepted, in bytes (default 4 MiB). */
  maxBodyBytes?: number;
  /** Address to listen on (default 127.0.0.1). */
  host?: string;
  /** The URL clients use (behind a proxy); default `http://HOST:PORT/mcp`. */
  publicUrl?: string;
  /** Inbound authentication, built once the resource URI is known. */
  auth?: (resource: string) => ResourceServer;
}

export const MCP_PATH = '/mcp';
export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

/** The first protocol revision without JSON-RPC batches. */
const NO_BATCH_FROM = '2025-06-18';

interface Session {
  transport: NodeStreamableHTTPServerTransport;
  server: Server;
  /** Who opened it (null without authentication); nobody else may use it. */
  owner: string | null;
}

/** A principal's identity for session binding: issuer and subject. */
const principalKey = (p: Principal | null): string | null =>
  p ? `${p.caller.issuer ?? 'static'} ${p.caller.subject}` : null;

function rpcError(res: ServerResponse, status: number, code: number, message: string): void {
  if (res.headersSent) return;
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

/** Loopback origins are always admitted; anything else only when listed. */
export function originAllowed(origin: string, extra: readonly string[]): boolean {
  if (extra.includes(origin)) return true;
  try {
    const u = new URL(origin);
    return (
      (u.protocol === 'http:' || u.protocol === 'https:') &&
      (u.hostname === '127.0.0.1' || u.hostname === 'localhost' || u.hostname === '[::1]')
    );
  } catch {
    return false;
  }
}

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer | 'too_large'> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) return 'too_large';
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

async function sendResponse(res: ServerResponse, response: Response): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((v, k) => (headers[k] = v));
  res.writeHead(response.status, headers);
  if (!response.body) {
    res.end();
    return;
  }
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  res.once('close', () => void reader.cancel().catch(() => undefined));
  for (;;) {
    const next = await reader.read();
    if (next.done) break;
    res.write(next.value);
  }
  res.end();
}

const isInitialize = (m: unknown): boolean =>
  typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'initialize';

export async function serveHttp(
  gateway: Gateway,
  port: number,
  options: HttpOptions = {},
): Promise<HttpGateway> {
  const log = options.log ?? (() => undefined);
  const extraOrigins = options.allowedOrigins ?? [];
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const sessions = new Map<string, Session>();
  let allowedHosts: string[] | null = [];
  let guard: ResourceServer | null = null;
  let metadataPaths: string[] = [];
  const modern = createMcpHandler(() => gateway.createServer(), {
    legacy: 'reject',
    maxRequestBodySize: maxBody,
    onerror: (error) => log(`candor serve: HTTP: ${error.message}`),
  });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (guard && metadataPaths.includes(path)) {
      // Public by design (RFC 9728): how to obtain a token for this resource.
      res
        .writeHead(req.method === 'GET' ? 200 : 405, {
          'content-type': 'application/json',
          'access-control-allow-origin': '*',
          'cache-control': 'max-age=300',
        })
        .end(req.method === 'GET' ? JSON.stringify(guard.metadata()) : '');
      return;
    }
    if (path !== MCP_PATH) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}');
      return;
    }
    if (allowedHosts && !allowedHosts.includes(req.headers.host ?? '')) {
      rpcError(res, 403, -32000, 'Forbidden: the Host header is not this gateway');
      return;
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !originAllowed(origin, extraOrigins)) {
      log(`candor serve: HTTP: refused a request from origin ${JSON.stringify(origin)}`);
      rpcError(res, 403, -32000, 'Forbidden: origin not allowed');
      return;
    }
    let principal: Principal | null = null;
    /** Runs request handling as the authenticated principal (nobody's, without auth). */
    let as = <T>(fn: () => T): T => runAs(principal, fn);
    if (guard) {
      const checked = await guard.authenticate(req.headers.authorization);
      if (!checked.ok) {
        const f = checked.failure;
        log(`candor serve: HTTP: refused a request (${f.status}: ${f.description})`);
        if (!res.headersSent)
          res
            .writeHead(f.status, {
              'content-type': 'application/json',
              'www-authenticate': guard.challenge(f),
            })
            .end(
              JSON.stringify({
                jsonrpc: '2.0',
                error: { code: -32001, message: `Unauthorized: ${f.description}` },
                id: null,
              }),
            );
        return;
      }
      principal = checked.value;
      // Per-principal upstream tokens (src/upstream/oauth/principal.ts): the caller, and its own
      // token for a token exchange (never forwarded to an upstream).
      const bearer = /^Bearer +(\S+)$/i.exec(req.headers.authorization?.trim() ?? '')?.[1] ?? null;
      const upstreamPrincipal = { caller: checked.value.caller, subject_token: bearer };
      const p = principal;
      as = (fn) => runAs(p, () => asUpstreamPrincipal(upstreamPrincipal, fn));
    }
    const sid = req.headers['mcp-session-id'];
    const found = typeof sid === 'string' ? sessions.get(sid) : undefined;
    // Another principal's session does not exist for this one: nothing is done, nothing revealed.
    const session = found && found.owner === principalKey(principal) ? found : undefined;
    if (found && !session)
      log(
        `candor serve: HTTP: refused ${principal?.caller.subject ?? 'a caller'} the session of another principal`,
      );
    if (typeof sid === 'string' && !session) {
      rpcError(res, 404, -32001, 'Session not found');
      return;
    }
    if (req.method !== 'POST') {
      if (session) await as(() => session.transport.handleRequest(req, res));
      else rpcError(res, 405, -32000, 'Method not allowed.');
      return;
    }
    const raw = await readBody(req, maxBody);
    if (raw === 'too_large') {
      log(`candor serve: HTTP: refused a request body over ${maxBody} bytes`);
      rpcError(res, 413, -32600, `Request body over ${maxBody} bytes`);
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      log(`candor serve: HTTP: a request body is not JSON (${raw.length} bytes)`);
      rpcError(res, 400, -32700, 'Parse error: the body is not JSON');
      return;
    }
    if (session) {
      const version = session.server.getNegotiatedProtocolVersion() ?? NO_BATCH_FROM;
      if (Array.isArray(body) && version >= NO_BATCH_FROM) {
        rpcError(res, 400, -32600, `Invalid Request: protocol ${version} has no JSON-RPC batches`);
        return;
      }
      await as(() => session.transport.handleRequest(req, res, body));
      return;
    }
    const web = await toWebRequest(req as Parameters<typeof toWebRequest>[0], body);
    if (!(await isLegacyRequest(web, body))) {
      await sendResponse(res, await as(() => modern.fetch(web)));
      return;
    }
    if (Array.isArray(body)) {
      rpcError(res, 400, -32600, 'Invalid Request: a batch cannot open a session');
      return;
    }
    if (!isInitialize(body)) {
      rpcError(res, 400, -32000, 'Bad Request: no session; send initialize first');
      return;
    }
    const server = gateway.createServer();
    const owner = principalKey(principal);
    const transport: NodeStreamableHTTPServerTransport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, { transport, server, owner }),
      onsessionclosed: (id) => void sessions.delete(id),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await as(() => transport.handleRequest(req, res, body));
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log(
        `candor serve: HTTP handler failed: ${error instanceof Error ? error.message : String(error)}`,
      );
      rpcError(res, 500, -32603, 'Internal error');
    });
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen({ host, port }, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const actual = (http.address() as AddressInfo).port;
  const loopback = host === '127.0.0.1' || host === 'localhost' || host === '::1';
  const urlHost = loopback || host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  const url =
    options.publicUrl ??
    `http://${urlHost.includes(':') ? `[${urlHost}]` : urlHost}:${actual}${MCP_PATH}`;
  // The Host check guards a loopback gateway against DNS rebinding; beyond loopback the gateway
  // is reached by names this process cannot know unless public_url names it (and is
  // authenticated, or explicitly open: see config/schema.ts).
  if (options.publicUrl)
    allowedHosts = [new URL(options.publicUrl).host, `127.0.0.1:${actual}`, `localhost:${actual}`];
  else if (loopback) allowedHosts = [`127.0.0.1:${actual}`, `localhost:${actual}`];
  else allowedHosts = null;
  if (options.auth) {
    guard = options.auth(url);
    const suffixed = new URL(guard.metadataUrl).pathname;
    // The public URL's path may differ behind a proxy: the local endpoint's form is served too.
    metadataPaths = [
      ...new Set([
        suffixed,
        `/.well-known/oauth-protected-resource${MCP_PATH}`,
        '/.well-known/oauth-protected-resource',
      ]),
    ];
  }
  return {
    url,
    resource: url,
    port: actual,
    sessions: () => sessions.size,
    close: async () => {
      const closed = new Promise<void>((resolve) => http.close(() => resolve()));
      await modern.close();
      await Promise.allSettled([...sessions.values()].map((s) => s.server.close()));
      sessions.clear();
      http.closeAllConnections();
      await closed;
    },
  };
}
