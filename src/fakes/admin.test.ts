// The admin API (driving the fake from another process), fixtures, and the before_bytes URLs.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, Client, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { fixtureFileSchema, loadFixtureDir, parseFixtureText } from './fixtures.js';
import { rawExchange, httpRequest } from './raw-client.js';
import { startFakeService, type FakeService } from './service.js';
import type { TruthEvent } from './truth.js';
import { lookupRefusingInvalid } from './unreachable.js';

let fake: FakeService | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function admin(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown; text: string }> {
  const res = await request(`${fake!.url}${path}`, {
    method: method as 'GET',
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, json, text };
}

describe('admin API', () => {
  it('arms faults over HTTP and reports ground truth as JSONL, without admin requests in it', async () => {
    fake = await startFakeService();
    expect((await admin('GET', '/_candor/health')).json).toEqual({ ok: true });
    const armed = await admin('POST', '/_candor/faults', {
      call_id: 'x-1',
      phase: 'after_request_body',
      action: 'fin',
      times: 2,
    });
    expect(armed).toMatchObject({ status: 201, json: { id: 'fault_0001', remaining: 2 } });
    const bad = await admin('POST', '/_candor/faults', {
      call_id: 'x-1',
      phase: 'during_response_body',
      action: 'fin',
    });
    expect(bad).toMatchObject({ status: 400, json: { error: 'invalid_fault' } });
    expect((bad.json as { message: string }).message).toMatch(/at_byte/);
    const r = await rawExchange(
      fake.url,
      httpRequest('POST', '/v1/builds', { 'x-candor-call-id': 'x-1' }, { ref: 'main' }),
      { timeoutMs: 2000 },
    );
    expect(r.end).toBe('fin');
    expect((await admin('GET', '/_candor/faults')).json).toMatchObject({
      faults: [{ id: 'fault_0001', remaining: 1, fired: 1 }],
    });
    const truth = await admin('GET', '/_candor/truth?call_id=x-1');
    const lines = truth.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as TruthEvent);
    expect(lines.map((e) => e.event)).toEqual([
      'received',
      'headers_complete',
      'body_complete',
      'close_kind',
    ]);
    const all = (await admin('GET', '/_candor/truth')).text;
    expect(all).not.toContain('_candor');
    await admin('DELETE', '/_candor/faults');
    expect((await admin('GET', '/_candor/faults')).json).toEqual({ faults: [] });
  });

  it('shows resources (deleted ones too), manages tokens and idempotency modes, and resets', async () => {
    fake = await startFakeService({ tokens: [{ name: 'setup', token: 'tok-SECRET-a' }] });
    expect(
      await admin('POST', '/_candor/tokens', {
        name: 'later',
        token: 'tok-SECRET-b',
        scopes: ['records:*'],
      }),
    ).toMatchObject({ status: 201 });
    const auth = { authorization: 'Bearer tok-SECRET-b' };
    const undici = new Client(fake.url);
    try {
      const post = async (path: string, body: unknown) => {
        const res = await undici.request({
          method: 'POST',
          path,
          headers: auth,
          body: JSON.stringify(body),
        });
        await res.body.dump();
        return res.statusCode;
      };
      expect(await post('/v1/records', { subject: 'a' })).toBe(201);
      expect(
        (await admin('PUT', '/_candor/idempotency/records/notes', { mode: 'required' })).status,
      ).toBe(200);
      expect(await post('/v1/records/rec_0001/notes', { text: 'n' })).toBe(400);
      expect(
        (await admin('PUT', '/_candor/idempotency/records/nope', { mode: 'required' })).status,
      ).toBe(404);
      expect((await admin('POST', '/_candor/tokens/later/expire')).status).toBe(200);
      expect(await post('/v1/records', { subject: 'b' })).toBe(401);
      const tokens = await admin('GET', '/_candor/tokens');
      expect(tokens.text).not.toContain('SECRET');
      expect(tokens.json).toMatchObject({
        tokens: [{ name: 'setup' }, { name: 'later', expired: true }],
      });
      expect((await admin('GET', '/_candor/resources/records')).json).toMatchObject({
        items: [{ id: 'rec_0001', subject: 'a' }],
      });
      expect((await admin('GET', '/_candor/resources/unicorns')).status).toBe(404);
      expect((await admin('POST', '/_candor/reset')).status).toBe(200);
      expect((await admin('GET', '/_candor/resources/records')).json).toEqual({ items: [] });
      expect((await admin('GET', '/_candor/tokens')).json).toMatchObject({
        tokens: [{ name: 'setup', uses: 0 }],
      });
      expect(fake.groundTruth()).toEqual([]);
    } finally {
      await undici.destroy();
    }
  });
});

