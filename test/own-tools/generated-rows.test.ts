// Generated matrices (issue 30): client-chosen ids get a value unique to the row and the run — with
// one sample id (`string`) for every row, a lookup by id sees the records of other rows — and a
// DELETE answered 204 No Content gets no rows about a body it does not have (an empty answer is
// its contract, not a malformed one). Generated on a small document, then run as written against
// the OpenAPI fake through the real engine.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { main } from '../../src/cli/main.js';
import { generateMatrixFromOpenApi } from '../../src/matrix/openapi.js';

const NOTES = `openapi: 3.0.3
info: { title: Notes, version: '1' }
paths:
  /notes:
    post:
      operationId: createNote
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [id, text, kind]
              properties:
                id: { type: string }
                text: { type: string }
                kind: { type: string, enum: [memo, todo] }
      responses:
        '201':
          description: created
          content:
            application/json:
              schema: { $ref: '#/components/schemas/Note' }
  /notes/{noteId}:
    get:
      operationId: getNote
      parameters:
        - { name: noteId, in: path, required: true, schema: { type: string } }
      responses:
        '200':
          description: ok
          content:
            application/json:
              schema: { $ref: '#/components/schemas/Note' }
    delete:
      operationId: deleteNote
      parameters:
        - { name: noteId, in: path, required: true, schema: { type: string } }
      responses:
        '204': { description: deleted }
components:
  schemas:
    Note:
      type: object
      required: [id, text]
      properties:
        id: { type: string }
        text: { type: string }
`;

type Row = { id: string; operation: string; input: Record<string, unknown> };

function io() {
  const out: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void out.push(s) },
    out,
  };
}

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'candor-generated-rows-'));
  writeFileSync(join(dir, 'notes.yaml'), NOTES);
});

const BODY_ROWS = ['body-cut-fin', 'body-cut-rst', 'invalid-json', 'missing-id'];

describe('candor matrix generate --openapi', () => {
  it('gives client-chosen ids a per-row value and a 204 DELETE no body rows', () => {
    const r = generateMatrixFromOpenApi(NOTES, 'notes.yaml');
    if (!r.ok) throw new Error(r.failure.message);
    const rows = r.value.matrix.rows as Row[];
    const creates = rows.filter((x) => x.operation === 'create_note');
    expect(creates.length).toBeGreaterThan(5);
    // The id is filled from the row's own correlation id when the row runs; enums keep a sample.
    for (const x of creates)
      expect(x.input).toMatchObject({ id: 'id-{{correlation_id}}', kind: 'memo' });
    const deletes = rows.filter((x) => x.operation === 'delete_note').map((x) => x.id);
    expect(deletes.length).toBeGreaterThan(0);
    for (const suffix of BODY_ROWS) expect(deletes).not.toContain(`delete-note-${suffix}`);
    expect(deletes).toContain('delete-note-after-commit-delay');
    // A body answer keeps its body rows.
    expect(rows.map((x) => x.id)).toContain('get-note-invalid-json');
  });

  it('with --config: unique ids, no body rows for the 204 DELETE, and every row holds against the OpenAPI fake', async () => {
    const spec = join(dir, 'notes.yaml');
    const config = join(dir, 'candor.yaml');
    const matrix = join(dir, 'matrix.yaml');
    expect(
      await main(['init', '--openapi', spec, '--out', config, '--deadline-ms', '1500'], io().io),
    ).toBe(0);
    expect(
      await main(
        ['matrix', 'generate', '--openapi', spec, '--config', config, '--out', matrix],
        io().io,
      ),
    ).toBe(0);
    const rows = (
      parse(readFileSync(matrix, 'utf8')) as {
        rows: Array<Row & { setup?: { input?: Record<string, unknown> } }>;
      }
    ).rows;
    for (const x of rows.filter((y) => y.operation === 'create_note'))
      expect(x.input.id).toBe('id-{{correlation_id}}');
    // The setup record of the on-record rows is made under a unique id too.
    for (const x of rows.filter((y) => y.setup?.input !== undefined))
      expect(x.setup!.input!.id).toBe('id-{{correlation_id}}');
    const deletes = rows.filter((x) => x.operation === 'delete_note').map((x) => x.id);
    for (const suffix of BODY_ROWS) expect(deletes).not.toContain(`delete-note-${suffix}`);

    const json = join(dir, 'report.json');
    const r = io();
    const code = await main(
      ['matrix', 'run', matrix, '--config', config, '--ledger', 'memory:', '--json', json],
      r.io,
    );
    const report = JSON.parse(readFileSync(json, 'utf8')) as {
      summary: Record<string, number>;
      rows: Array<{
        id: string;
        passed: boolean;
        error: string | null;
        oracle: { detail: string };
      }>;
    };
    expect(
      report.rows.filter((x) => !x.passed).map((x) => `${x.id}: ${x.error ?? x.oracle.detail}`),
    ).toEqual([]);
    expect(report.summary.unsafe).toBe(0);
    expect(code).toBe(0);
  }, 300_000);
});
