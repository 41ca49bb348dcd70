// Property: random secrets, embedded in random JSON at random places and in random encodings,
// never survive redaction in any listed form, and redaction is idempotent. Seeded and replayable:
// fast-check prints the seed and path of a failing case; CANDOR_PROPERTY_SEED / _RUNS replay or widen.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { objectOfEntries } from '../../test/support/own-keys.js';
import { createRedactor, REDACTED, type Redactor } from './redact.js';
import { SECRET_HEADERS } from './fingerprint.js';
import { listedForms } from './secret-forms.js';

const SEED = 20260101;

const printable = [
  ...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
  ...'+/=_-.~!@#$%^&*()[]{}:;,?<>| "\\\'`',
];
const secretArb = fc
  .oneof(
    fc.string({ unit: fc.constantFrom(...printable), minLength: 4, maxLength: 40 }),
    fc.string({ unit: 'grapheme', minLength: 4, maxLength: 16 }),
    fc.uint8Array({ minLength: 6, maxLength: 32 }).map((b) => Buffer.from(b).toString('base64')),
    fc.uint8Array({ minLength: 4, maxLength: 24 }).map((b) => Buffer.from(b).toString('hex')),
  )
  .filter((s) => s.length >= 4 && !REDACTED.includes(s));

type Encoding = (s: string) => string;
const b64 = (s: string): Buffer => Buffer.from(s, 'utf8');
const encodings: Record<string, Encoding> = {
  raw: (s) => s,
  base64: (s) => b64(s).toString('base64'),
  base64_unpadded: (s) => b64(s).toString('base64').replace(/=+$/, ''),
  base64url: (s) => b64(s).toString('base64url'),
  uri: (s) => encodeURIComponent(s),
  hex: (s) => b64(s).toString('hex'),
  hex_upper: (s) => b64(s).toString('hex').toUpperCase(),
  json: (s) => JSON.stringify(s).slice(1, -1),
  json_twice: (s) => JSON.stringify(JSON.stringify(s)).slice(1, -1),
  bearer_header: (s) => `Authorization: Bearer ${s}\r\nAccept: */*`,
  basic_auth: (s) => `Basic ${b64(`user:${s}`).toString('base64')}`,
  query: (s) => `https://api.example.test/v1?token=${encodeURIComponent(s)}&page=2`,
};
const encodingArb = fc.constantFrom(...Object.keys(encodings));

/** Where to put a payload: a string value, an object key, a new array item, or a whole value. */
function embed(tree: unknown, slot: number, payload: string): unknown {
  const slots: ((p: string) => void)[] = [];
  const root: { v: unknown } = { v: structuredClone(tree) };
  const walk = (holder: Record<string, unknown> | unknown[], key: string | number): void => {
    const value = (holder as Record<string | number, unknown>)[key];
    slots.push((p) => ((holder as Record<string | number, unknown>)[key] = p));
    if (typeof value === 'string') {
      slots.push((p) => ((holder as Record<string | number, unknown>)[key] = `${value}${p}`));
    } else if (Array.isArray(value)) {
      slots.push((p) => value.push(p));
      value.forEach((_, i) => walk(value, i));
    } else if (value !== null && typeof value === 'object') {
      const obj = value as Record<string, unknown>;
      slots.push((p) => (obj[p] = 1));
      slots.push((p) => (obj.headers = { authorization: p, accept: 'json' }));
      Object.keys(obj).forEach((k) => walk(obj, k));
    }
  };
  walk(root, 'v');
  slots[slot % slots.length]!(payload);
  return root.v;
}

function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) value.forEach((v) => strings(v, out));
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      out.push(k);
      strings(v, out);
    }
  }
  return out;
}

function leaks(texts: string[], secrets: string[]): string | null {
  for (const secret of secrets) {
    const forms = [...listedForms(secret), b64(secret).toString('hex').toUpperCase()];
    for (const text of texts) {
      for (const form of forms) if (text.includes(form)) return `${JSON.stringify(form)} in text`;
    }
  }
  return null;
}

const placementArb = fc.record({
  secret: fc.nat(2),
  encoding: encodingArb,
  slot: fc.nat(),
  prefix: fc.string({ maxLength: 4 }),
  suffix: fc.string({ maxLength: 4 }),
});

