import { describe, expect, it } from 'vitest';
import { httpDefinition } from './actions.js';
import { formatIssue } from './locate.js';
import { parseConfig } from './load.js';
import { configJsonSchema } from './schema.js';

const GOOD = `ledger: 'memory:'
credentials:
  fake:
    ref: env:FAKE_TOKEN
    scheme: Bearer
destinations:
  records:
    origin: http://127.0.0.1:8787
    credential: fake
    route_prefix: /v1/records
actions:
  - name: create_record
    class: create
    subject: the record
    description: Create a record.
    destination: records
    request:
      method: POST
      path: /v1/records
      body: { title: '{{input.title}}', client_ref: '{{operation_id}}', size: '{{input.size}}', label: 'n={{input.size}}' }
    input:
      type: object
      properties: { title: { type: string }, size: { type: integer } }
      required: [title]
      additionalProperties: false
    response: { type: object, properties: { id: { type: string } }, required: [id] }
    remote_ref: id
    reconcile: { path: '/v1/records?client_ref={{operation_id}}' }
  - name: get_record
    class: read
    subject: the record
    description: Read a record.
    destination: records
    request: { method: GET, path: '/v1/records/{{input.id}}' }
    input: { type: object, properties: { id: { type: string } }, required: [id] }
`;

/** Replaces the first occurrence of `from` in GOOD; fails loudly if it is not there. */
function variant(from: string, to: string): string {
  expect(GOOD.includes(from)).toBe(true);
  return GOOD.replace(from, to);
}

function problems(text: string): string[] {
  const r = parseConfig(text, 'candor.yaml');
  expect(r.ok).toBe(false);
  return r.failure!.issues.map(formatIssue);
}

const ctx = { operation_id: 'op_01ABC', correlation_id: 'cor_1', idempotency_key: null };

