// The proxy's control surface, kept off the proxied port so that no path of the real service is
// shadowed: a fault file (`--faults FILE`, YAML or JSON: a list of faults or `{ faults: [...] }`)
// checked whole before anything starts, and an admin API on its own loopback port:
//   GET /health · GET /faults · POST /faults (one fault) · DELETE /faults[/ID] · GET /truth[?call_id=]
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { isNode, LineCounter, parseDocument } from 'yaml';
import { parseFault, type Fault } from './faults.js';
import type { ProxyService } from './proxy.js';

export type FaultFileResult =
  | { ok: true; value: Fault[]; failure?: never }
  | { ok: false; failure: { kind: 'unreadable' | 'invalid'; message: string }; value?: never };

export async function loadFaultFile(file: string): Promise<FaultFileResult> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'error';
    return {
      ok: false,
      failure: { kind: 'unreadable', message: `${file}: cannot read (${code})` },
    };
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  const invalid = (message: string): FaultFileResult => ({
    ok: false,
    failure: { kind: 'invalid', message },
  });
  if (doc.errors.length) {
    const e = doc.errors[0]!;
    const pos = lines.linePos(e.pos[0]);
    return invalid(`${file}:${pos.line}:${pos.col}: ${e.message.split('\n')[0] ?? ''}`);
  }
  const raw: unknown = doc.toJS();
  const wrapped = raw !== null && typeof raw === 'object' && !Array.isArray(raw) && 'faults' in raw;
  const list: unknown = wrapped ? raw.faults : raw;
  if (!Array.isArray(list))
    return invalid(`${file}: (root): expected a list of faults or { faults: [...] }`);
  const faults: Fault[] = [];
  for (const [i, item] of list.entries()) {
    const parsed = parseFault(item);
    if (parsed.ok) {
      faults.push(parsed.value);
      continue;
    }
    // The message starts with the field inside the fault (`phase: ...`): point at it.
    const field = /^([\w.]+): /.exec(parsed.failure.message)?.[1];
    const path = [...(wrapped ? ['faults'] : []), i, ...(field ? field.split('.') : [])];
    let where = file;
    for (let n = path.length; n >= 0; n--) {
      const node = doc.getIn(path.slice(0, n), true);
      if (isNode(node) && node.range) {
        const pos = lines.linePos(node.range[0]);
        where = `${file}:${pos.line}:${pos.col}`;
        break;
      }
    }
    const label = `${wrapped ? 'faults.' : ''}${i}`;
    return invalid(`${where}: ${label}.${parsed.failure.message}`);
  }
  return { ok: true, value: faults };
}

export interface AdminServer {
  url: string;
  close(): Promise<void>;
}

export async function startProxyAdmin(
  proxy: ProxyService,
  options: { port?: number; host?: string } = {},
): Promise<AdminServer> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://admin');
      const send = (status: number, body: unknown, type = 'application/json'): void => {
        const text = type === 'application/json' ? `${JSON.stringify(body)}\n` : String(body);
        res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      const method = req.method ?? 'GET';
      const path = url.pathname.replace(/\/+$/, '') || '/';
      if (method === 'GET' && path === '/health')
        return send(200, { ok: true, upstream: proxy.upstream });
      if (method === 'GET' && path === '/faults') return send(200, { faults: proxy.armed() });
      if (method === 'POST' && path === '/faults') {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          return send(400, { error: 'invalid_json' });
        }
        const parsed = parseFault(body);
        if (!parsed.ok)
          return send(400, { error: 'invalid_fault', message: parsed.failure.message });
        return send(201, proxy.arm(parsed.value));
      }
      if (method === 'DELETE' && path === '/faults') {
        proxy.disarm();
        return send(200, { disarmed: 'all' });
      }
      const one = /^\/faults\/([\w-]+)$/.exec(path);
      if (method === 'DELETE' && one) {
        proxy.disarm(one[1]);
        return send(200, { disarmed: one[1] });
      }
      if (method === 'GET' && path === '/truth')
        return send(
          200,
          proxy.groundTruthJsonl(url.searchParams.get('call_id') ?? undefined),
          'application/x-ndjson',
        );
      return send(404, { error: 'not_found' });
    });
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port: options.port ?? 0 }, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
