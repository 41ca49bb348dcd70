// Each fault phase and close kind over real loopback sockets, seen by a byte-level client and by
// undici, with the ground truth checked for what the fake really did and in which order.
import { performance } from 'node:perf_hooks';
import { Client, errors } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { httpRequest, rawExchange } from './raw-client.js';
import { startFakeService, type FakeService } from './service.js';
import type { TruthEvent } from './truth.js';

let fake: FakeService;
const clients: Client[] = [];

beforeEach(async () => {
  fake = await startFakeService({ seed: 7 });
});
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.destroy()));
  await fake.close();
});

function client(opts: ConstructorParameters<typeof Client>[1] = {}): Client {
  const c = new Client(fake.url, opts);
  clients.push(c);
  return c;
}

const create = (
  callId: string,
  body: unknown = { service: 'web', client_ref: `ref-${callId}` },
): string => httpRequest('POST', '/v1/deployments', { 'x-candor-call-id': callId }, body);

const kinds = (events: TruthEvent[]): string[] =>
  events.map((e) => (e.event === 'close_kind' ? `close:${e.close_kind}` : e.event));

/** Ground truth is written from socket callbacks; wait until the request has its close kind. */
async function settled(callId: string): Promise<TruthEvent[]> {
  for (let i = 0; i < 200; i++) {
    const events = fake.groundTruth(callId);
    if (events.some((e) => e.event === 'close_kind')) return events;
    await new Promise((r) => setImmediate(r));
  }
  return fake.groundTruth(callId);
}

