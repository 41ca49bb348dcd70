import { describe, expect, it } from 'vitest';
import { NO_CREDENTIAL } from './actions.js';
import { configCredentials, envDeclarations } from './credentials.js';
import { parseConfig } from './load.js';

const YAML = `
credentials:
  bearer: { ref: env:API_TOKEN, scheme: Bearer }
  key: { ref: env:API_KEY, header: X-Api-Key }
destinations:
  records: { origin: 'http://127.0.0.1:8787', credential: bearer, route_prefix: /v1/records }
  keyed: { origin: 'http://127.0.0.1:8787', credential: key, route_prefix: /v1/builds }
  open: { origin: 'http://127.0.0.1:9999' }
actions:
  - { name: get_record, class: read, subject: the record, description: d, destination: records, request: { method: GET, path: /v1/records } }
`;

function config() {
  const r = parseConfig(YAML, 'c.yaml');
  if (!r.ok) throw new Error(r.failure.message);
  return r.value.config;
}

describe('configCredentials', () => {
  it('declares env credentials with the bindings of the destinations that use them', () => {
    expect(envDeclarations(config())).toEqual({
      API_TOKEN: {
        type: 'bearer',
        bindings: [{ kind: 'http', origin: 'http://127.0.0.1:8787', path_prefix: '/v1/records' }],
      },
      API_KEY: {
        type: 'api_key',
        header_name: 'X-Api-Key',
        bindings: [{ kind: 'http', origin: 'http://127.0.0.1:8787', path_prefix: '/v1/builds' }],
      },
    });
  });

  it('presents the value only inside its binding, and reports every refusal by code', async () => {
    const secrets: string[] = [];
    const creds = configCredentials(config(), {
      env: { API_TOKEN: 'tok-abcdef123456', API_KEY: 'key-abcdef' },
      onSecret: (s) => secrets.push(s),
    });
    const origin = 'http://127.0.0.1:8787';
    expect(await creds.resolve('env:API_TOKEN', { origin, path: '/v1/records/rec_1?x=1' })).toEqual(
      {
        ok: true,
        headers: { authorization: 'Bearer tok-abcdef123456' },
        secrets: ['Bearer tok-abcdef123456', 'tok-abcdef123456'],
      },
    );
    expect(secrets).toContain('tok-abcdef123456');
    expect(await creds.resolve('env:API_KEY', { origin, path: '/v1/builds' })).toMatchObject({
      headers: { 'x-api-key': 'key-abcdef' },
    });
    // Outside the route prefix, on another origin, or with an undeclared variable: refused.
    for (const [ref, target] of [
      ['env:API_TOKEN', { origin, path: '/v1/recordsX' }],
      ['env:API_TOKEN', { origin: 'http://127.0.0.1:8788', path: '/v1/records' }],
      ['env:API_TOKEN', { origin, path: '/v1/records/%2e%2e/payments' }],
    ] as const) {
      expect(await creds.resolve(ref, target)).toEqual({
        ok: false,
        failure: {
          code: 'binding_mismatch',
          detail: 'env:API_TOKEN is not bound to this destination.',
        },
      });
    }
    expect(await creds.resolve('env:HOME', { origin, path: '/v1/records' })).toEqual({
      ok: false,
      failure: { code: 'unknown_ref', detail: 'env:HOME is not a declared credential.' },
    });
    expect(await creds.resolve(NO_CREDENTIAL, { origin, path: '/' })).toEqual({
      ok: true,
      headers: {},
      secrets: [],
    });
    const unset = configCredentials(config(), { env: {} });
    expect(await unset.resolve('env:API_TOKEN', { origin, path: '/v1/records' })).toEqual({
      ok: false,
      failure: { code: 'unavailable', detail: 'API_TOKEN is not set.' },
    });
  });

  it('refuses vault references without a vault, and presentation set beside them', () => {
    const r = parseConfig(
      YAML.replace('{ ref: env:API_TOKEN, scheme: Bearer }', '{ ref: vault:api, scheme: Bearer }'),
      'c.yaml',
    );
    expect(r.ok).toBe(false);
    expect(r.failure!.issues.map((i) => `${i.line}:${i.col} ${i.field}: ${i.problem}`)).toEqual([
      '3:18 credentials.bearer.ref: a vault: reference needs a `vault:` section',
      '3:29 credentials.bearer.scheme: for a vault: reference the vault entry decides how it is presented',
    ]);
  });
});
