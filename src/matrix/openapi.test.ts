// The OpenAPI matrix generator: rows per operation, phases for mutating operations only, schema
// validity, expectations per declared contract, errors naming file and field — and the generated
// matrix for the example spec passing against the real engine and the fake service.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadOpenApi } from '../fakes/openapi-doc.js';
import { openLedger } from '../ledger/open.js';
import { runMatrixWithFake } from './harness.js';
import { parseMatrix } from './load.js';
import { generateMatrixFromOpenApi, snakeCase } from './openapi.js';
import { matrixSchema, type MatrixRow } from './spec.js';

const SPEC_FILE = 'examples/openapi/reference-api.yaml';
const specText = readFileSync(
  fileURLToPath(new URL(`../../${SPEC_FILE}`, import.meta.url)),
  'utf8',
);
const PHASES = [
  'before-bytes',
  'after-headers-rst',
  'after-body-fin',
  'after-commit-delay',
  'body-cut-fin',
  'body-cut-rst',
];
const COMMON = ['expired-token', 'denied', 'invalid-json', 'missing-id', 'html-200'];

function generate(text = specText, file = SPEC_FILE) {
  const r = generateMatrixFromOpenApi(text, file);
  if (!r.ok) throw new Error(r.failure.message);
  return r.value;
}

function row(rows: MatrixRow[], id: string): MatrixRow {
  const found = rows.find((r) => r.id === id);
  if (!found) throw new Error(`no row ${id}`);
  return found;
}

/** A minimal spec with one operation at `path`/`method` and the given operation fields. */
function tiny(method: string, op: Record<string, unknown>, path = '/v1/things'): string {
  return JSON.stringify({
    openapi: '3.0.3',
    info: { title: 't', version: '1' },
    paths: { [path]: { [method]: { responses: { '200': { description: 'ok' } }, ...op } } },
  });
}

