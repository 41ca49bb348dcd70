import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical.js';
import { idempotencyKeyFor, requestFingerprint } from './fingerprint.js';

const base = {
  method: 'POST',
  authority_ref: 'vault:deploy-prod',
  target: '/v1/deployments?env=prod&dry=false',
  headers: { 'content-type': 'application/json' },
  body: { service: 'api', version: '1.2.3' },
};

describe('canonical JSON', () => {
  it('sorts keys at every depth and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: undefined, x: 'é' }], c: null } })).toBe(
      '{"a":{"c":null,"d":[1,{"x":"é","z":1}]},"b":1}',
    );
  });
  it('agrees with JSON.parse on any JSON value (escaping fast path included)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string({ unit: 'binary' }), (v, s) => {
        expect(JSON.parse(canonicalJson(v))).toEqual(JSON.parse(JSON.stringify(v)));
        expect(canonicalJson(s)).toBe(JSON.stringify(s));
      }),
      { seed: 7, numRuns: 2000 },
    );
  });

  it('rejects non-JSON numbers and cycles', () => {
    expect(() => canonicalJson(Number.NaN)).toThrow(TypeError);
    const cyc: Record<string, unknown> = {};
    cyc.self = cyc;
    expect(() => canonicalJson(cyc)).toThrow(TypeError);
  });
});

describe('request fingerprints', () => {
  it('ignore secrets, volatile headers, header case, key order and query order', () => {
    const a = requestFingerprint(base);
    const b = requestFingerprint({
      ...base,
      target: '/v1/deployments?dry=false&env=prod',
      headers: {
        'Content-Type': 'application/json',
        Authorization: 'Bearer s3cret',
        Date: 'x',
        'X-Candor-Call-Id': 'c1',
      },
      body: { version: '1.2.3', service: 'api' },
    });
    expect(a).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(b).toBe(a);
  });

  it('change with the amount, the account, the host or the path', () => {
    const a = requestFingerprint(base);
    expect(requestFingerprint({ ...base, body: { service: 'api', version: '1.2.4' } })).not.toBe(a);
    expect(requestFingerprint({ ...base, authority_ref: 'vault:deploy-staging' })).not.toBe(a);
    expect(requestFingerprint({ ...base, target: '/v1/releases?env=prod&dry=false' })).not.toBe(a);
    expect(requestFingerprint({ ...base, method: 'PUT' })).not.toBe(a);
  });
});

describe('idempotency keys', () => {
  it('derive from the operation id only and are stable', () => {
    expect(idempotencyKeyFor('op_01JD0000000000000000000000')).toBe(
      idempotencyKeyFor('op_01JD0000000000000000000000'),
    );
    expect(idempotencyKeyFor('op_01JD0000000000000000000000')).not.toBe(
      idempotencyKeyFor('op_01JD0000000000000000000001'),
    );
    expect(idempotencyKeyFor('op_01JD0000000000000000000000')).not.toContain('op_');
  });
});
