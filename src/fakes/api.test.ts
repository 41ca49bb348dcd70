// Stateful resources, lookup, idempotency keys and tokens, over real sockets with undici.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService, type FakeServiceOptions } from './service.js';

let fake: FakeService | undefined;
let undici: Client | undefined;

async function start(
  opts: FakeServiceOptions = {},
): Promise<{ fake: FakeService; call: typeof call }> {
  fake = await startFakeService(opts);
  undici = new Client(fake.url);
  return { fake, call };
}
afterEach(async () => {
  await undici?.destroy();
  await fake?.close();
  fake = undefined;
  undici = undefined;
});

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  text: string;
}

async function call(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const res = await undici!.request({
    method,
    path,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.body.text();
  let parsed: unknown = undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.statusCode, headers: res.headers, body: parsed, text };
}

describe('resources', () => {
  it('create, read, set-state, conflict, replace, delete', async () => {
    const { call } = await start();
    const created = await call('POST', '/v1/releases', { version: '1.2.0', notes_url: 'x' });
    expect(created).toMatchObject({
      status: 201,
      body: { id: 'rel_0001', state: 'draft', version: 1 },
    });
    expect((await call('GET', '/v1/releases/rel_0001')).body).toMatchObject({
      id: 'rel_0001',
      version: 1,
    });
    const patched = await call('PATCH', '/v1/releases/rel_0001', {
      state: 'published',
      expected_state: 'draft',
    });
    expect(patched).toMatchObject({
      status: 200,
      body: { state: 'published', version: 2, notes_url: 'x' },
    });
    expect(
      await call('PATCH', '/v1/releases/rel_0001', { state: 'draft', expected_state: 'draft' }),
    ).toMatchObject({
      status: 409,
      body: { error: 'state_conflict', state: 'published' },
    });
    const put = await call('PUT', '/v1/releases/rel_0001', { state: 'archived' });
    expect(put.body).toMatchObject({ state: 'archived', version: 3 });
    expect((put.body as Record<string, unknown>)['notes_url']).toBeUndefined();
    expect((await call('DELETE', '/v1/releases/rel_0001')).body).toMatchObject({
      state: 'deleted',
    });
    expect((await call('GET', '/v1/releases/rel_0001')).status).toBe(404);
    expect((await call('DELETE', '/v1/releases/rel_0001')).status).toBe(404);
    expect((await call('GET', '/v1/releases')).body).toEqual({ items: [] });
    expect(fake!.resources.all('releases')).toHaveLength(1);
  });

  it('looks up by client_ref and by the recorded correlation id', async () => {
    const { call } = await start();
    await call(
      'POST',
      '/v1/deployments',
      { service: 'web', client_ref: 'op-1' },
      { 'x-correlation-id': 'case-7' },
    );
    await call('POST', '/v1/deployments', { service: 'api', client_ref: 'op-2' });
    const byRef = await call('GET', '/v1/deployments?client_ref=op-1');
    expect(byRef.body).toMatchObject({
      items: [{ id: 'dep_0001', service: 'web', correlation_id: 'case-7' }],
    });
    expect((await call('GET', '/v1/deployments?correlation_id=case-7')).body).toMatchObject({
      items: [{ id: 'dep_0001' }],
    });
    expect((await call('GET', '/v1/deployments?client_ref=none')).body).toEqual({ items: [] });
  });

  it('appends notes to records and lists them', async () => {
    const { call } = await start();
    await call('POST', '/v1/records', { subject: 's' });
    expect(await call('POST', '/v1/records/rec_0001/notes', { text: 'hello' })).toMatchObject({
      status: 201,
      body: { id: 'note_0001', text: 'hello', parent_id: 'rec_0001' },
    });
    expect((await call('GET', '/v1/records/rec_0001/notes')).body).toMatchObject({
      items: [{ id: 'note_0001' }],
    });
    expect((await call('POST', '/v1/records/rec_0404/notes', { text: 'x' })).status).toBe(404);
    expect(
      fake!.groundTruth().find((e) => e.event === 'mutation_committed' && e.mutation === 'append'),
    ).toMatchObject({
      resource_kind: 'records/notes',
      resource_id: 'note_0001',
    });
  });

  it('refuses bad input: 422 missing field, 400 bad JSON, 404 unknown route, 405 method', async () => {
    const { call } = await start();
    expect(await call('POST', '/v1/issues', { body: 'no title' })).toMatchObject({
      status: 422,
      body: { missing: ['title'] },
    });
    expect((await call('POST', '/v1/issues', '{not json')).status).toBe(400);
    expect((await call('GET', '/v1/unicorns')).status).toBe(404);
    const r = await call('POST', '/v1/issues/iss_0001');
    expect(r.status).toBe(405);
    expect(r.headers['allow']).toBe('GET, PUT, PATCH, DELETE');
    expect(fake!.resources.all('issues')).toEqual([]);
  });

  it('never stores or echoes credential secrets', async () => {
    const { call } = await start();
    const r = await call('POST', '/v1/credentials', { name: 'deploy-key', secret: 'sk-live-XYZ' });
    expect(r.text).not.toContain('sk-live-XYZ');
    expect(r.body).toMatchObject({ name: 'deploy-key', secret_set: true });
    expect(JSON.stringify(fake!.resources.all('credentials'))).not.toContain('sk-live-XYZ');
  });

  it('is deterministic for a seed', async () => {
    const confirmations: string[] = [];
    for (const seed of [5, 5, 6]) {
      const { call } = await start({ seed });
      const r = await call(
        'POST',
        '/v1/payments',
        { amount: 10, currency: 'EUR' },
        { 'idempotency-key': 'k' },
      );
      confirmations.push(String((r.body as Record<string, unknown>)['confirmation']));
      await undici!.destroy();
      await fake!.close();
      fake = undefined;
      undici = undefined;
    }
    expect(confirmations[0]).toBe(confirmations[1]);
    expect(confirmations[0]).not.toBe(confirmations[2]);
  });
});

describe('idempotency keys (draft-ietf-httpapi-idempotency-key-header)', () => {
  const pay = { amount: 25, currency: 'EUR', client_ref: 'op-9' };

  it('required route: missing key 400, replay marked and counted once, other payload 422', async () => {
    const { call } = await start();
    expect(await call('POST', '/v1/payments', pay)).toMatchObject({
      status: 400,
      body: { error: 'idempotency_key_missing' },
    });
    const first = await call('POST', '/v1/payments', pay, {
      'idempotency-key': 'key-1',
      'x-candor-call-id': 'p-1',
    });
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    // Same meaning, different key order: still the same payload.
    const again = await call(
      'POST',
      '/v1/payments',
      { currency: 'EUR', client_ref: 'op-9', amount: 25 },
      { 'idempotency-key': 'key-1', 'x-candor-call-id': 'p-2' },
    );
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(fake!.resources.all('payments')).toHaveLength(1);
    expect(fake!.groundTruth('p-2').some((e) => e.event === 'mutation_committed')).toBe(false);
    expect(
      fake!.groundTruth('p-2').find((e) => e.event === 'response_bytes_written'),
    ).toMatchObject({ replayed: true });
    expect(
      await call('POST', '/v1/payments', { ...pay, amount: 26 }, { 'idempotency-key': 'key-1' }),
    ).toMatchObject({
      status: 422,
      body: { error: 'idempotency_key_reused' },
    });
  });

  it('a key whose first request is still in progress gets 409, then replays once it completes', async () => {
    const { fake, call } = await start();
    fake.arm({ call_id: 'slow', phase: 'after_commit', action: 'delay', delay_ms: 300 });
    const other = new Client(fake.url);
    try {
      const slow = other.request({
        method: 'POST',
        path: '/v1/payments',
        headers: { 'idempotency-key': 'key-2', 'x-candor-call-id': 'slow' },
        body: JSON.stringify(pay),
      });
      while (!fake.groundTruth('slow').some((e) => e.event === 'mutation_committed'))
        await new Promise((r) => setTimeout(r, 5));
      expect(await call('POST', '/v1/payments', pay, { 'idempotency-key': 'key-2' })).toMatchObject(
        {
          status: 409,
          body: { error: 'idempotency_key_in_progress' },
        },
      );
      const done = await slow;
      expect(done.statusCode).toBe(201);
      await done.body.dump();
      const replay = await call('POST', '/v1/payments', pay, { 'idempotency-key': 'key-2' });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(fake.resources.all('payments')).toHaveLength(1);
    } finally {
      await other.destroy();
    }
  });

  it('a failed request releases its key; a committed-then-dropped reply keeps it', async () => {
    const { fake, call } = await start();
    expect(
      (await call('POST', '/v1/payments', { amount: 1 }, { 'idempotency-key': 'key-3' })).status,
    ).toBe(422);
    expect(
      (
        await call(
          'POST',
          '/v1/payments',
          { amount: 1, currency: 'EUR' },
          { 'idempotency-key': 'key-3' },
        )
      ).status,
    ).toBe(201);
    fake.arm({ call_id: 'drop', phase: 'after_commit', action: 'rst' });
    // The connection is reset after the commit: a socket error, not an HTTP answer of any kind.
    await expect(
      call('POST', '/v1/payments', pay, { 'idempotency-key': 'key-4', 'x-candor-call-id': 'drop' }),
    ).rejects.toMatchObject({ code: expect.stringMatching(/^(ECONNRESET|UND_ERR_SOCKET)$/) });
    expect(fake.resources.all('payments')).toHaveLength(2);
    const retry = await call('POST', '/v1/payments', pay, { 'idempotency-key': 'key-4' });
    expect(retry).toMatchObject({ status: 201, headers: { 'idempotent-replayed': 'true' } });
    expect(fake.resources.all('payments')).toHaveLength(2);
  });

  it('an ignoring route creates a new record for every POST, so a retry duplicates', async () => {
    const { fake, call } = await start();
    for (let i = 0; i < 2; i++)
      await call(
        'POST',
        '/v1/issues',
        { title: 't', client_ref: 'op-5' },
        { 'idempotency-key': 'same' },
      );
    expect((await call('GET', '/v1/issues?client_ref=op-5')).body).toMatchObject({
      items: [{ id: 'iss_0001' }, { id: 'iss_0002' }],
    });
    expect(fake.setIdempotency('issues', 'honoured')).toBe(true);
    for (let i = 0; i < 2; i++)
      await call(
        'POST',
        '/v1/issues',
        { title: 't', client_ref: 'op-6' },
        { 'idempotency-key': 'same2' },
      );
    expect(fake.resources.list('issues', { client_ref: 'op-6' })).toHaveLength(1);
    expect(fake.setIdempotency('unicorns', 'honoured')).toBe(false);
  });
});

describe('tokens', () => {
  const tokens = [
    { name: 'ci', token: 'tok-SECRET-ci', scopes: ['deployments:*', 'issues:read'] },
    { name: 'short', token: 'tok-SECRET-short', expire_after_uses: 2 },
  ];
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

  it('401 with WWW-Authenticate, 403 for a missing scope, expiry after N uses and by admin', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-fake-'));
    const logFile = join(dir, 'truth.jsonl');
    const { call } = await start({ tokens, logFile });
    const missing = await call('GET', '/v1/deployments');
    expect(missing.status).toBe(401);
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="candor-fake"');
    const unknown = await call('GET', '/v1/deployments', undefined, bearer('tok-SECRET-nope'));
    expect(unknown.status).toBe(401);
    expect(unknown.headers['www-authenticate']).toMatch(/^Bearer .*error="invalid_token"/);
    expect(
      (await call('POST', '/v1/deployments', { service: 'a' }, bearer('tok-SECRET-ci'))).status,
    ).toBe(201);
    const denied = await call('POST', '/v1/issues', { title: 'x' }, bearer('tok-SECRET-ci'));
    expect(denied).toMatchObject({ status: 403, body: { error: 'insufficient_scope' } });
    expect((await call('GET', '/v1/issues', undefined, bearer('tok-SECRET-ci'))).status).toBe(200);

    expect((await call('GET', '/v1/builds', undefined, bearer('tok-SECRET-short'))).status).toBe(
      200,
    );
    expect((await call('GET', '/v1/builds', undefined, bearer('tok-SECRET-short'))).status).toBe(
      200,
    );
    const expired = await call('GET', '/v1/builds', undefined, bearer('tok-SECRET-short'));
    expect(expired).toMatchObject({ status: 401, body: { error: 'token_expired' } });
    expect(expired.headers['www-authenticate']).toMatch(
      /error="invalid_token", error_description="The access token expired"/,
    );

    expect(fake!.tokens.expire('ci')).toBe(true);
    expect((await call('GET', '/v1/deployments', undefined, bearer('tok-SECRET-ci'))).status).toBe(
      401,
    );
    expect(fake!.tokens.list()).toEqual([
      { name: 'ci', scopes: ['deployments:*', 'issues:read'], uses: 2, expired: true },
      { name: 'short', scopes: ['*'], uses: 2, expired: true },
    ]);
    // The token never appears in the ground truth, in memory or on disk.
    await fake!.close();
    expect(readFileSync(logFile, 'utf8')).not.toContain('SECRET');
    expect(readFileSync(logFile, 'utf8').trim().split('\n').length).toBeGreaterThan(20);
  });
});
