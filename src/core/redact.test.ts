import { describe, expect, it } from 'vitest';
import { createRedactor, REDACTED } from './redact.js';

const SECRET = 's3cr3t-Value_42/xyz';
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

describe('createRedactor: known secrets', () => {
  const r = createRedactor([SECRET]);

  it.each([
    ['exact', SECRET],
    ['base64', b64(SECRET)],
    ['base64 without padding', b64(SECRET).replace(/=+$/, '')],
    ['base64url', Buffer.from(SECRET).toString('base64url')],
    ['URL-encoded', encodeURIComponent(SECRET)],
    ['URL-encoded, lower-case escapes', encodeURIComponent(SECRET).toLowerCase()],
    ['hex', Buffer.from(SECRET).toString('hex')],
    ['HEX', Buffer.from(SECRET).toString('hex').toUpperCase()],
    ['JSON-escaped', JSON.stringify(SECRET).slice(1, -1)],
  ])('removes the %s form', (_name, form) => {
    const out = r.redactString(`before ${form} after`);
    expect(out.startsWith(`before ${REDACTED}`)).toBe(true);
    expect(out.endsWith(' after')).toBe(true);
    expect(out).not.toContain(form);
    expect(r.containsSecret(out)).toBe(false);
    expect(r.containsSecret(`x${form}y`)).toBe(true);
  });

  it('removes the secret from inside a larger base64 payload at every alignment', () => {
    for (const prefix of ['u:', 'us:', 'use:']) {
      const encoded = b64(`${prefix}${SECRET}`);
      const out = r.redactString(`Basic ${encoded}`);
      expect(out).toContain(REDACTED);
      // What is left can hold at most the few bits of the boundary characters.
      expect(out.replace(REDACTED, '').length).toBeLessThan(`Basic ${encoded}`.length - 16);
    }
  });

  it('handles secrets with quotes, backslashes and non-ASCII', () => {
    const tricky = 'p"a\\ss wörd✓';
    const t = createRedactor([tricky]);
    const serialized = JSON.stringify({ nested: JSON.stringify({ pw: tricky }) });
    const out = t.redactString(serialized);
    expect(out).toContain(REDACTED);
    expect(t.containsSecret(out)).toBe(false);
    const asciiEscaped = JSON.stringify(tricky).replace(
      /[^\x20-\x7e]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
    expect(t.redactString(asciiEscaped)).toBe(`"${REDACTED}"`);
  });

  it('refuses secrets that are too short or hidden in the marker, leaving text intact', () => {
    const t = createRedactor();
    expect(t.addSecret('abc')).toBe(false);
    expect(t.addSecret('DACT')).toBe(false);
    expect(t.addSecret('abcd')).toBe(true);
    expect(t.redactString('a b c abc DACTYL')).toBe('a b c abc DACTYL');
    expect(t.redactString('xabcdx')).toBe(`x${REDACTED}x`);
  });

  it('finds the piece of a secret left at a cut past look-alike candidates, and hex in any case', () => {
    const t = createRedactor(['abababababababab-tail9', 'zz-0123456789-qq']);
    // The text's first 8 characters occur at several places of the secret; one piece fits.
    expect(t.redactString('ababababab-tail9 rest')).toBe(`${REDACTED} rest`);
    // The secret's first 8 characters occur twice near the end; only the last run is a piece.
    expect(t.redactString('keep zz-01234 then zz-0123456789')).toBe(
      `keep zz-01234 then ${REDACTED}`,
    );
    const hex = Buffer.from('zz-0123456789-qq').toString('hex');
    expect(t.redactString(`a${hex.toUpperCase()}b and ${hex.slice(0, 12).toUpperCase()}`)).toBe(
      `a${REDACTED}b and ${REDACTED}`,
    );
  });

  it('addSecret takes effect for later calls', () => {
    const t = createRedactor();
    expect(t.redactString('tok-9f8e7d6c')).toBe('tok-9f8e7d6c');
    t.addSecret('tok-9f8e7d6c');
    expect(t.redactString('tok-9f8e7d6c')).toBe(REDACTED);
  });
});

describe('createRedactor: headers, PEM blocks and token shapes', () => {
  const r = createRedactor();

  it.each([
    ['Authorization: Bearer abc\r\nHost: example', `Authorization: ${REDACTED}\r\nHost: example`],
    ['proxy-authorization: Basic dTpw', `proxy-authorization: ${REDACTED}`],
    ['Cookie: sid=1; theme=dark\nAccept: */*', `Cookie: ${REDACTED}\nAccept: */*`],
    ['Set-Cookie: sid=abc; Path=/; HttpOnly', `Set-Cookie: ${REDACTED}`],
    ['X-Api-Key: k-123', `X-Api-Key: ${REDACTED}`],
    [
      '{"msg":"sent Authorization: Bearer x\\r\\nHost: h","n":1}',
      `{"msg":"sent Authorization: ${REDACTED}\\r\\nHost: h","n":1}`,
    ],
    ['{"Authorization": "Basic zzz", "x": 1}', `{"Authorization": "${REDACTED}", "x": 1}`],
    ['{"password":"hunter2","user":"u"}', `{"password":"${REDACTED}","user":"u"}`],
  ])('redacts %j', (input, expected) => {
    expect(r.redactString(input)).toBe(expected);
  });

  it('redacts PEM private key blocks, escaped or truncated', () => {
    const pem =
      '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----';
    expect(r.redactString(`key:\n${pem}\nnext`)).toBe(`key:\n${REDACTED}\nnext`);
    expect(r.redactString(JSON.stringify({ k: pem }))).toBe(`{"k":"${REDACTED}"}`);
    expect(r.redactString('x -----BEGIN RSA PRIVATE KEY-----\nMIIE')).toBe(`x ${REDACTED}`);
    expect(r.redactString('-----BEGIN PUBLIC KEY-----')).toBe('-----BEGIN PUBLIC KEY-----');
  });

  it.each([
    'Bearer abcdefghijklmnop0123',
    'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl',
    'ghp_0123456789abcdefghijABCDEFGHIJ',
    'gho_0123456789abcdefghijABCDEFGHIJ',
    'github_pat_11ABCDEFG0123456789_abcdefghijklmnop',
    'sk-proj-0123456789abcdefXYZ',
    'xoxb-123456789012-abcdefghij',
    'AKIAIOSFODNN7EXAMPLE',
  ])('redacts the token shape %s', (token) => {
    const out = r.redactString(`value=${JSON.stringify(token)} end`);
    expect(out).toContain(REDACTED);
    expect(out).not.toContain(token.slice(-10));
  });

  it('redacts secret-looking query parameters but not ordinary ones', () => {
    expect(
      r.redactString('GET /x?access_token=abcdef0123456789&sort_key=name&page=2&password=pw'),
    ).toBe(`GET /x?access_token=${REDACTED}&sort_key=name&page=2&password=${REDACTED}`);
    expect(r.redactString('API_KEY=0123456789abcdef ./run')).toBe(`API_KEY=${REDACTED} ./run`);
    expect(r.redactString('https://h/?key=short')).toBe('https://h/?key=short');
  });

  it('leaves ordinary prose and non-secret headers alone', () => {
    const prose = 'Send a Bearer token; WWW-Authenticate: Bearer error="invalid_token"; sk-1 ok';
    expect(r.redactString(prose)).toBe(prose);
  });
});

describe('createRedactor.redactValue', () => {
  const r = createRedactor([SECRET]);

  it('returns a new deep value with secret headers, fields, keys and strings hidden', () => {
    const input = {
      headers: { Authorization: 'Bearer abc', 'Content-Type': 'application/json' },
      raw: ['cookie', 'sid=1', 'host', 'example'],
      [SECRET]: 1,
      password: ['a', 'b'],
      note: `used ${SECRET}`,
      n: 3,
      ok: true,
      nothing: null,
    };
    const copy = structuredClone(input);
    const out = r.redactValue(input);
    expect(out).toEqual({
      headers: { Authorization: REDACTED, 'Content-Type': 'application/json' },
      raw: ['cookie', REDACTED, 'host', 'example'],
      [REDACTED]: 1,
      password: [REDACTED, REDACTED],
      note: `used ${REDACTED}`,
      n: 3,
      ok: true,
      nothing: null,
    });
    expect(input).toEqual(copy);
  });

  it('keeps keys that redact alike apart, survives cycles, and is idempotent', () => {
    const input: Record<string, unknown> = { [REDACTED]: 1, [SECRET]: 2 };
    input.self = input;
    const out = r.redactValue(input);
    expect(out).toEqual({ [REDACTED]: 1, [`${REDACTED}#2`]: 2, self: '[Circular]' });
    expect(r.redactValue(out)).toEqual(out);
  });

  it('does not let a "__proto__" key change the prototype', () => {
    const input = JSON.parse('{"__proto__": {"polluted": true}}') as object;
    const out = r.redactValue(input) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(['__proto__']);
  });
});