describe('parseConfig', () => {
  it('builds actions whose requests follow the templates', () => {
    const r = parseConfig(GOOD, 'candor.yaml');
    if (!r.ok) throw new Error(r.failure.message);
    const [create, get] = r.value.actions;
    expect(httpDefinition(create!).request({ title: 'a/b', size: 3 }, ctx)).toEqual({
      method: 'POST',
      path: '/v1/records',
      body: { title: 'a/b', client_ref: 'op_01ABC', size: 3, label: 'n=3' },
    });
    // An absent optional argument drops its key instead of sending "".
    expect(httpDefinition(create!).request({ title: 't' }, ctx)).toMatchObject({
      body: { title: 't', client_ref: 'op_01ABC', label: 'n=' },
    });
    expect(httpDefinition(get!).request({ id: 'rec 1/../x' }, ctx).path).toBe(
      '/v1/records/rec%201%2F..%2Fx',
    );
    expect(() => httpDefinition(get!).request({ id: '..' }, ctx)).toThrow(/dot segment/);
    const dest = httpDefinition(create!).destination;
    expect(dest.authority_ref).toBe('env:FAKE_TOKEN');
    expect(dest.route_template).toBe('/v1/records');
    expect(dest.reconciliation!.lookup(ctx, {}).path).toBe('/v1/records?client_ref=op_01ABC');
    expect(dest.reconciliation!.matches({ items: [{ id: 'rec_1' }, { id: 2 }] }, {})).toEqual([
      { ref: 'rec_1', record: { id: 'rec_1' } },
      { ref: '2', record: { id: 2 } },
    ]);
    expect(() => dest.reconciliation!.matches({ nope: [] }, {})).toThrow();
    expect(httpDefinition(create!).remoteRef!({ id: 'rec_9' })).toBe('rec_9');
    expect(httpDefinition(create!).input.safeParse({ title: 'x', extra: 1 }).success).toBe(false);
    expect(httpDefinition(get!).destination.reconciliation).toBeUndefined();
    expect(r.value.config.ledger).toBe('memory:');
  });

  it('builds get-by-id lookups and identifying fields; their templates are checked like the others', () => {
    const text = variant(
      "reconcile: { path: '/v1/records?client_ref={{operation_id}}' }",
      "reconcile: { shape: one, path: '/v1/records/{{input.title}}', identify: { title: '{{input.title}}', 'meta.size': 's{{input.size}}' }, created_at: meta.created }",
    );
    const r = parseConfig(text, 'candor.yaml');
    if (!r.ok) throw new Error(r.failure.message);
    const lookup = httpDefinition(r.value.actions[0]!).destination.reconciliation!;
    expect(lookup.shape).toBe('one');
    expect(lookup.route).toBe('GET /v1/records/{{input.title}}');
    expect(lookup.lookup(ctx, { title: 'a b' }).path).toBe('/v1/records/a%20b');
    // The body is the record itself.
    expect(lookup.matches({ id: 'rec_1', title: 'a b' }, {})).toEqual([
      { ref: 'rec_1', record: { id: 'rec_1', title: 'a b' } },
    ]);
    expect(lookup.identify!({ title: 'a b', size: 3 }, ctx)).toEqual({
      title: 'a b',
      'meta.size': 's3',
    });
    // A missing value identifies nothing (never the empty string).
    expect(() => lookup.identify!({ title: 'a b' }, ctx)).toThrow(/input\.size/);
    expect(lookup.createdAt!({ meta: { created: '2020-01-01T00:00:00Z' } })).toBe(
      Date.UTC(2020, 0, 1),
    );
    expect(lookup.createdAt!({ meta: {} })).toBeNull();

    expect(
      problems(
        variant(
          "reconcile: { path: '/v1/records?client_ref={{operation_id}}' }",
          "reconcile: { path: '/v1/records?client_ref={{operation_id}}', identify: { title: '{{input.titel}}' } }",
        ),
      ),
    ).toEqual([
      expect.stringMatching(
        /^candor\.yaml:28:\d+: actions\[0\]\.reconcile\.identify\.title: .*the input schema has no property "titel"/,
      ),
    ]);
    expect(
      problems(
        variant(
          "reconcile: { path: '/v1/records?client_ref={{operation_id}}' }",
          "reconcile: { path: '/v1/records?client_ref={{operation_id}}', identify: {}, shape: many }",
        ),
      ),
    ).toEqual([
      expect.stringMatching(/actions\[0\]\.reconcile\.identify: identify names at least one field/),
      expect.stringMatching(/actions\[0\]\.reconcile\.shape: Invalid option/),
    ]);
  });

  it('reports a wrong type at the value', () => {
    expect(problems(variant('class: read', 'class: 7'))).toEqual([
      expect.stringMatching(/^candor\.yaml:30:12: actions\[1\]\.class: Invalid option/),
    ]);
  });

  it('reports a bad class with its line', () => {
    expect(problems(variant('class: create', 'class: write'))).toEqual([
      expect.stringMatching(
        /^candor\.yaml:13:12: actions\[0\]\.class: Invalid option: expected one of "read"/,
      ),
    ]);
  });

  it('refuses four_eyes with the elicitation approver (the caller would approve its own call)', () => {
    const elicit = `${GOOD}approvals:\n  four_eyes: true\n`;
    const lines = GOOD.split('\n').length;
    expect(problems(elicit)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^candor\\.yaml:${lines + 1}:\\d+: approvals\\.four_eyes: four_eyes needs a person other than the caller`,
        ),
      ),
    ]);
    const consoleApprover = parseConfig(
      `${GOOD}approvals:\n  approver: console\n  four_eyes: true\n`,
      'candor.yaml',
    );
    expect(consoleApprover.ok && consoleApprover.value.config.approvals?.four_eyes).toBe(true);
  });

  it('reports an unknown key at the key', () => {
    expect(
      problems(
        variant(
          '    route_prefix: /v1/records\n',
          '    route_prefix: /v1/records\n    idempotncy: {}\n',
        ),
      ),
    ).toEqual(['candor.yaml:11:5: destinations.records.idempotncy: unknown key']);
  });

  it('reports an unknown destination reference', () => {
    expect(
      problems(
        variant(
          'destination: records\n    request:\n      method: POST',
          'destination: recrods\n    request:\n      method: POST',
        ),
      ),
    ).toEqual([
      'candor.yaml:16:18: actions[0].destination: no destination named "recrods" under destinations',
    ]);
  });

  it('reports an unknown credential, a secret header and an unknown placeholder', () => {
    const text = variant('credential: fake', 'credential: other').replace(
      "path: '/v1/records/{{input.id}}' }",
      "path: '/v1/records/{{input.idd}}', headers: { Authorization: x } }",
    );
    expect(problems(text)).toEqual([
      'candor.yaml:9:17: destinations.records.credential: no credential named "other" under credentials',
      expect.stringMatching(
        /^candor\.yaml:34:35: actions\[1\]\.request\.path: \{\{input\.idd\}\}: the input schema has no property "idd"/,
      ),
      expect.stringMatching(
        /^candor\.yaml:34:75: actions\[1\]\.request\.headers\.Authorization: credentials and idempotency keys/,
      ),
    ]);
  });

  it('refuses a path outside the route prefix, a typo in a lookup, and a reserved name', () => {
    const text = variant("path: '/v1/records/{{input.id}}'", "path: '/v1/recordsx/{{input.id}}'")
      .replace('client_ref={{operation_id}}', 'client_ref={{input.titel}}')
      .replace('name: get_record', 'name: operation_status');
    expect(problems(text)).toEqual([
      expect.stringMatching(
        /^candor\.yaml:28:24: actions\[0\]\.reconcile\.path: .*the input schema has no property "titel"/,
      ),
      'candor.yaml:29:11: actions[1].name: "operation_status" is a built-in tool name',
      expect.stringMatching(
        /^candor\.yaml:34:35: actions\[1\]\.request\.path: the path must lie under .*\/v1\/records$/,
      ),
    ]);
  });

  it('refuses a credential value in the file and a missing required field', () => {
    const text = variant('ref: env:FAKE_TOKEN', 'ref: sk-live-abcdef').replace(
      '    subject: the record\n    description: Read a record.\n',
      '    description: Read a record.\n',
    );
    expect(problems(text)).toEqual([
      expect.stringMatching(
        /^candor\.yaml:4:10: credentials\.fake\.ref: a credential reference is env:VAR or vault:NAME/,
      ),
      expect.stringMatching(
        /^candor\.yaml:29:5: actions\[1\]\.subject: Invalid input: expected string/,
      ),
    ]);
  });

  it('reports YAML syntax errors and duplicate keys with their place', () => {
    expect(problems("ledger: 'memory:'\nledger: x\n")[0]).toMatch(/^candor\.yaml:2:1: \(file\): /);
    expect(problems('actions: [\n')[0]).toMatch(/^candor\.yaml:\d+:\d+: \(file\): /);
    expect(problems('')).toEqual(['candor.yaml:1:1: (file): the configuration is empty']);
  });

  it('reports an input schema that zod cannot use', () => {
    const text = variant(
      'input: { type: object, properties: { id: { type: string } }',
      'input: { type: object, properties: { id: { type: strang } }',
    );
    expect(problems(text)).toEqual([
      expect.stringMatching(/^candor\.yaml:35:12: actions\[1\]\.input: not a usable JSON Schema/),
    ]);
  });
});

describe('configJsonSchema', () => {
  it('is a closed draft 2020-12 schema naming every section', () => {
    const s = configJsonSchema() as {
      properties: Record<string, unknown>;
      additionalProperties: unknown;
      $schema: string;
    };
    expect(s.$schema).toContain('2020-12');
    expect(Object.keys(s.properties)).toEqual(
      expect.arrayContaining(['ledger', 'credentials', 'destinations', 'actions']),
    );
    expect(s.additionalProperties).toBe(false);
  });
});
