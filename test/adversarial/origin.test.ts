// Issue 12, item 6: a request never leaves its destination's origin, whatever the arguments or the
// path an action builds, and the configuration cannot set the headers that route or frame it.
import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { formatIssue } from '../../src/config/locate.js';
import { parseConfig } from '../../src/config/load.js';
import { httpDefinition } from '../../src/config/actions.js';
import { defineAction } from '../../src/engine/action.js';
import { staticCredentials } from '../../src/engine/ports.js';
import { createRuntime } from '../../src/runtime.js';
import { DEFAULT_TIMEOUTS, sendHttp } from '../../src/http/transport.js';
import { openMemoryLedger } from '../../src/ledger/memory/store.js';

interface Recorder {
  origin: string;
  port: number;
  paths: string[];
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

async function recorder(): Promise<Recorder> {
  const paths: string[] = [];
  const server = createServer((req, res) => {
    paths.push(req.url ?? '');
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"id":"x"}');
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { origin: `http://127.0.0.1:${port}`, port, paths };
}

const config = (origin: string, path: string, headers = ''): string => `ledger: 'memory:'
destinations:
  api:
    origin: ${origin}
actions:
  - name: read_item
    class: read
    subject: the item
    description: Read an item.
    destination: api
    request:
      method: GET
      path: '${path}'${headers}
    input:
      type: object
      properties: { a: { type: string }, b: { type: string }, q: { type: string } }
      additionalProperties: false
`;

const ctx = { operation_id: 'op_1', correlation_id: 'cor_1', idempotency_key: null };

describe('a rendered path stays on its origin', () => {
  it('refuses an empty value that would make /{{input.a}}/{{input.b}} scheme-relative', () => {
    const r = parseConfig(config('http://127.0.0.1:1', '/{{input.a}}/{{input.b}}'), 'candor.yaml');
    if (!r.ok) throw new Error(r.failure.message);
    const definition = httpDefinition(r.value.actions[0]!);
    const request = (input: unknown) => definition.request(input, ctx);
    expect(() => request({ a: '', b: 'evil.example:8080' })).toThrow(
      /needs a non-empty \{\{input\.a\}\}/,
    );
    expect(() => request({ a: 'x', b: '' })).toThrow(/non-empty \{\{input\.b\}\}/);
    expect(request({ a: 'x', b: 'y' }).path).toBe('/x/y');
  });

  it('keeps an empty value in the query, where it cannot change the host or the route', () => {
    const r = parseConfig(config('http://127.0.0.1:1', '/items?q={{input.q}}'), 'candor.yaml');
    if (!r.ok) throw new Error(r.failure.message);
    expect(httpDefinition(r.value.actions[0]!).request({ q: '' }, ctx).path).toBe('/items?q=');
  });

  it('refuses a configured path that starts with // with FILE:LINE:COL', () => {
    const r = parseConfig(config('http://127.0.0.1:1', '//evil.example/x'), 'candor.yaml');
    expect(r.ok).toBe(false);
    expect(r.failure!.issues.map(formatIssue)).toEqual([
      expect.stringMatching(/^candor\.yaml:13:13: actions\[0\]\.request\.path: .*"\/\/"/),
    ]);
  });

  it('the transport sends a scheme-relative or absolute path to no other host', async () => {
    const home = await recorder();
    const other = await recorder();
    for (const path of [
      `//127.0.0.1:${other.port}/steal`,
      `${other.origin}/steal`,
      `@127.0.0.1:${other.port}/steal`,
      `/\\127.0.0.1:${other.port}/steal`,
    ]) {
      const outcome = await sendHttp({
        origin: home.origin,
        method: 'GET',
        path,
        headers: {},
        attemptId: 'att_1',
        timeouts: DEFAULT_TIMEOUTS,
        reuseConnection: true,
      });
      expect(outcome).toMatchObject({ phase: 'not_sent', error_code: 'CANDOR_PATH_LEAVES_ORIGIN' });
    }
    expect(other.paths).toEqual([]);
    expect(home.paths).toEqual([]);
  });

  it('an action whose code builds //host/… sends nothing, and the credential goes nowhere', async () => {
    const home = await recorder();
    const other = await recorder();
    const ledger = openMemoryLedger();
    const runtime = createRuntime({
      ledger,
      credentials: staticCredentials({
        'vault:api': { authorization: 'Bearer tok_abcdefgh12345' },
      }),
      sleep: () => Promise.resolve(),
    });
    const action = defineAction({
      name: 'read_item',
      class: 'read',
      subject: 'the item',
      input: z.object({ a: z.string(), b: z.string() }),
      request: (input) => ({ method: 'GET', path: `/${input.a}/${input.b}` }),
      response: z.unknown(),
      destination: { origin: home.origin, authority_ref: 'vault:api' },
      timeouts: { total_ms: 5_000, connect_ms: 1_000 },
    });
    const env = await runtime.run(action, { a: '', b: `127.0.0.1:${other.port}` });
    expect(env).toMatchObject({ ok: false, remote_effect: 'none' });
    expect(other.paths).toEqual([]);
    expect(home.paths).toEqual([]);
  });
});

describe('transport headers are never configured', () => {
  it.each([
    'Host',
    'Content-Length',
    'Transfer-Encoding',
    'Connection',
    'Upgrade',
    'TE',
    'Trailer',
    'Keep-Alive',
    'Proxy-Connection',
    'proxy-authorization-extra',
  ])('refuses a %s request header with FILE:LINE:COL', (name) => {
    const headers = `\n      headers: { ${name}: 'x' }`;
    const r = parseConfig(config('http://127.0.0.1:1', '/items', headers), 'candor.yaml');
    expect(r.ok).toBe(false);
    expect(r.failure!.issues.map(formatIssue)).toEqual([
      `candor.yaml:14:18: actions[0].request.headers.${name}: ${name} is set by the HTTP transport (it decides where and how the request goes), never configured`,
    ]);
  });
});
