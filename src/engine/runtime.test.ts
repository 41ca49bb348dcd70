// Engine behaviour on real loopback sockets (raw `net` servers, so faults happen at socket level).
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openMemoryLedger } from '../ledger/memory/store.js';
import { projectOperation } from '../ledger/projection.js';
import { lookupRefusingInvalid } from '../fakes/unreachable.js';
import { defineAction } from './action.js';
import { staticCredentials } from './ports.js';
import { createRuntime } from '../runtime.js';

const CANARY = 'canary-secret-7f3a9c';

interface Raw {
  server: Server;
  origin: string;
  requests: string[];
}

/** A raw HTTP server: `handle` gets each request text and the socket, and decides bytes/closing. */
async function rawServer(handle: (req: string, socket: Socket, n: number) => void): Promise<Raw> {
  const requests: string[] = [];
  const server = createServer((socket) => {
    let buf = '';
    socket.on('data', (d) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const len = Number(/content-length:\s*(\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      const req = buf.slice(0, end + 4 + len);
      buf = buf.slice(end + 4 + len);
      requests.push(req);
      handle(req, socket, requests.length);
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  servers.push(server);
  return { server, origin: `http://127.0.0.1:${port}`, requests };
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

function reply(socket: Socket, status: number, body: unknown, extra = ''): void {
  const text = JSON.stringify(body);
  socket.write(
    `HTTP/1.1 ${status} X\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n${extra}\r\n${text}`,
  );
}

const deployment = z.object({ id: z.string(), service: z.string() });

function createDeployment(
  origin: string,
  opts: { lookup?: boolean; honoured?: boolean; deadline?: number } = {},
) {
  return defineAction({
    name: 'create_deployment',
    class: 'create',
    subject: 'the deployment',
    input: z.object({ service: z.string() }),
    request: (input, ctx) => ({
      method: 'POST',
      path: '/v1/deployments',
      body: { ...input, client_ref: ctx.correlation_id },
    }),
    response: deployment,
    remoteRef: (d) => d.id,
    destination: {
      origin,
      authority_ref: 'vault:deploy',
      ...(opts.honoured !== undefined
        ? {
            idempotency: {
              header: 'Idempotency-Key',
              honoured: opts.honoured,
              retention_ms: 86_400_000,
            },
          }
        : {}),
      ...(opts.lookup
        ? {
            reconciliation: {
              lookup: (ctx) => ({
                method: 'GET',
                path: `/v1/deployments?client_ref=${encodeURIComponent(ctx.correlation_id)}`,
              }),
              matches: (body) =>
                (body as { items: Array<{ id: string }> }).items.map((r) => ({
                  ref: r.id,
                  record: r,
                })),
            },
          }
        : {}),
    },
    timeouts: { total_ms: opts.deadline ?? 2_000, connect_ms: 500 },
  });
}

function makeRuntime() {
  const ledger = openMemoryLedger();
  const runtime = createRuntime({
    ledger,
    credentials: staticCredentials({ 'vault:deploy': { authorization: `Bearer ${CANARY}` } }),
    sleep: () => Promise.resolve(),
    lookup: lookupRefusingInvalid,
  });
  return { ledger, runtime };
}

describe('HTTP runtime on real sockets', () => {
  it('refused connection: local_failure, nothing reached the server, retried only as not-sent', async () => {
    const probe = await rawServer(() => undefined);
    const origin = probe.origin;
    await new Promise<void>((r) => probe.server.close(() => r()));
    servers.splice(servers.indexOf(probe.server), 1);
    const { ledger, runtime } = makeRuntime();
    const env = await runtime.run(createDeployment(origin), { service: 'api' });
    expect(env).toMatchObject({
      ok: false,
      category: 'local_failure',
      retry: 'allowed',
      remote_effect: 'none',
    });
    const view = projectOperation(await ledger.query({ operation_id: env.operation_id! }))!;
    expect(view.attempts).toHaveLength(3);
    expect(view.attempts.map((a) => a.finish?.dispatch_state)).toEqual([
      'not_sent',
      'not_sent',
      'not_sent',
    ]);
    expect(view.attempts.slice(1).map((a) => a.retry_decision)).toEqual(['not_sent', 'not_sent']);
    expect(view.state).toBe('failed');
  });

  it('unresolvable host: local_failure with dns evidence', async () => {
    const { runtime } = makeRuntime();
    const env = await runtime.run(createDeployment('http://candor-test.invalid:80'), {
      service: 'api',
    });
    expect(env).toMatchObject({ category: 'local_failure', remote_effect: 'none' });
  });

  it('reset after the request was read and committed: outcome_unknown, reconcile_first, no second POST', async () => {
    const committed: string[] = [];
    const srv = await rawServer((req, socket) => {
      if (req.startsWith('POST')) {
        committed.push('dep_1');
        socket.resetAndDestroy();
      }
    });
    const { ledger, runtime } = makeRuntime();
    const env = await runtime.run(createDeployment(srv.origin, { lookup: true }), {
      service: 'api',
    });
    expect(env).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      remote_effect: 'unknown',
    });
    expect(srv.requests.filter((r) => r.startsWith('POST'))).toHaveLength(1);
    expect(committed).toEqual(['dep_1']);
    const view = projectOperation(await ledger.query({ operation_id: env.operation_id! }))!;
    expect(view.state).toBe('unknown');
    expect(await ledger.unresolved()).toContain(env.operation_id);
  });

  it('reply delayed past the deadline, then a lookup finds the one record: succeeded via an observation', async () => {
    const records: Array<{ id: string; service: string; client_ref: string }> = [];
    const srv = await rawServer((req, socket) => {
      if (req.startsWith('POST')) {
        const body = JSON.parse(req.slice(req.indexOf('\r\n\r\n') + 4)) as {
          service: string;
          client_ref: string;
        };
        const rec = { id: `dep_${records.length + 1}`, ...body };
        records.push(rec);
        setTimeout(() => reply(socket, 201, rec), 400);
      } else {
        const ref = decodeURIComponent(/client_ref=([^ &]+)/.exec(req)![1]!);
        reply(socket, 200, { items: records.filter((r) => r.client_ref === ref) });
      }
    });
    const { ledger, runtime } = makeRuntime();
    const action = createDeployment(srv.origin, { lookup: true, deadline: 150 });
    const env = await runtime.run(action, { service: 'api' });
    expect(env).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    const rec = await runtime.reconcile(env.operation_id!);
    expect(rec).toMatchObject({
      ok: true,
      category: 'succeeded',
      remote_effect: 'applied',
      data: { id: 'dep_1' },
    });
    expect(records).toHaveLength(1);
    const view = projectOperation(await ledger.query({ operation_id: env.operation_id! }))!;
    expect(view.attempts).toHaveLength(1);
    expect(view.observations).toHaveLength(1);
    expect(view.observations[0]).toMatchObject({
      source: 'lookup',
      matches: 1,
      remote_refs: ['dep_1'],
      state_after: 'succeeded',
    });
    expect(view.state).toBe('succeeded');
  });

  it('keeps credentials out of the envelope, messages and clear ledger fields', async () => {
    const srv = await rawServer((req, socket) => reply(socket, 500, { error: 'boom', echo: req }));
    const { ledger, runtime } = makeRuntime();
    const env = await runtime.run(createDeployment(srv.origin, { lookup: true }), {
      service: 'api',
    });
    expect(srv.requests[0]).toContain(CANARY); // it really was sent
    expect(env.category).toBe('outcome_unknown');
    expect(JSON.stringify(env)).not.toContain(CANARY);
    const events = await ledger.read();
    expect(JSON.stringify(events)).not.toContain(CANARY);
    expect(JSON.stringify(events)).toContain('[REDACTED]');
  });

  it('delegation: a worker attempts under its own name, never retries an unknown write; the owner reconciles', async () => {
    const records: Array<{ id: string; client_ref: string }> = [];
    const srv = await rawServer((req, socket) => {
      if (req.startsWith('POST')) {
        const body = JSON.parse(req.slice(req.indexOf('\r\n\r\n') + 4)) as { client_ref: string };
        records.push({ id: `dep_${records.length + 1}`, client_ref: body.client_ref });
        socket.resetAndDestroy();
      } else {
        const ref = decodeURIComponent(/client_ref=([^ &]+)/.exec(req)![1]!);
        reply(socket, 200, { items: records.filter((r) => r.client_ref === ref) });
      }
    });
    const { ledger, runtime: owner } = makeRuntime();
    const worker = createRuntime({
      ledger,
      credentials: staticCredentials({ 'vault:deploy': { authorization: `Bearer ${CANARY}` } }),
      owner: 'worker-host:1',
      lookup: lookupRefusingInvalid,
    });
    const action = createDeployment(srv.origin, { lookup: true, honoured: true });
    const opId = await owner.open(action, { service: 'api' });
    const first = await worker.run(
      action,
      { service: 'api' },
      { operationId: opId, worker: 'worker-1' },
    );
    expect(first).toMatchObject({
      operation_id: opId,
      category: 'outcome_unknown',
      remote_effect: 'unknown',
    });
    let view = projectOperation(await ledger.query({ operation_id: opId }))!;
    // Honoured key or not, the worker made exactly one attempt and named itself on it.
    expect(view.attempts.map((a) => a.worker)).toEqual(['worker-1']);
    expect(view.owner).toBe(owner.owner);
    // The worker may not decide a retry of a write whose outcome it does not know... unless licensed:
    // here the key is honoured, so the licence exists; without it the worker is turned away.
    const noKey = createDeployment(srv.origin, { lookup: true });
    const op2 = await owner.open(noKey, { service: 'web' });
    await worker.run(noKey, { service: 'web' }, { operationId: op2, worker: 'worker-1' });
    const again = await worker.run(
      noKey,
      { service: 'web' },
      { operationId: op2, worker: 'worker-1' },
    );
    expect(again).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    expect(projectOperation(await ledger.query({ operation_id: op2 }))!.attempts).toHaveLength(1);
    expect(records.filter((r) => r.client_ref === view.correlation_id)).toHaveLength(1);
    // The owner settles it from remote evidence.
    const settled = await owner.reconcile(op2);
    expect(settled).toMatchObject({ ok: true, category: 'succeeded' });
    view = projectOperation(await ledger.query({ operation_id: op2 }))!;
    expect(view.state).toBe('succeeded');
    expect(records).toHaveLength(2);
  });
});