describe('redaction properties (seeded)', () => {
  it('never lets an embedded secret through, in any listed form, and is idempotent', () => {
    fc.assert(
      fc.property(
        fc.array(secretArb, { minLength: 1, maxLength: 3 }),
        fc.jsonValue({ maxDepth: 3 }),
        fc.array(placementArb, { minLength: 1, maxLength: 4 }),
        (secrets, tree, placements) => {
          let doc: unknown = tree;
          for (const p of placements) {
            const secret = secrets[p.secret % secrets.length]!;
            const payload = `${p.prefix}${encodings[p.encoding]!(secret)}${p.suffix}`;
            doc = embed(doc, p.slot, payload);
          }
          const redactor = createRedactor(secrets);
          const once = redactor.redactValue(doc);
          expect(leaks(strings(once), secrets)).toBeNull();
          expect(redactor.redactValue(once)).toEqual(once);
          const text = JSON.stringify(doc);
          const redactedText = redactor.redactString(text);
          expect(leaks([redactedText], secrets)).toBeNull();
          expect(redactor.redactString(redactedText)).toBe(redactedText);
          expect(redactor.containsSecret(redactedText)).toBe(false);
        },
      ),
      {
        seed: Number(process.env.CANDOR_PROPERTY_SEED ?? SEED),
        numRuns: Number(process.env.CANDOR_PROPERTY_RUNS ?? 400),
      },
    );
  });

  it('redactString is total and idempotent on arbitrary text, including lone surrogates', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 200 }),
        fc.array(fc.string({ unit: 'binary', minLength: 4, maxLength: 12 }), { maxLength: 2 }),
        (text, secrets) => {
          const redactor = createRedactor(secrets);
          const once = redactor.redactString(text);
          expect(redactor.redactString(once)).toBe(once);
        },
      ),
      { seed: SEED + 1, numRuns: 400 },
    );
  });

  it('redactValue copies exactly as the entries-based copy it replaced (keys redacted alike, __proto__, shared values, cycles)', () => {
    // Keys drawn from a small set so that redacted keys collide with each other and with plain ones.
    const keyArb = fc.constantFrom(
      'a',
      'b',
      'token',
      'Authorization',
      '__proto__',
      REDACTED,
      `${REDACTED}#2`,
      'k-sekret-1',
      'x sekret-2 y',
      'sekret-1',
      'sekret-2',
      '0',
      '10',
    );
    const leaf = fc.oneof(
      fc.constantFrom('sekret-1', 'sekret-2', 'plain', '', 'Bearer sekret-1'),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
    );
    const { tree } = fc.letrec((tie) => ({
      tree: fc.oneof({ depthSize: 'small' }, leaf, tie('obj'), tie('arr')),
      obj: fc.array(fc.tuple(keyArb, tie('tree')), { maxLength: 5 }).map(objectOfEntries),
      arr: fc.array(fc.oneof(fc.constantFrom('authorization', 'cookie'), tie('tree')), {
        maxLength: 4,
      }),
    }));
    fc.assert(
      fc.property(tree, fc.boolean(), (doc, cyclic) => {
        const value: unknown =
          cyclic && typeof doc === 'object' && doc !== null && !Array.isArray(doc)
            ? { doc, again: doc, self: null }
            : doc;
        if (value !== doc) (value as { self: unknown }).self = value;
        const redactor = createRedactor(['sekret-1', 'sekret-2']);
        const got = redactor.redactValue(value);
        const want = entriesCopy(redactor, value, new WeakSet());
        expect(got).toStrictEqual(want);
        expect(Object.keys(got ?? {})).toStrictEqual(Object.keys(want ?? {}));
      }),
      { seed: SEED + 2, numRuns: 400 },
    );
  });
});

/** The copy redactValue made before (Object.entries / Object.fromEntries, a WeakSet of the path). */
function entriesCopy(r: Redactor, value: unknown, seen: WeakSet<object>): unknown {
  if (typeof value === 'string') return r.redactString(value);
  if (value === null || typeof value !== 'object') return value;
  if (seen.has(value)) return '[Circular]';
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      const items: unknown[] = value;
      return items.map((item, i) => {
        const prev = items[i - 1];
        const afterHeaderName = typeof prev === 'string' && SECRET_HEADERS.has(prev.toLowerCase());
        return afterHeaderName && typeof item === 'string' && item !== ''
          ? REDACTED
          : entriesCopy(r, item, seen);
      });
    }
    const secretFields = new Set([
      ...SECRET_HEADERS,
      'password',
      'passwd',
      'passphrase',
      'secret',
      'client_secret',
      'token',
      'access_token',
      'refresh_token',
      'id_token',
      'api_key',
      'apikey',
      'private_key',
    ]);
    const hide = (v: unknown): unknown =>
      v === null || v === undefined || v === '' ? v : Array.isArray(v) ? v.map(hide) : REDACTED;
    const entries: [string, unknown][] = [];
    const used = new Set<string>();
    for (const [key, item] of Object.entries(value)) {
      const redacted = secretFields.has(key.toLowerCase())
        ? hide(item)
        : entriesCopy(r, item, seen);
      let name = r.redactString(key);
      const base = name;
      for (let n = 2; used.has(name); n++) name = `${base}#${n}`;
      used.add(name);
      entries.push([name, redacted]);
    }
    return Object.fromEntries(entries);
  } finally {
    seen.delete(value);
  }
}
