// The record encoder writes a record's members in their canonical order itself (record.ts): the
// bytes must stay exactly canonicalJson of the record object, for any event the ledger accepts
// (strings that need escaping, members left undefined, nested data), and the server-side
// template (PostgreSQL) must splice to the same text. Seeded and replayable (CANDOR_SEED).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../core/canonical.js';
import { EVENT_VERSION, GENESIS_HASH, type NewEvent } from './events.js';
import { recordBytes, recordTemplate, sealRecord } from './record.js';

const seed = Number(process.env.CANDOR_SEED ?? 20261202);
const params = { seed, numRuns: 1_000, verbose: 1 } as const;

const text = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.constantFrom('"', '\\', '\u2028'),
);
const maybe = <T>(a: fc.Arbitrary<T>) => fc.oneof(a, fc.constant(null), fc.constant(undefined));
const json = fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.parse(JSON.stringify(v)) as unknown);
const event = fc.record({
  at: fc.oneof(fc.integer({ min: 0, max: 2 ** 45 }), fc.constant(undefined)),
  kind: fc.oneof(text, fc.constant(undefined)),
  operation_id: maybe(text),
  session_id: maybe(text),
  correlation_id: maybe(text),
  data: fc.oneof(json, fc.dictionary(text, json), fc.constant(undefined)),
}) as fc.Arbitrary<NewEvent>;
const hash = fc.oneof(fc.constant(GENESIS_HASH), fc.stringMatching(/^[0-9a-f]{64}$/));

const byObject = (e: NewEvent, seq: number, prevHash: string): string =>
  canonicalJson({
    at: e.at,
    correlation_id: e.correlation_id,
    data: e.data,
    kind: e.kind,
    operation_id: e.operation_id,
    prev_hash: prevHash,
    seq,
    session_id: e.session_id,
    v: EVENT_VERSION,
  });

describe('record encoding', () => {
  it('is canonicalJson of the record object, byte for byte', () => {
    fc.assert(
      fc.property(event, fc.integer({ min: 1, max: 2 ** 40 }), hash, (e, seq, prev) => {
        const expected = byObject(e, seq, prev);
        expect(recordBytes(e, seq, prev).toString('utf8')).toBe(expected);
        expect(sealRecord(e, seq, prev).text).toBe(expected);
        const t = recordTemplate(e);
        expect(`${t.prefix}${prev}","seq":${seq}${t.suffix}`).toBe(expected);
      }),
      params,
    );
  });

  it('refuses what canonicalJson refuses', () => {
    const bad = { at: 1, kind: 'x', operation_id: null, session_id: null, correlation_id: null };
    expect(() =>
      recordTemplate({ ...bad, data: { n: Number.NaN } } as unknown as NewEvent),
    ).toThrow(/non-finite/);
    expect(() => recordTemplate({ ...bad, data: { f: () => 1 } } as unknown as NewEvent)).toThrow(
      /cannot encode function/,
    );
  });
});