describe('no fault', () => {
  it('creates, answers 201 on a kept-alive socket, and records every phase in order', async () => {
    const res = await client().request({
      method: 'POST',
      path: '/v1/deployments',
      headers: { 'x-candor-call-id': 'ok-1', 'content-type': 'application/json' },
      body: JSON.stringify({ service: 'web', client_ref: 'r1' }),
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers['location']).toBe('/v1/deployments/dep_0001');
    expect(await res.body.json()).toMatchObject({
      id: 'dep_0001',
      service: 'web',
      client_ref: 'r1',
      state: 'pending',
    });
    const truth = await settled('ok-1');
    expect(kinds(truth)).toEqual([
      'received',
      'headers_complete',
      'body_complete',
      'mutation_committed',
      'response_bytes_written',
      'close:keepalive',
    ]);
    expect(truth.map((e) => e.seq)).toEqual([...truth.map((e) => e.seq)].sort((a, b) => a - b));
    expect(truth[3]).toMatchObject({
      resource_kind: 'deployments',
      resource_id: 'dep_0001',
      mutation: 'create',
    });
    expect(truth[4]?.bytes).toBeGreaterThan(100);
  });
});

describe('after_request_headers', () => {
  it.each(['fin', 'rst'] as const)(
    '%s: closes before reading the body; nothing committed',
    async (action) => {
      fake.arm({ call_id: 'h-1', phase: 'after_request_headers', action });
      const r = await rawExchange(fake.url, create('h-1'), { timeoutMs: 2000 });
      expect(r.end).toBe(action);
      expect(r.bytes.length).toBe(0);
      expect(kinds(await settled('h-1'))).toEqual([
        'received',
        'headers_complete',
        `close:${action}`,
      ]);
      expect(fake.resources.all('deployments')).toEqual([]);
    },
  );
});

describe('after_request_body', () => {
  it.each(['fin', 'rst'] as const)(
    '%s: the body was received, nothing committed',
    async (action) => {
      fake.arm({ call_id: 'b-1', phase: 'after_request_body', action });
      const r = await rawExchange(fake.url, create('b-1'), { timeoutMs: 2000 });
      expect(r.end).toBe(action);
      expect(kinds(await settled('b-1'))).toEqual([
        'received',
        'headers_complete',
        'body_complete',
        `close:${action}`,
      ]);
      expect(fake.resources.all('deployments')).toEqual([]);
    },
  );

  it('stall: the socket stays open and silent until the client gives up', async () => {
    fake.arm({ call_id: 'b-2', phase: 'after_request_body', action: 'stall' });
    const r = await rawExchange(fake.url, create('b-2'), { timeoutMs: 150 });
    expect(r).toMatchObject({ end: 'timeout', status: undefined });
    expect(kinds(fake.groundTruth('b-2'))).toEqual([
      'received',
      'headers_complete',
      'body_complete',
      'close:stall',
    ]);
  });

  it('undici sees "other side closed" on FIN and a reset on RST', async () => {
    fake.arm({ call_id: 'b-3', phase: 'after_request_body', action: 'fin' });
    fake.arm({ call_id: 'b-4', phase: 'after_request_body', action: 'rst' });
    const send = (id: string) =>
      client().request({
        method: 'POST',
        path: '/v1/deployments',
        headers: { 'x-candor-call-id': id },
        body: '{"service":"a"}',
      });
    await expect(send('b-3')).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    await expect(send('b-4')).rejects.toMatchObject({
      code: expect.stringMatching(/ECONNRESET|UND_ERR_SOCKET/),
    });
  });
});

describe('after_commit', () => {
  it.each(['fin', 'rst'] as const)(
    '%s: committed, then the socket dies without a byte',
    async (action) => {
      fake.arm({ call_id: 'c-1', phase: 'after_commit', action });
      const r = await rawExchange(fake.url, create('c-1'), { timeoutMs: 2000 });
      expect(r.end).toBe(action);
      expect(r.bytes.length).toBe(0);
      expect(kinds(await settled('c-1'))).toEqual([
        'received',
        'headers_complete',
        'body_complete',
        'mutation_committed',
        `close:${action}`,
      ]);
      expect(fake.resources.list('deployments', { client_ref: 'ref-c-1' })).toHaveLength(1);
    },
  );

  it('delay: the mutation is committed before the client deadline expires; the reply never arrives', async () => {
    fake.arm({ call_id: 'c-2', phase: 'after_commit', action: 'delay', delay_ms: 5000 });
    const started = performance.now();
    const err: unknown = await client({ headersTimeout: 150 })
      .request({
        method: 'POST',
        path: '/v1/deployments',
        headers: { 'x-candor-call-id': 'c-2' },
        body: '{"service":"a"}',
      })
      .catch((e: unknown) => e);
    const deadline = performance.now();
    expect(err).toBeInstanceOf(errors.HeadersTimeoutError);
    expect(deadline - started).toBeLessThan(2000);
    const truth = await settled('c-2');
    const committed = truth.find((e) => e.event === 'mutation_committed');
    expect(committed?.at).toBeLessThan(deadline);
    expect(kinds(truth)).toEqual([
      'received',
      'headers_complete',
      'body_complete',
      'mutation_committed',
      'close:client_closed',
    ]);
    expect(fake.resources.all('deployments')).toHaveLength(1);
  });

  it('delay shorter than the deadline: the committed reply arrives', async () => {
    fake.arm({ call_id: 'c-3', phase: 'after_commit', action: 'delay', delay_ms: 30 });
    const res = await client({ headersTimeout: 2000 }).request({
      method: 'POST',
      path: '/v1/deployments',
      headers: { 'x-candor-call-id': 'c-3' },
      body: '{"service":"a"}',
    });
    expect(res.statusCode).toBe(201);
    await res.body.dump();
    const truth = await settled('c-3');
    const committed = truth.find((e) => e.event === 'mutation_committed')!;
    const written = truth.find((e) => e.event === 'response_bytes_written')!;
    expect(written.at - committed.at).toBeGreaterThanOrEqual(25);
  });
});

describe('status with delay_ms', () => {
  it('the fixed reply is held back, nothing committed; the request already reached the fake', async () => {
    fake.arm({ call_id: 's-1', phase: 'status', status: 429, retry_after: 0, delay_ms: 300 });
    const answered = client({ headersTimeout: 5000 }).request({
      method: 'POST',
      path: '/v1/deployments',
      headers: { 'x-candor-call-id': 's-1' },
      body: '{"service":"a"}',
    });
    await fake.whenTruth((e) => e.call_id === 's-1' && e.event === 'body_complete');
    // A timer shorter than the delay fires first: the reply has not been written by then.
    await new Promise((r) => setTimeout(r, 20));
    expect(kinds(fake.groundTruth('s-1'))).toEqual([
      'received',
      'headers_complete',
      'body_complete',
    ]);
    const res = await answered;
    expect(res.statusCode).toBe(429);
    await res.body.dump();
    const truth = await settled('s-1');
    expect(kinds(truth)).toEqual([
      'received',
      'headers_complete',
      'body_complete',
      'response_bytes_written',
      'close:keepalive',
    ]);
    expect(fake.resources.all('deployments')).toHaveLength(0);
  });

  it('with commit, the key stays in progress until the delayed reply is handed over', async () => {
    fake.arm({ call_id: 's-2', phase: 'status', status: 422, commit: true, delay_ms: 300 });
    const post = (callId: string) =>
      client({ headersTimeout: 5000 }).request({
        method: 'POST',
        path: '/v1/releases',
        headers: { 'x-candor-call-id': callId, 'idempotency-key': 'k-s-2' },
        body: '{"version":"1.0"}',
      });
    const first = post('s-2');
    await fake.whenTruth((e) => e.call_id === 's-2' && e.event === 'mutation_committed');
    const during = await post('s-2b');
    expect(during.statusCode).toBe(409);
    await during.body.dump();
    const late = await first;
    expect(late.statusCode).toBe(422);
    await late.body.dump();
    const after = await post('s-2c');
    expect(after.statusCode).toBe(201);
    expect(after.headers['idempotent-replayed']).toBe('true');
    await after.body.dump();
    expect(fake.resources.all('releases')).toHaveLength(1);
  });
});

describe('during_response_body', () => {
  it.each(['fin', 'rst'] as const)(
    '%s at byte 10: the head and exactly 10 body bytes arrive',
    async (action) => {
      fake.arm({ call_id: 'd-1', phase: 'during_response_body', action, at_byte: 10 });
      const r = await rawExchange(fake.url, create('d-1'), { timeoutMs: 2000 });
      expect(r.end).toBe(action);
      expect(r.status).toBe(201);
      const text = r.bytes.toString('latin1');
      const body = text.slice(text.indexOf('\r\n\r\n') + 4);
      expect(body).toBe('{"id":"dep');
      const truth = await settled('d-1');
      expect(kinds(truth)).toEqual([
        'received',
        'headers_complete',
        'body_complete',
        'mutation_committed',
        'response_bytes_written',
        `close:${action}`,
      ]);
      expect(truth[4]?.bytes).toBe(r.bytes.length);
    },
  );

  it('stall at byte 5: undici gets headers, then its body timeout fires', async () => {
    fake.arm({ call_id: 'd-2', phase: 'during_response_body', action: 'stall', at_byte: 5 });
    const res = await client({ bodyTimeout: 150 }).request({
      method: 'POST',
      path: '/v1/deployments',
      headers: { 'x-candor-call-id': 'd-2' },
      body: '{"service":"a"}',
    });
    expect(res.statusCode).toBe(201);
    await expect(res.body.text()).rejects.toBeInstanceOf(errors.BodyTimeoutError);
    expect(fake.groundTruth('d-2').at(-1)).toMatchObject({
      event: 'close_kind',
      close_kind: 'stall',
    });
  });
});

describe('arming', () => {
  it('fires `times` times, then the request is served normally', async () => {
    fake.arm({ call_id: 'n-1', phase: 'after_request_body', action: 'rst', times: 2 });
    const ends = [];
    for (let i = 0; i < 3; i++)
      ends.push(
        (await rawExchange(fake.url, create('n-1'), { timeoutMs: 2000, stopAfterBytes: 1 })).end,
      );
    expect(ends).toEqual(['rst', 'rst', 'timeout']);
    expect(fake.armed()[0]).toMatchObject({ remaining: 0, fired: 2 });
    expect(new Set(fake.groundTruth('n-1').map((e) => e.request))).toEqual(new Set([1, 2, 3]));
  });

  it('matches the correlation id header, and a route for requests without an id', async () => {
    fake.arm({ call_id: 'corr-9', phase: 'after_request_headers', action: 'rst' });
    fake.arm({
      match: { method: 'POST', path: '/v1/builds' },
      phase: 'after_request_headers',
      action: 'fin',
    });
    const a = await rawExchange(
      fake.url,
      httpRequest('POST', '/v1/deployments', { 'x-correlation-id': 'corr-9' }, { service: 'x' }),
      { timeoutMs: 2000 },
    );
    const b = await rawExchange(fake.url, httpRequest('POST', '/v1/builds', {}, { ref: 'main' }), {
      timeoutMs: 2000,
    });
    expect([a.end, b.end]).toEqual(['rst', 'fin']);
    expect(fake.groundTruth('corr-9')[0]).toMatchObject({
      event: 'received',
      method: 'POST',
      path: '/v1/deployments',
    });
    expect(fake.groundTruth('anon-0001')[0]).toMatchObject({
      event: 'received',
      path: '/v1/builds',
    });
  });

  it('rejects a fault that names neither a request id nor a route', () => {
    expect(() => fake.arm({ phase: 'after_request_headers', action: 'fin' })).toThrow(/call_id/);
  });
});

describe('keep-alive stale-socket race', () => {
  it('reset_on_reuse: the reused socket is reset and the second request was never received', async () => {
    fake.arm({ call_id: 's-1', phase: 'stale_socket' });
    const c = client({ pipelining: 1, connections: 1 } as ConstructorParameters<typeof Client>[1]);
    const first = await c.request({
      method: 'POST',
      path: '/v1/deployments',
      headers: { 'x-candor-call-id': 's-1' },
      body: '{"service":"a"}',
    });
    expect(first.statusCode).toBe(201);
    expect(first.headers['connection']).toBe('keep-alive');
    await first.body.dump();
    const err: unknown = await c
      .request({
        method: 'POST',
        path: '/v1/deployments',
        headers: { 'x-candor-call-id': 's-2' },
        body: '{"service":"b"}',
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: expect.stringMatching(/ECONNRESET|UND_ERR_SOCKET/) });
    expect(fake.groundTruth('s-2')).toEqual([]);
    const s1 = await settled('s-1');
    expect(s1.at(-1)).toMatchObject({ event: 'close_kind', close_kind: 'rst' });
    expect(s1.at(-1)?.unread_bytes).toBeGreaterThan(0);
    expect(fake.resources.all('deployments').map((d) => d['service'])).toEqual(['a']);
  });

  it('fin_after_response: the reply promises keep-alive, then the server closes', async () => {
    fake.arm({ call_id: 's-3', phase: 'stale_socket', mode: 'fin_after_response' });
    const r = await rawExchange(fake.url, create('s-3'), { timeoutMs: 2000 });
    expect(r.end).toBe('fin');
    expect(r.bytes.toString('latin1')).toMatch(/\r\nconnection: keep-alive\r\n/);
    expect((await settled('s-3')).at(-1)).toMatchObject({ close_kind: 'fin' });
  });
});
