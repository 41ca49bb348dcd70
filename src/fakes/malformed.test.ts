// The `malformed` variants are malformed on the wire or in content, as a real client sees them.
import { Client } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { httpRequest, rawExchange } from './raw-client.js';
import { startFakeService, type FakeService } from './service.js';

let fake: FakeService;
let undici: Client;

beforeEach(async () => {
  fake = await startFakeService();
  undici = new Client(fake.url);
});
afterEach(async () => {
  await undici.destroy();
  await fake.close();
});

const createDeployment = (callId: string) =>
  undici.request({
    method: 'POST',
    path: '/v1/deployments',
    headers: { 'x-candor-call-id': callId, 'content-type': 'application/json' },
    body: JSON.stringify({ service: 'web', client_ref: callId }),
  });

describe('framing faults', () => {
  it('bad_status_line: undici fails to parse the response; the write was committed', async () => {
    fake.arm({ call_id: 'm-1', phase: 'malformed', variant: 'bad_status_line' });
    const err: unknown = await createDeployment('m-1').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'HTTPParserError' });
    const raw = await rawExchange(
      fake.url,
      httpRequest('GET', '/v1/deployments', { 'x-candor-call-id': 'm-1b', connection: 'close' }),
      { timeoutMs: 1000 },
    );
    expect(raw.status).toBe(200);
    fake.arm({ call_id: 'm-1c', phase: 'malformed', variant: 'bad_status_line' });
    const bad = await rawExchange(
      fake.url,
      httpRequest('GET', '/v1/deployments', { 'x-candor-call-id': 'm-1c' }),
      { timeoutMs: 1000 },
    );
    expect(bad.bytes.toString('latin1')).toMatch(/^HTTP\/1\.1 2x0 /);
    expect(fake.resources.list('deployments', { client_ref: 'm-1' })).toHaveLength(1);
  });

  it('wrong_content_length: more is announced than sent, then FIN; undici errors reading the body', async () => {
    fake.arm({ call_id: 'm-2', phase: 'malformed', variant: 'wrong_content_length' });
    const res = await createDeployment('m-2');
    expect(res.statusCode).toBe(201);
    const err: unknown = await res.body.text().catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: expect.stringMatching(/^UND_ERR_(SOCKET|RES_CONTENT_LENGTH_MISMATCH)$/),
    });
    expect(fake.groundTruth('m-2').at(-1)).toMatchObject({ close_kind: 'fin' });
  });

  it('unframed_truncation: no length, connection close mid-JSON', async () => {
    fake.arm({ call_id: 'm-3', phase: 'malformed', variant: 'unframed_truncation' });
    const raw = await rawExchange(
      fake.url,
      httpRequest('POST', '/v1/deployments', { 'x-candor-call-id': 'm-3' }, { service: 'a' }),
      { timeoutMs: 2000 },
    );
    const text = raw.bytes.toString('latin1');
    const head = text.slice(0, text.indexOf('\r\n\r\n'));
    expect(head).not.toMatch(/content-length|transfer-encoding/i);
    expect(head).toMatch(/connection: close/);
    expect(raw.end).toBe('fin');
    const body = text.slice(text.indexOf('\r\n\r\n') + 4);
    expect(body.length).toBeGreaterThan(0);
    expect(() => JSON.parse(body) as unknown).toThrow(SyntaxError);
    fake.arm({ call_id: 'm-3b', phase: 'malformed', variant: 'unframed_truncation' });
    const res = await createDeployment('m-3b');
    await expect(res.body.json()).rejects.toBeInstanceOf(SyntaxError);
  });
});

