// Issue 12, item 5: redaction happens before truncation, and a secret is hidden in every form it
// can take in a provider's error body (escapes, encodings, a piece left at a cut).
import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAction } from '../../src/engine/action.js';
import { staticCredentials } from '../../src/engine/ports.js';
import { createRuntime } from '../../src/runtime.js';
import { openMemoryLedger } from '../../src/ledger/memory/store.js';
import { createRedactor, REDACTED } from '../../src/core/redact.js';

const TOKEN = 'tok_9f8e7d6c5b4a3210XYZ';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

/** A server answering every request with a 500 whose body is `body`. */
async function errorServer(body: string): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(body);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe('diagnostics excerpt', () => {
  it.each([1, 8, 14, 20])(
    'a token straddling byte 2048 of an error body leaves no piece of it (%i chars before the cut)',
    async (before) => {
      // The provider echoes the credential back in its error body, across the excerpt's cut.
      const body = `${'x'.repeat(2048 - before)}${TOKEN} and more text after the token`;
      const origin = await errorServer(body);
      const ledger = openMemoryLedger();
      const runtime = createRuntime({
        ledger,
        credentials: staticCredentials({ 'vault:api': { authorization: `Bearer ${TOKEN}` } }),
        sleep: () => Promise.resolve(),
      });
      const action = defineAction({
        name: 'read_thing',
        class: 'read',
        subject: 'the thing',
        input: z.object({}),
        request: () => ({ method: 'GET', path: '/v1/thing' }),
        response: z.unknown(),
        destination: { origin, authority_ref: 'vault:api' },
        timeouts: { total_ms: 5_000, connect_ms: 1_000 },
      });
      const env = await runtime.run(action, {});
      expect(env.ok).toBe(false);
      const events = await ledger.query({ operation_id: env.operation_id! });
      const finished = events.filter((e) => e.kind === 'attempt_finished');
      expect(finished.length).toBeGreaterThan(0);
      for (const e of finished) {
        const excerpt = (e.data as unknown as { diagnostics: { body_excerpt: string } }).diagnostics
          .body_excerpt;
        expect(excerpt.startsWith('xxxx')).toBe(true);
        expect(excerpt).toContain(REDACTED);
        // No piece of the token of 4 or more characters survives anywhere in the record.
        const stored = JSON.stringify(e);
        for (let n = 4; n <= TOKEN.length; n++) {
          expect(stored).not.toContain(TOKEN.slice(0, n));
        }
      }
    },
  );
});

