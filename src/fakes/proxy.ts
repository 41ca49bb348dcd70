// The fault-injecting HTTP/1.1 proxy (`candor proxy --upstream URL`): the fake service's sockets,
// faults and ground-truth log (connection.ts, faults.ts, truth.ts) in front of a real service. A
// request that a fault cuts off before it is forwarded never reaches the upstream; an
// `after_forward` fault cuts the client off once the request was written upstream, and the proxy
// still waits for the upstream's answer; every later phase (delay past the deadline, FIN, RST, a
// body cut at byte k, malformed replies, a stale keep-alive socket) shapes the upstream's real
// answer. Ground truth: "forwarded, upstream answered 2xx" to a write is recorded as
// `mutation_committed` (applied); "never forwarded" is not applied; a request forwarded without a
// usable answer stays unknown (`forwarded` without `upstream_answered`).
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { ApiOutcome, ApiRequest } from './api.js';
import type { RequestHandler } from './connection.js';
import { startFakeService, type FakeService, type FakeServiceOptions } from './service.js';

export interface ProxyOptions extends Omit<FakeServiceOptions, 'handler' | 'fixtures' | 'kinds'> {
  /** http(s)://host[:port][/prefix] of the real service. */
  upstream: string;
  /** How long to wait for the upstream's answer before recording it as never answered. Default 60 s. */
  upstreamTimeoutMs?: number;
}

export interface ProxyService extends FakeService {
  readonly upstream: string;
  /**
   * Resolves once every request of this id that was forwarded has its upstream answer (or failure)
   * recorded: a client cut off by `after_forward` learns nothing, but the ground truth must.
   */
  settled(callId: string): Promise<void>;
}

/** Headers that belong to one connection and are never passed on (RFC 9110 §7.6.1). */
const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
  'host',
  'content-length',
]);
const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

export class UpstreamError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/** Refuses to start in front of an upstream that cannot be reached (one line naming it). */
export async function probeUpstream(upstream: string, timeoutMs = 3000): Promise<void> {
  let url: URL;
  try {
    url = new URL(upstream);
  } catch {
    throw new UpstreamError(`--upstream ${upstream}: not a URL`, 'invalid_url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UpstreamError(
      `--upstream ${upstream}: only http and https are proxied`,
      'invalid_url',
    );
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  await new Promise<void>((resolve, reject) => {
    const socket = net.connect({ host: url.hostname.replace(/^\[|\]$/g, ''), port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new UpstreamError(`upstream ${upstream}: no connection within ${timeoutMs} ms`, 'timeout'),
      );
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.end();
      resolve();
    });
    socket.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      const code = e.code ?? 'error';
      reject(
        new UpstreamError(
          `upstream ${upstream}: ${code === 'ECONNREFUSED' ? 'connection refused' : 'unreachable'} (${code})`,
          code,
        ),
      );
    });
  });
}

export async function startProxy(options: ProxyOptions): Promise<ProxyService> {
  await probeUpstream(options.upstream);
  const base = new URL(options.upstream);
  const prefix = base.pathname.replace(/\/+$/, '');
  const secure = base.protocol === 'https:';
  const agent = secure
    ? new https.Agent({ keepAlive: true, maxSockets: 16 })
    : new http.Agent({ keepAlive: true, maxSockets: 16 });
  const timeout = options.upstreamTimeoutMs ?? 60_000;

  const pending = new Map<string, Set<Promise<ApiOutcome>>>();
  const track = (req: ApiRequest, p: Promise<ApiOutcome>): Promise<ApiOutcome> => {
    for (const id of new Set([req.headers['x-candor-call-id'], req.correlationId])) {
      if (id === undefined || id === null || id === '') continue;
      const set = pending.get(id) ?? new Set();
      set.add(p);
      pending.set(id, set);
      void p.finally(() => {
        set.delete(p);
        if (set.size === 0) pending.delete(id);
      });
    }
    return p;
  };
  const forward =
    (): RequestHandler =>
    (req, hooks): Promise<ApiOutcome> =>
      track(
        req,
        new Promise((resolve) => {
          const method = req.method.toUpperCase();
          const query = req.query.toString();
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k)) headers[k] = v;
          headers['content-length'] = String(req.body.length);
          const failed = (code: string): void =>
            resolve({
              response: { status: 502, headers: {}, body: { error: 'upstream_failed', code } },
              mutations: [],
              replayed: false,
              truth: [{ event: 'upstream_failed', details: { detail: code } }],
            });
          const r = (secure ? https : http).request(
            {
              protocol: base.protocol,
              hostname: base.hostname.replace(/^\[|\]$/g, ''),
              port: base.port || (secure ? 443 : 80),
              method,
              path: `${prefix}${req.path}${query ? `?${query}` : ''}`,
              headers,
              agent,
              timeout,
            },
            (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (c: Buffer) => chunks.push(c));
              res.on('error', () => failed('upstream_body_broken'));
              res.on('end', () => resolve(answered(req, method, res, Buffer.concat(chunks))));
            },
          );
          // `finish`: the whole request was handed to the upstream socket.
          r.once('finish', () => hooks.forwarded());
          r.once('timeout', () =>
            r.destroy(new UpstreamError('upstream timeout', 'upstream_timeout')),
          );
          r.once('error', (e: NodeJS.ErrnoException) => failed(e.code ?? 'upstream_error'));
          r.end(req.body);
        }),
      );

  const service = await startFakeService({ ...options, handler: forward });
  return {
    ...service,
    upstream: options.upstream,
    async settled(callId) {
      // Connection logs the answer in the same turn the promise resolves; one more turn for it.
      await Promise.all([...(pending.get(callId) ?? [])]);
      await new Promise((r) => setImmediate(r));
    },
    async close() {
      await service.close();
      agent.destroy();
    },
  };
}

function answered(
  req: ApiRequest,
  method: string,
  res: http.IncomingMessage,
  raw: Buffer,
): ApiOutcome {
  const status = res.statusCode ?? 502;
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(res.headers))
    if (!HOP.has(k) && v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
  // JSON is kept as a value so that malformed variants (a dropped field) can work on it.
  let body: unknown = raw;
  if (/json/i.test(headers['content-type'] ?? '') && raw.length > 0) {
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      body = raw;
    }
  }
  if (raw.length === 0) body = undefined;
  const replayed = headers['idempotent-replayed'] === 'true';
  const applied = !READS.has(method) && status >= 200 && status < 300 && !replayed;
  const id =
    typeof body === 'object' && body !== null && !Buffer.isBuffer(body)
      ? (body as Record<string, unknown>).id
      : undefined;
  return {
    response: { status, headers, body },
    mutations: applied
      ? [
          {
            resource_kind: req.path,
            resource_id: typeof id === 'string' || typeof id === 'number' ? String(id) : '',
            mutation: method === 'DELETE' ? 'delete' : method === 'POST' ? 'create' : 'update',
          },
        ]
      : [],
    replayed,
    truth: [{ event: 'upstream_answered', details: { status } }],
  };
}
