// `candor matrix generate --openapi SPEC [--out FILE]`: exit codes and outputs.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parseMatrix } from '../../matrix/load.js';
import { CliUsageError } from '../io.js';
import { run } from './matrix-generate.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-matrix-generate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const example = fileURLToPath(
  new URL('../../../examples/openapi/reference-api.yaml', import.meta.url),
);

function capture() {
  const seen = { out: '', err: '' };
  return {
    io: { out: (s: string) => void (seen.out += s), err: (s: string) => void (seen.err += s) },
    seen,
  };
}

describe('candor matrix generate', () => {
  it('prints a matrix that loads as a valid matrix file', async () => {
    const { io, seen } = capture();
    expect(await run(['--openapi', example], io)).toBe(0);
    const loaded = parseMatrix(seen.out);
    expect(loaded.ok && loaded.value.rows.length).toBe(81);
    expect(seen.err).toBe('');
  });

  it('writes the matrix with --out and says how many rows', async () => {
    const { io, seen } = capture();
    const out = join(dir, 'generated.yaml');
    expect(await run([`--openapi=${example}`, '--out', out], io)).toBe(0);
    expect(seen.out).toMatch(/^wrote 81 rows for 9 operations to .*generated\.yaml/);
    expect(parseMatrix(readFileSync(out, 'utf8')).ok).toBe(true);
  });

  it('exits 2 naming the file and field of a bad spec', async () => {
    const spec = join(dir, 'spec.yaml');
    writeFileSync(spec, 'openapi: 3.1.0\npaths:\n  /v1/x:\n    post: {operationId: [a]}\n');
    const { io, seen } = capture();
    expect(await run(['--openapi', spec], io)).toBe(2);
    expect(seen.err).toBe(
      `candor matrix generate: ${spec}: paths./v1/x.post.operationId: expected a string, got ["a"]\n`,
    );
    expect(seen.out).toBe('');
  });

  it('names an operation without an operationId from its method and path, as init does', async () => {
    const spec = join(dir, 'anon.yaml');
    writeFileSync(spec, 'openapi: 3.1.0\npaths:\n  /v1/x:\n    post: {responses: {}}\n');
    const { io, seen } = capture();
    expect(await run(['--openapi', spec], io)).toBe(0);
    expect(seen.out).toContain('operation: post_v1_x\n');
    expect(seen.out).toContain('# no operationId: named from POST /v1/x');
  });

  it('exits 3 when the spec cannot be read; an --out into a missing directory is misuse', async () => {
    const a = capture();
    expect(await run(['--openapi', join(dir, 'absent.yaml')], a.io)).toBe(3);
    expect(a.seen.err).toMatch(/cannot read .*absent\.yaml: ENOENT/);
    const b = capture();
    await expect(
      run(['--openapi', example, '--out', join(dir, 'no', 'such', 'x.yaml')], b.io),
    ).rejects.toThrow(/--out: the directory .* does not exist/);
  });

  it('treats a missing --openapi or an unknown flag as misuse', async () => {
    const { io } = capture();
    await expect(run([], io)).rejects.toBeInstanceOf(CliUsageError);
    await expect(run(['--openapi', example, '--spec', 'x'], io)).rejects.toThrow(/--spec/);
  });
});
