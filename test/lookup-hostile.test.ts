// A hostile lookup endpoint (issue 38): the destination that left an operation unknown answers its
// lookup with 200 and a body of 300 MB, streamed as fast as the socket takes it. The lookup reads
// at most its cap (`reconcile.max_answer_bytes`, here 1 MiB), stops, closes the connection and
// records that it learned nothing, with the code; an unrelated call running meanwhile keeps its
// deadline. Real sockets: a plain node:http server plays the destination.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAction } from '../src/engine/action.js';
import { staticCredentials } from '../src/engine/ports.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { createRuntime } from '../src/runtime.js';

const HOSTILE_BYTES = 300 * 1024 * 1024;
const CAP = 1024 * 1024;

let server: Server;
let origin: string;
/** Body bytes the hostile lookup handed to its socket, and whether its response was cut. */
const hostile = { written: 0, closedEarly: false, done: Promise.resolve() };

function handle(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  req.on('end', () => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'POST' && url.pathname === '/v1/items') {
      // Received and committed, then the connection drops: the operation is unknown.
      req.socket.destroy();
      return;
    }
    if (req.method === 'GET' && url.pathname === '/v1/items') {
      // The lookup: 200, then 300 MB of a JSON array that never gets to its end in time.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': HOSTILE_BYTES });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      chunk.write('{"items":[');
      let finished!: () => void;
      hostile.done = new Promise((r) => (finished = r));
      const pump = (): void => {
        while (hostile.written < HOSTILE_BYTES) {
          hostile.written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', () => {
        hostile.closedEarly = hostile.written < HOSTILE_BYTES || !res.writableFinished;
        finished();
      });
      pump();
      return;
    }
    if (req.method === 'GET' && url.pathname === '/v1/status') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'status', state: 'green' }));
      return;
    }
    res.writeHead(404).end();
  });
}

beforeAll(async () => {
  server = createServer(handle);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const record = z.looseObject({ id: z.string(), state: z.string() });

function actions() {
  const dest = { origin, authority_ref: 'vault:hostile' };
  return {
    create: defineAction({
      name: 'create_item',
      class: 'create',
      subject: 'the item',
      input: z.object({ name: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: '/v1/items',
        body: { ...i, client_ref: ctx.correlation_id },
      }),
      response: record,
      remoteRef: (d) => d.id,
      destination: {
        ...dest,
        reconciliation: {
          lookup: (ctx) => ({
            method: 'GET',
            path: `/v1/items?client_ref=${encodeURIComponent(ctx.correlation_id)}`,
          }),
          matches: (body) =>
            z
              .object({ items: z.array(record) })
              .parse(body)
              .items.map((r) => ({ ref: r.id, record: r })),
          maxAnswerBytes: CAP,
        },
      },
      // The lookup's own time bound: the whole exchange.
      timeouts: { total_ms: 60_000 },
    }),
    status: defineAction({
      name: 'read_status',
      class: 'read',
      subject: 'the status',
      input: z.object({}),
      request: () => ({ method: 'GET', path: '/v1/status' }),
      response: record,
      remoteRef: (d) => d.id,
      destination: dest,
      timeouts: { total_ms: 5_000 },
    }),
  };
}

describe('a hostile lookup endpoint: 300 MB answer', () => {
  it('is cut off at max_answer_bytes with a coded observation; an unrelated call keeps its 5 s deadline', async () => {
    const ledger = openMemoryLedger();
    const { create, status } = actions();
    const rt = createRuntime({
      ledger,
      credentials: staticCredentials({ 'vault:hostile': { authorization: 'Bearer t' } }),
      actions: [create, status],
      sleep: () => Promise.resolve(),
    });
    try {
      const env = await rt.run(create, { name: 'n' }, { correlationId: 'hostile-lookup' });
      expect(env).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });

      const [settled, unrelated] = await Promise.all([
        rt.reconcile(env.operation_id!),
        rt.run(status, {}, { correlationId: 'unrelated' }),
      ]);
      // The unrelated read answered within its own deadline (a deadline would be unknown).
      expect(unrelated).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'none' });
      // The lookup learned nothing, and says so: still unknown, look again before any retry.
      expect(settled).toMatchObject({
        category: 'outcome_unknown',
        remote_effect: 'unknown',
        retry: 'reconcile_first',
      });
      const obs = (await ledger.query({ operation_id: env.operation_id! })).filter(
        (e) => e.kind === 'observation_recorded',
      );
      expect(obs.map((e) => e.data)).toEqual([
        expect.objectContaining({
          source: 'lookup',
          verdict: 'failed',
          status: 200,
          matches: 0,
          state_after: 'unknown',
          conclusion: expect.stringMatching(
            /^lookup_answer_too_large: the lookup answered 200 with a body over the limit of 1048576 bytes/,
          ) as unknown,
        }),
      ]);
      const conclusion = (obs[0]!.data as { conclusion: string }).conclusion;
      expect(conclusion.split('\n')).toHaveLength(1);
      // Reading stopped: the connection was closed long before the 300 MB were handed over.
      await hostile.done;
      expect(hostile.closedEarly).toBe(true);
      expect(hostile.written).toBeLessThan(HOSTILE_BYTES / 4);
    } finally {
      await rt.close();
    }
  }, 120_000);
});
