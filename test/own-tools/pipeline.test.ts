// init → matrix generate → matrix run --config against the OpenAPI fake, on the petstore example:
// every generated row runs (none "unknown operation"), 0 failed, 0 unsafe claims, 0 secret leaks.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

const PETSTORE = 'examples/openapi/petstore.yaml';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) },
    out,
    err,
  };
}

describe('the petstore through init, generate and run --config (OpenAPI fake)', () => {
  it('runs every generated row: 0 failed, 0 unsafe, 0 leaks', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-own-'));
    const config = join(dir, 'candor.yaml');
    const matrix = join(dir, 'matrix.yaml');
    expect(
      await main(['init', '--openapi', PETSTORE, '--out', config, '--deadline-ms', '400'], io().io),
    ).toBe(0);
    const g = io();
    expect(
      await main(
        ['matrix', 'generate', '--openapi', PETSTORE, '--config', config, '--out', matrix],
        g.io,
      ),
    ).toBe(0);
    expect(g.err.join('')).toBe('');
    const json = join(dir, 'report.json');
    const r = io();
    const code = await main(
      ['matrix', 'run', matrix, '--config', config, '--ledger', 'memory:', '--json', json],
      r.io,
    );
    const text = r.out.join('');
    console.log(text, r.err.join(''));
    const report = JSON.parse(readFileSync(json, 'utf8')) as {
      summary: Record<string, number>;
      rows: Array<{ error: string | null }>;
    };
    expect(report.rows.filter((x) => x.error !== null)).toEqual([]);
    expect(report.summary).toMatchObject({ failed: 0, unsafe: 0, secret_leaks: 0 });
    expect(code).toBe(0);
  }, 300_000);
});
