// The OpenAPI fake on real sockets: stateful collections from the petstore paths, bodies that
// satisfy the document, idempotency honoured or ignored as configured, and the ground truth.
import { afterEach, describe, expect, it } from 'vitest';
import { loadOpenApi } from '../../src/fakes/openapi-doc.js';
import { startOpenApiFake, type OpenApiFake } from '../../src/fakes/openapi-fake.js';

const PETSTORE = 'examples/openapi/petstore.yaml';
let fake: OpenApiFake | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function start(mode?: 'honoured' | 'ignored'): Promise<OpenApiFake> {
  const loaded = await loadOpenApi(PETSTORE);
  if (!loaded.ok) throw new Error(loaded.failure.message);
  fake = await startOpenApiFake(loaded.value, mode ? { idempotency_mode: mode } : {});
  return fake;
}

async function call(
  f: OpenApiFake,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${f.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return {
    status: res.status,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : null,
    headers: res.headers,
  };
}

describe('candor fake serve --openapi (petstore)', () => {
  it('creates, lists with a query filter, reads, replaces and deletes pets; truth records each commit', async () => {
    const f = await start();
    const created = await call(
      f,
      'POST',
      '/pet',
      { name: 'rex', status: 'available', client_ref: 'op-1' },
      { 'x-candor-call-id': 'c1' },
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: 1,
      name: 'rex',
      status: 'available',
      client_ref: 'op-1',
    });
    await call(f, 'POST', '/pet', { name: 'tom', status: 'sold', client_ref: 'op-2' });
    const found = await call(f, 'GET', '/pet?client_ref=op-1');
    expect(found.body).toEqual([expect.objectContaining({ id: 1, name: 'rex' })]);
    expect((await call(f, 'GET', '/pet/2')).body).toMatchObject({ id: 2, name: 'tom' });
    const put = await call(f, 'PUT', '/pet/1', { name: 'rex2', status: 'sold' });
    expect(put.body).toEqual({ id: 1, name: 'rex2', status: 'sold' });
    expect((await call(f, 'DELETE', '/pet/1')).status).toBe(200);
    expect((await call(f, 'GET', '/pet/1')).status).toBe(404);
    expect(f.store.list('/pet').map((p) => p.id)).toEqual([2]);
    expect((await call(f, 'POST', '/pet', { status: 'sold' })).status).toBe(400);
    expect((await call(f, 'PATCH', '/pet/2', {})).status).toBe(405);
    const truth = f.groundTruth('c1').map((t) => t.event);
    expect(truth).toEqual([
      'received',
      'headers_complete',
      'body_complete',
      'mutation_committed',
      'response_bytes_written',
      'close_kind',
    ]);
  });

  it('replays a repeated Idempotency-Key when honoured and creates twice when ignored', async () => {
    for (const mode of ['honoured', 'ignored'] as const) {
      const f = await start(mode);
      const order = { petId: 1, quantity: 2, client_ref: 'op-9' };
      const a = await call(f, 'POST', '/store/order', order, { 'idempotency-key': 'k1' });
      const b = await call(f, 'POST', '/store/order', order, { 'idempotency-key': 'k1' });
      expect(a.status).toBe(201);
      expect(f.store.list('/store/order')).toHaveLength(mode === 'honoured' ? 1 : 2);
      expect(b.headers.get('idempotent-replayed')).toBe(mode === 'honoured' ? 'true' : null);
      await f.close();
      fake = undefined;
    }
  });

  it('applies the reference fake faults: committed then RST after_commit', async () => {
    const f = await start();
    f.arm({ call_id: 'cut', phase: 'after_commit', action: 'rst' });
    await expect(
      call(f, 'POST', '/user', { username: 'u' }, { 'x-candor-call-id': 'cut' }),
    ).rejects.toThrow();
    expect(f.store.list('/user')).toHaveLength(1);
    expect(f.groundTruth('cut').map((t) => t.close_kind ?? t.event)).toContain('rst');
  });
});
