// The transport contract (test/transport.case.ts) over the HTTP adapter, on real sockets: a local
// server that answers, says 404, fails with 503 or never answers, and a port nobody listens on.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { HttpLookupPrepared, HttpPrepared } from '../src/core/transport.js';
import { closedPort } from '../src/fakes/sshd.js';
import { httpTransport } from '../src/http/adapter.js';
import { transportContract } from './transport.case.js';

const send = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

transportContract('HTTP (undici, real sockets)', async () => {
  const held: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    if (req.url === '/hold') return void held.push(res);
    if (req.url === '/records/r-1') return send(res, 200, { id: 'r-1' });
    if (req.url === '/records/r-2') return send(res, 404, { error: 'not_found' });
    if (req.method === 'POST') return send(res, 201, { id: 'r-1' });
    return send(res, 503, { error: 'unavailable' });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const nowhere = `http://127.0.0.1:${await closedPort()}`;
  const transport = httpTransport();
  const request = (path: string, at = origin): HttpPrepared => ({
    kind: 'http',
    id: 'att_1',
    origin: at,
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json' },
    body: '{}',
    reuse_connection: false,
  });
  const lookup = (path: string): HttpLookupPrepared => ({
    kind: 'http',
    id: 'obs_1',
    origin,
    method: 'GET',
    path,
    headers: {},
    reuse_connection: true,
    max_body_bytes: 65_536,
    absent_on_404: true,
  });
  return {
    transport,
    answered: request('/records'),
    failing: request('/records', nowhere),
    held: request('/hold'),
    lookups: {
      found: lookup('/records/r-1'),
      absent: lookup('/records/r-2'),
      failed: lookup('/records/r-3'),
      held: lookup('/hold'),
    },
    close: async () => {
      for (const res of held) res.destroy();
      await transport.close?.();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
});