describe('encoded and escaped forms of a secret', () => {
  const r = createRedactor([TOKEN]);
  const uEscape = (s: string, upper = false): string =>
    [...s]
      .map((c) => {
        const hex = c.charCodeAt(0).toString(16).padStart(4, '0');
        return `\\u${upper ? hex.toUpperCase() : hex}`;
      })
      .join('');
  const percentAll = (s: string): string =>
    [...Buffer.from(s)].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  const cases: [string, string][] = [
    ['JSON \\u escapes for every character', uEscape(TOKEN)],
    ['JSON \\u escapes, upper-case hex', uEscape(TOKEN, true)],
    [
      'JSON \\u escapes for some characters',
      `${TOKEN.slice(0, 5)}${uEscape(TOKEN.slice(5, 9))}${TOKEN.slice(9)}`,
    ],
    ['JSON \\u escapes escaped again', uEscape(TOKEN).replace(/\\/g, '\\\\')],
    [
      'escaped slashes in base64',
      Buffer.from(`??>${TOKEN}`).toString('base64').replace(/\//g, '\\/'),
    ],
    ['every byte percent-encoded', percentAll(TOKEN)],
    ['every byte percent-encoded, upper case', percentAll(TOKEN).toUpperCase()],
    ['percent-encoded twice', encodeURIComponent(percentAll(TOKEN))],
    ['base64', Buffer.from(TOKEN).toString('base64')],
    ['base64url inside a larger value', Buffer.from(`u:${TOKEN}>>?`).toString('base64url')],
    ['hex', Buffer.from(TOKEN).toString('hex')],
    ['HEX', Buffer.from(TOKEN).toString('hex').toUpperCase()],
  ];
  it.each(cases)('hides the %s form', (_name, form) => {
    const out = r.redactString(`{"echo":"${form}"}`);
    expect(out).toContain(REDACTED);
    expect(out.startsWith('{"echo":"')).toBe(true);
    expect(out.endsWith('"}')).toBe(true);
    // What is left is at most the encoding of the few bytes around the token (`u:`, `>>?`).
    expect(out.length).toBeLessThanOrEqual('{"echo":""}'.length + REDACTED.length + 8);
    expect(r.containsSecret(out)).toBe(false);
    expect(r.redactString(out)).toBe(out);
  });

  it('hides a prefix or suffix of 8 or more characters left at a cut, and nothing shorter', () => {
    expect(r.redactString(`the body ends with ${TOKEN.slice(0, 8)}`)).toBe(
      `the body ends with ${REDACTED}`,
    );
    expect(r.redactString(`${TOKEN.slice(-12)} starts this text`)).toBe(
      `${REDACTED} starts this text`,
    );
    const hex = Buffer.from(TOKEN).toString('hex');
    expect(r.redactString(`cut hex ${hex.slice(0, 20)}`)).toBe(`cut hex ${REDACTED}`);
    // Seven characters are below the bound: ordinary text must survive.
    expect(r.redactString(`ends with ${TOKEN.slice(0, 7)}`)).toBe(`ends with ${TOKEN.slice(0, 7)}`);
    // In the middle of a text a prefix is no cut.
    expect(r.redactString(`a ${TOKEN.slice(0, 9)} b`)).toBe(`a ${TOKEN.slice(0, 9)} b`);
  });
});

describe('short query tokens (8 to 15 characters)', () => {
  // A key or token from 8 characters on is hidden whatever its length; shorter values are
  // ordinary words (`key=short`). The bound is the boundary a mutation audit found untested.
  const KEY = 'abcd1234';

  it.each(['abcd1234', 'abcd12345', 'abcd1234567890Z'])(
    'api_key=%s in a URL, a query string and an env line is redacted',
    (value) => {
      const r = createRedactor();
      expect(r.redactString(`GET /v1/items?api_key=${value}&page=2`)).toBe(
        `GET /v1/items?api_key=${REDACTED}&page=2`,
      );
      expect(r.redactString(`https://h/x?token=${value}`)).toBe(`https://h/x?token=${REDACTED}`);
      expect(r.redactString(`API_KEY=${value} ./run`)).toBe(`API_KEY=${REDACTED} ./run`);
    },
  );

  it('a 7-character value is left alone', () => {
    const r = createRedactor();
    expect(r.redactString('GET /v1/items?api_key=abcd123&page=2')).toBe(
      'GET /v1/items?api_key=abcd123&page=2',
    );
  });

  it('reaches neither the ledger nor the envelope (request path, reply body, error body)', async () => {
    const link = `/v1/items?page=2&api_key=${KEY}`;
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const failing = req.url?.startsWith('/v1/fail') === true;
        res.writeHead(failing ? 500 : 200, { 'content-type': 'application/json' });
        // The provider echoes the URL it was called with, key included.
        res.end(JSON.stringify({ next: link, called: req.url }));
      });
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const ledger = openMemoryLedger();
    const runtime = createRuntime({
      ledger,
      credentials: staticCredentials({ 'vault:legacy': { 'x-client': 'candor' } }),
      sleep: () => Promise.resolve(),
    });
    const read = (path: string) =>
      defineAction({
        name: `read_${path}`,
        class: 'read',
        subject: 'the items',
        input: z.object({}),
        // A legacy API that takes its key in the query string.
        request: () => ({ method: 'GET', path: `/v1/${path}?api_key=${KEY}` }),
        response: z.unknown(),
        destination: { origin, authority_ref: 'vault:legacy' },
        timeouts: { total_ms: 5_000, connect_ms: 1_000 },
      });
    const ok = await runtime.run(read('items'), {});
    expect(ok).toMatchObject({ ok: true, category: 'succeeded' });
    expect(ok.data).toMatchObject({ next: `/v1/items?page=2&api_key=${REDACTED}` });
    const failed = await runtime.run(read('fail'), {});
    expect(failed.ok).toBe(false);
    const stored = JSON.stringify(await ledger.read());
    expect(stored).toContain(REDACTED);
    for (const text of [JSON.stringify(ok), JSON.stringify(failed), stored])
      expect(text).not.toContain(KEY);
  });
});