describe('content faults (correctly framed)', () => {
  it('invalid_json: a well-framed body that does not parse; the socket stays usable', async () => {
    fake.arm({ call_id: 'm-4', phase: 'malformed', variant: 'invalid_json' });
    const res = await createDeployment('m-4');
    expect(res.headers['content-type']).toBe('application/json');
    await expect(res.body.json()).rejects.toBeInstanceOf(SyntaxError);
    expect(fake.groundTruth('m-4').at(-1)).toMatchObject({ close_kind: 'keepalive' });
    const ok = await undici.request({ method: 'GET', path: '/v1/deployments' });
    expect(await ok.body.json()).toMatchObject({ items: [{ id: 'dep_0001' }] });
  });

  it.each([200, 502])('html_error with %i', async (status) => {
    fake.arm({ call_id: 'm-5', phase: 'malformed', variant: 'html_error', status });
    const res = await createDeployment('m-5');
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(await res.body.text()).toMatch(/^<!DOCTYPE html>/);
  });

  it.each([
    ['id_null', null],
    ['id_number', 1],
    ['id_object', { value: 'dep_0001' }],
  ] as const)('%s', async (variant, id) => {
    fake.arm({ call_id: 'm-6', phase: 'malformed', variant });
    const res = await createDeployment('m-6');
    expect(res.statusCode).toBe(201);
    const body = (await res.body.json()) as Record<string, unknown>;
    expect(body['id']).toEqual(id);
    expect(body['service']).toBe('web');
  });

  it('missing_field drops the named field (default id)', async () => {
    fake.arm({ call_id: 'm-7', phase: 'malformed', variant: 'missing_field' });
    fake.arm({ call_id: 'm-8', phase: 'malformed', variant: 'missing_field', field: 'state' });
    const a = (await (await createDeployment('m-7')).body.json()) as Record<string, unknown>;
    const b = (await (await createDeployment('m-8')).body.json()) as Record<string, unknown>;
    expect('id' in a).toBe(false);
    expect(b).toMatchObject({ id: 'dep_0002' });
    expect('state' in b).toBe(false);
  });

  it('error_body_2xx: an error object with status 200', async () => {
    fake.arm({ call_id: 'm-9', phase: 'malformed', variant: 'error_body_2xx' });
    const res = await createDeployment('m-9');
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toEqual({
      error: { code: 'internal_error', message: 'the operation failed' },
    });
    expect(fake.resources.all('deployments')).toHaveLength(1);
  });

  it('duplicated_items and reordered_items on a list', async () => {
    for (const ref of ['a', 'b', 'c']) await (await createDeployment(ref)).body.dump();
    fake.arm({ call_id: 'l-1', phase: 'malformed', variant: 'duplicated_items' });
    fake.arm({ call_id: 'l-2', phase: 'malformed', variant: 'reordered_items' });
    const list = async (id: string) =>
      (
        (await (
          await undici.request({
            method: 'GET',
            path: '/v1/deployments',
            headers: { 'x-candor-call-id': id },
          })
        ).body.json()) as {
          items: Array<{ id: string }>;
        }
      ).items.map((i) => i.id);
    expect(await list('l-1')).toEqual(['dep_0001', 'dep_0002', 'dep_0003', 'dep_0001']);
    expect(await list('l-2')).toEqual(['dep_0003', 'dep_0002', 'dep_0001']);
    expect(await list('l-3')).toEqual(['dep_0001', 'dep_0002', 'dep_0003']);
  });
});

describe('fixed status faults', () => {
  it('503 with Retry-After before commit: nothing is created', async () => {
    fake.arm({ call_id: 'st-1', phase: 'status', status: 503, retry_after: 2 });
    const res = await createDeployment('st-1');
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('2');
    await res.body.dump();
    expect(fake.resources.all('deployments')).toEqual([]);
    expect(fake.groundTruth('st-1').some((e) => e.event === 'mutation_committed')).toBe(false);
  });

  it('502 after commit: the effect exists although the reply is an error', async () => {
    fake.arm({ call_id: 'st-2', phase: 'status', status: 502, commit: true });
    const res = await createDeployment('st-2');
    expect(res.statusCode).toBe(502);
    await res.body.dump();
    expect(fake.resources.list('deployments', { client_ref: 'st-2' })).toHaveLength(1);
    expect(fake.groundTruth('st-2').find((e) => e.event === 'mutation_committed')).toMatchObject({
      resource_id: 'dep_0001',
    });
  });

  it.each([
    [401, 'www-authenticate', /^Bearer .*invalid_token/],
    [429, 'retry-after', /^5$/],
    [403, 'content-type', /application\/json/],
    [409, 'content-type', /application\/json/],
  ] as const)('%i carries %s', async (status, header, pattern) => {
    fake.arm({
      call_id: 'st-3',
      phase: 'status',
      status,
      ...(status === 429 ? { retry_after: 5 } : {}),
    });
    const res = await createDeployment('st-3');
    expect(res.statusCode).toBe(status);
    expect(String(res.headers[header])).toMatch(pattern);
    await res.body.dump();
  });
});

describe('commit: false', () => {
  // Ground truth must be exact: a malformed reply armed with `commit: false` is sent for a request
  // the service never processed (review of issue 29: it committed anyway).
  it.each(['bad_status_line', 'invalid_json', 'missing_field', 'wrong_content_length'] as const)(
    '%s: the write is not committed, the ground truth says so, and the reply is still malformed',
    async (variant) => {
      const id = `nc-${variant}`;
      fake.arm({ call_id: id, phase: 'malformed', variant, commit: false });
      const raw = await rawExchange(
        fake.url,
        httpRequest(
          'POST',
          '/v1/deployments',
          { 'x-candor-call-id': id, 'content-type': 'application/json', connection: 'close' },
          JSON.stringify({ service: 'web', client_ref: id }),
        ),
        { timeoutMs: 1000 },
      );
      expect(fake.resources.list('deployments', { client_ref: id })).toHaveLength(0);
      const truth = fake.groundTruth(id);
      expect(truth.map((e) => e.event)).not.toContain('mutation_committed');
      expect(truth.map((e) => e.event)).toContain('response_bytes_written');
      const text = raw.bytes.toString('latin1');
      if (variant === 'bad_status_line') expect(text).toMatch(/^HTTP\/1\.1 2x0 /);
      else expect(text).toMatch(/^HTTP\/1\.1 502 /);
      if (variant === 'invalid_json') expect(text).toMatch(/,\}$/);
    },
  );

  it('commit omitted (the default) still commits before the malformed reply', async () => {
    fake.arm({ call_id: 'c-default', phase: 'malformed', variant: 'invalid_json' });
    const res = await createDeployment('c-default');
    await res.body.text();
    expect(fake.resources.list('deployments', { client_ref: 'c-default' })).toHaveLength(1);
  });
});
