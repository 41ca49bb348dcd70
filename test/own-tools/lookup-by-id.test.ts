// A service whose records carry an id the caller chooses, readable by GET /parcels/{id}: init
// infers a get-by-id lookup bound to that id (`shape: one`, `identify`, `created_at`) with no
// edits, and after a lost reply the engine finds the record the operation created.
// NOTE: the run needs the engine's support for `reconcile.shape: one` (the lookup work); on a
// branch without it the second test fails with the lookup reading the record as a list.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { main } from '../../src/cli/main.js';

const SPEC = `openapi: 3.0.3
info: {title: Parcels, version: "1"}
servers: [{url: "http://127.0.0.1:8080"}]
paths:
  /parcels:
    post:
      operationId: createParcel
      summary: Register a parcel under the caller's own id
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [id, weight]
              properties:
                id: {type: string, description: "the caller's parcel id"}
                weight: {type: integer}
      responses:
        "201": {description: created, content: {application/json: {schema: {$ref: "#/components/schemas/Parcel"}}}}
  /parcels/{id}:
    get:
      operationId: getParcel
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/Parcel"}}}}
        "404": {description: absent}
components:
  schemas:
    Parcel:
      type: object
      required: [id, weight]
      properties:
        id: {type: string}
        weight: {type: integer}
        created_at: {type: string, format: date-time, readOnly: true}
`;

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) },
    out,
    err,
  };
}

function setup(): { dir: string; spec: string; config: string } {
  const dir = mkdtempSync(join(tmpdir(), 'candor-byid-'));
  const spec = join(dir, 'parcels.yaml');
  writeFileSync(spec, SPEC);
  return { dir, spec, config: join(dir, 'candor.yaml') };
}

describe('a caller-chosen id and a get-by-id endpoint', () => {
  it('init infers the lookup, bound to the id, and says why', async () => {
    const { spec, config } = setup();
    expect(await main(['init', '--openapi', spec, '--out', config], io().io)).toBe(0);
    const text = readFileSync(config, 'utf8');
    const create = (parse(text) as { actions: Array<Record<string, unknown>> }).actions.find(
      (a) => a.name === 'create_parcel',
    )!;
    expect(create.reconcile).toEqual({
      method: 'GET',
      path: '/parcels/{{input.id}}',
      shape: 'one',
      ref: 'id',
      identify: { id: '{{input.id}}' },
      created_at: 'created_at',
    });
    expect(text).toContain(
      'lookup (a guess): get_parcel (GET /parcels/{id}) reads the record by the id the caller chooses (the body field "id")',
    );
    // The readOnly created_at is no input: the service sets it.
    expect(Object.keys((create.input as { properties: object }).properties).sort()).toEqual([
      'id',
      'weight',
    ]);
  });

  it('after a lost reply, the lookup finds the record: succeeded, written once', async () => {
    const { dir, spec, config } = setup();
    expect(
      await main(['init', '--openapi', spec, '--out', config, '--deadline-ms', '1500'], io().io),
    ).toBe(0);
    const matrix = join(dir, 'matrix.yaml');
    expect(
      await main(
        ['matrix', 'generate', '--openapi', spec, '--config', config, '--out', matrix],
        io().io,
      ),
    ).toBe(0);
    const json = join(dir, 'report.json');
    const r = io();
    const code = await main(
      [
        'matrix',
        'run',
        matrix,
        '--config',
        config,
        '--only',
        'create-parcel-after-commit-delay',
        '--ledger',
        'memory:',
        '--json',
        json,
      ],
      r.io,
    );
    const report = JSON.parse(readFileSync(json, 'utf8')) as {
      rows: Array<{ id: string; passed: boolean; final: { category: string } | null }>;
    };
    console.log(r.out.join(''), r.err.join(''));
    expect(report.rows.map((x) => [x.id, x.final?.category, x.passed])).toEqual([
      ['create-parcel-after-commit-delay', 'succeeded', true],
    ]);
    expect(code).toBe(0);
  }, 120_000);
});