describe('generateMatrixFromOpenApi', () => {
  const { yaml, operations } = generate();
  const parsed = parseMatrix(yaml, SPEC_FILE);
  if (!parsed.ok) throw new Error(parsed.failure.message);
  const rows = parsed.value.rows;

  it('validates against matrixSchema and has unique row ids', () => {
    expect(matrixSchema.safeParse(parse(yaml)).success).toBe(true);
    expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length);
    expect(parsed.value.matrix).toBe('reference-api');
  });

  it('gives every operation its rows: phases for mutating operations only', () => {
    const expected: Record<string, string> = {
      list_deployments: 'read',
      create_deployment: 'create',
      create_release: 'create',
      delete_release: 'destructive',
      update_record: 'set_state',
      add_note: 'append',
      create_payment: 'financial',
      read_issue: 'read',
      read_build: 'read',
    };
    expect(
      Object.fromEntries(operations.map((o) => [o.operation, o.contract.action_class])),
    ).toEqual(expected);
    for (const [name, cls] of Object.entries(expected)) {
      const suffixes = rows
        .filter((r) => r.operation === name)
        .map((r) => r.id.slice(name.length + 1));
      expect(suffixes.sort()).toEqual(
        (cls === 'read' ? [...COMMON] : [...PHASES, ...COMMON]).sort(),
      );
    }
    expect(rows).toHaveLength(6 * 11 + 3 * 5);
  });

  it('fills expectations from the declared contract', () => {
    // Honoured key: the engine repeats under the same key and the replay answers.
    expect(row(rows, 'create-release-after-headers-rst').expect).toMatchObject({
      category: 'succeeded',
      remote_effect: 'applied',
      remote: { kind: 'releases', count: 1 },
    });
    // Lookup, no key: reconcile first; committed → found; not committed → a person decides.
    const late = row(rows, 'create-deployment-after-commit-delay');
    expect(late.remote_effect_known).toBe(false);
    expect(late.expect).toMatchObject({
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      next_action: 'reconcile',
      final: { category: 'succeeded' },
      remote: { kind: 'deployments', count: 1 },
    });
    const lost = row(rows, 'create-deployment-after-body-fin').expect;
    expect(lost.final).toEqual({ category: 'outcome_unknown', retry: 'escalate' });
    expect(lost.unknown_reason).toMatch(/lookup found no record/);
    // Neither key nor lookup: escalate, with the reason the state stays unknown.
    const note = row(rows, 'add-note-after-headers-rst');
    expect(note.input).toEqual({ record_id: '{{setup.id}}', text: 'rolled back' });
    expect(note.expect).toMatchObject({
      category: 'outcome_unknown',
      retry: 'escalate',
      next_action: 'escalate',
      remote: { kind: 'records', child: 'notes', child_count: 0 },
    });
    expect(note.expect.unknown_reason).toMatch(/neither a lookup nor an honoured idempotency key/);
    // Set-state: the setup holds the other enum value; the remote check reads that field.
    const upd = row(rows, 'update-record-after-commit-delay');
    expect(upd.setup).toMatchObject({ kind: 'records', fields: { state: 'open' } });
    expect(upd.expect.remote).toEqual({ kind: 'records', setup_field: 'state', equals: 'closed' });
    expect(row(rows, 'delete-release-after-headers-rst').expect.remote).toEqual({
      kind: 'releases',
      setup_deleted: false,
    });
    // Reads: the refusals and contract breaks are final.
    expect(row(rows, 'read-issue-expired-token').expect).toMatchObject({
      category: 'authentication_failed',
      retry: 'never',
      next_action: 'stop',
    });
    expect(row(rows, 'read-build-html-200').expect).toMatchObject({
      category: 'malformed_response',
      retry: 'never',
      remote_effect: 'none',
    });
    expect(row(rows, 'create-payment-before-bytes').expect).toMatchObject({
      category: 'local_failure',
      retry: 'allowed',
      next_action: 'retry_same_operation',
      final: { category: 'local_failure' },
    });
  });

  it('marks the output as generated and the remote expectations as TODO', () => {
    expect(yaml).toMatch(
      /^# Generated by `candor matrix generate --openapi reference-api.yaml` — ready to edit\./,
    );
    const todos = yaml.split('\n').filter((l) => l.includes('# TODO: remote state'));
    expect(todos).toHaveLength(rows.length);
    expect(yaml).toContain(
      '# create_release: POST /v1/releases — class create, Idempotency-Key honoured',
    );
  });

  it('lets the declared class, not the method, decide which rows a POST or GET gets', () => {
    const search = generate(
      tiny('post', { operationId: 'searchThings', 'x-candor-action-class': 'read' }),
    );
    expect(search.matrix.rows.map((r) => r.id)).toEqual(COMMON.map((s) => `search-things-${s}`));
    const trigger = generate(
      tiny('get', { operationId: 'trigger-run', 'x-candor-action-class': 'execute' }),
    );
    expect(trigger.matrix.rows).toHaveLength(11);
    expect(trigger.matrix.rows[0]!.operation).toBe('trigger_run');
  });

  it('names the file and the field of a bad spec', () => {
    const fail = (text: string, file = 'spec.yaml'): string => {
      const r = generateMatrixFromOpenApi(text, file);
      expect(r.ok).toBe(false);
      return r.ok ? '' : r.failure.message;
    };
    expect(fail(tiny('post', { operationId: 7 }, '/v1/x'))).toBe(
      'spec.yaml: paths./v1/x.post.operationId: expected a string, got 7',
    );
    expect(fail(tiny('post', { operationId: 'a', 'x-candor-action-class': 'write' }))).toMatch(
      /^spec\.yaml: paths\.\/v1\/things\.post\.x-candor-action-class: expected one of read, /,
    );
    expect(fail(tiny('post', { operationId: 'a', 'x-candor-lookup': 'nope' }))).toBe(
      'spec.yaml: paths./v1/things.post.x-candor-lookup: names no operation or path "nope"',
    );
    expect(
      fail(tiny('post', { operationId: 'a', parameters: [{ $ref: '#/components/parameters/K' }] })),
    ).toBe(
      'spec.yaml: paths./v1/things.post.parameters.0.$ref: "#/components/parameters/K" points nowhere',
    );
    expect(fail('swagger: "2.0"\npaths: {}\n')).toBe(
      'spec.yaml: openapi: missing (Swagger 2.0 is not supported)',
    );
    expect(fail('openapi: 3.1.0\npaths:\n  /a: [\n')).toMatch(/^spec\.yaml:\d+:\d+: /);
    expect(fail('openapi: 3.1.0\npaths: {}\n')).toBe('spec.yaml: paths: no operations');
  });

  it('names operations as init does: long ids shortened, missing ids from method and path, clashes renamed', async () => {
    const long = 'createOrUpdateTheOrganizationWideForkPullRequestContributorApprovalPermissions';
    const text = JSON.stringify({
      openapi: '3.0.3',
      info: { title: 't', version: '1' },
      paths: {
        '/a/{id}/items': {
          delete: { operationId: 'get_a', responses: { '204': { description: 'gone' } } },
          post: { responses: { '201': { description: 'made' } } },
          get: { operationId: 'getA', responses: { '200': { description: 'ok' } } },
        },
        '/b': {
          put: { operationId: long, responses: { '200': { description: 'ok' } } },
          get: { operationId: 'getA', responses: { '200': { description: 'ok' } } },
        },
      },
    });
    const { operations, yaml } = generate(text, 'names.json');
    const byRoute = Object.fromEntries(operations.map((o) => [`${o.method} ${o.path}`, o]));
    // The first GET keeps its name; the DELETE (after GET in init's order) and the second GET
    // are renamed with six hex digits of their method and path.
    expect(byRoute['GET /a/{id}/items']!.operation).toBe('get_a');
    expect(byRoute['DELETE /a/{id}/items']!.operation).toMatch(/^get_a_[0-9a-f]{6}$/);
    expect(byRoute['GET /b']!.operation).toMatch(/^get_a_[0-9a-f]{6}$/);
    expect(byRoute['GET /b']!.operation).not.toBe(byRoute['DELETE /a/{id}/items']!.operation);
    expect(byRoute['POST /a/{id}/items']!.operation).toBe('post_a_by_id_items');
    expect(byRoute['POST /a/{id}/items']!.name_note).toBe(
      'no operationId: named from POST /a/{id}/items',
    );
    const put = byRoute['PUT /b']!;
    expect(put.operation.length).toBeLessThanOrEqual(64);
    expect(put.operation).toMatch(
      /^create_or_update_the_organization_wide_fork_pull_request_[0-9a-f]{6}$/,
    );
    expect(put.operation_id).toBe(long);
    // The reason is in the generated file, above the operation's rows.
    expect(yaml).toContain(`# operationId "${long}" is `);
    // The same names as `candor init --openapi` gives the same document, on every run.
    const dir = mkdtempSync(join(tmpdir(), 'candor-matrix-names-'));
    const file = join(dir, 'names.json');
    writeFileSync(file, text);
    const loaded = await loadOpenApi(file);
    if (!loaded.ok) throw new Error(loaded.failure.message);
    const initNames = Object.fromEntries(
      loaded.value.operations.map((o) => [`${o.method} ${o.path}`, o.name]),
    );
    expect(
      Object.fromEntries(operations.map((o) => [`${o.method} ${o.path}`, o.operation])),
    ).toEqual(initNames);
    expect(generate(text, 'names.json').operations.map((o) => o.operation)).toEqual(
      operations.map((o) => o.operation),
    );
  });

  it('converts operationIds to snake_case action names', () => {
    expect(snakeCase('createDeployment')).toBe('create_deployment');
    expect(snakeCase('create-deployment')).toBe('create_deployment');
    expect(snakeCase('HTTPCheckV2')).toBe('http_check_v2');
    expect(snakeCase('get /v1/things')).toBe('get_v1_things');
  });
});

describe('the generated matrix for the example spec', () => {
  it('passes against the fake service through the real engine', async () => {
    const { yaml } = generate();
    const parsed = parseMatrix(yaml, SPEC_FILE);
    if (!parsed.ok) throw new Error(parsed.failure.message);
    const ledger = await openLedger('memory:');
    if (!ledger.ok) throw new Error(ledger.failure.message);
    const report = await runMatrixWithFake(parsed.value, {
      ledgerUrl: 'memory:',
      ledger: ledger.value,
    });
    await ledger.value.close();
    if (!report.ok) throw new Error(report.failure.message);
    const failed = report.value.rows.filter((r) => !r.passed);
    expect(failed.map((r) => `${r.id}: ${r.error ?? JSON.stringify(r.assertions)}`)).toEqual([]);
    expect(report.value.summary).toMatchObject({ rows: 81, unsafe: 0, secret_leaks: 0 });
  }, 180_000);
});