describe('fixtures', () => {
  const yaml = `cases:
  - id: expired-token
    request: { method: POST, path: /v1/releases }
    fixture_response:
      status: 401
      headers: { www-authenticate: 'Bearer error="invalid_token"' }
      body: { error: token_expired }
    expect: { category: authentication_failed, retry: never, secret_in_result: false }
  - id: only-expectations
    request: { method: GET, path: /v1/releases/:id }
    expect: { category: succeeded }
`;

  it('loads a directory and answers the case id with the fixture response, also after reset', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-fixtures-'));
    writeFileSync(join(dir, 'auth.yaml'), yaml);
    writeFileSync(join(dir, 'ignored.txt'), 'not a fixture');
    const loaded = await loadFixtureDir(dir);
    expect(loaded.ok).toBe(true);
    fake = await startFakeService({ fixtures: loaded.value! });
    const send = async (callId: string) => {
      const res = await request(`${fake!.url}/v1/releases`, {
        method: 'POST',
        headers: { 'x-candor-call-id': callId },
        body: '{"version":"1"}',
      });
      return { status: res.statusCode, headers: res.headers, body: await res.body.json() };
    };
    expect(await send('expired-token')).toMatchObject({
      status: 401,
      headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
      body: { error: 'token_expired' },
    });
    expect(fake.resources.all('releases')).toEqual([]);
    expect((await send('someone-else')).status).toBe(201);
    fake.reset();
    expect((await send('expired-token')).status).toBe(401);
  });

  it('reports the file and field of a bad fixture; rejects duplicate ids', async () => {
    expect(parseFixtureText('cases:\n  - id: a\n    request: { method: GET }\n', 'x.yaml')).toEqual(
      {
        ok: false,
        failure: {
          file: 'x.yaml',
          message: expect.stringMatching(/^cases\.0\.request\.path: /) as unknown,
        },
      },
    );
    expect(parseFixtureText('cases: [', 'y.yaml')).toMatchObject({
      ok: false,
      failure: { message: expect.stringMatching(/^not valid YAML/) as unknown },
    });
    const dir = mkdtempSync(join(tmpdir(), 'candor-fixtures-'));
    writeFileSync(join(dir, 'a.yaml'), yaml);
    writeFileSync(join(dir, 'b.yml'), yaml);
    expect(await loadFixtureDir(dir)).toMatchObject({
      ok: false,
      failure: { file: 'b.yml', message: 'duplicate case id expired-token' },
    });
    expect(await loadFixtureDir(join(dir, 'missing'))).toMatchObject({
      ok: false,
      failure: { message: 'ENOENT' },
    });
  });

  it('has a JSON Schema', () => {
    const schema = z.toJSONSchema(fixtureFileSchema) as { properties: Record<string, unknown> };
    expect(Object.keys(schema.properties)).toEqual(['cases']);
  });
});

describe('before_bytes URLs', () => {
  it('refused: nothing listens there', async () => {
    fake = await startFakeService();
    const url = await fake.unreachableUrl('refused');
    expect(new URL(url).hostname).toBe('127.0.0.1');
    await expect(request(url)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('unresolvable: a .invalid host that fails name resolution (without a DNS query)', async () => {
    fake = await startFakeService();
    const url = (
      await admin('POST', '/_candor/faults', { phase: 'before_bytes', variant: 'unresolvable' })
    ).json as { url: string };
    expect(new URL(url.url).hostname).toMatch(/\.invalid$/);
    const agent = new Agent({ connect: { lookup: lookupRefusingInvalid } });
    try {
      await expect(request(url.url, { dispatcher: agent })).rejects.toMatchObject({
        code: 'ENOTFOUND',
      });
    } finally {
      await agent.close();
    }
  });

  it('blackhole: the connect never completes, so the client connect timeout fires', async () => {
    fake = await startFakeService();
    const url = (await admin('GET', '/_candor/unreachable/blackhole')).json as { url: string };
    const agent = new Agent({ connect: { timeout: 200 } });
    try {
      const started = Date.now();
      await expect(request(url.url, { dispatcher: agent })).rejects.toMatchObject({
        code: 'UND_ERR_CONNECT_TIMEOUT',
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    } finally {
      await agent.close();
    }
    expect((await admin('GET', '/_candor/unreachable/teleport')).status).toBe(404);
  });
});
