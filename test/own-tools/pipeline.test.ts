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
      await main(
        ['init', '--openapi', PETSTORE, '--out', config, '--deadline-ms', '1500'],
        io().io,
      ),
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

  it('teeth: a key claimed honoured that the service ignores is reported, and the rows it duplicates fail', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-own-'));
    const config = join(dir, 'candor.yaml');
    const matrix = join(dir, 'matrix.yaml');
    expect(
      await main(
        ['init', '--openapi', PETSTORE, '--out', config, '--deadline-ms', '1500'],
        io().io,
      ),
    ).toBe(0);
    expect(
      await main(
        ['matrix', 'generate', '--openapi', PETSTORE, '--config', config, '--out', matrix],
        io().io,
      ),
    ).toBe(0);
    const only = [
      'before-bytes',
      'after-headers-rst',
      'after-body-fin',
      'after-commit-delay',
      'body-cut-fin',
      'body-cut-rst',
      'after-forward-rst',
      'invalid-json',
    ]
      .map((s) => `place-order-${s}`)
      .join(',');
    const json = join(dir, 'rows.json');
    const own = join(dir, 'own.json');
    const runWith = async (mode: string): Promise<{ code: number; text: string }> => {
      const r = io();
      const code = await main(
        [
          'matrix',
          'run',
          matrix,
          '--config',
          config,
          '--idempotency',
          mode,
          '--only',
          only,
          '--ledger',
          'memory:',
          '--json',
          json,
          '--report',
          own,
          '--quiet',
        ],
        r.io,
      );
      return { code, text: r.out.join('') };
    };
    // Positive control: the same rows pass when the fake honours the key.
    const honest = await runWith('honoured');
    expect(honest.text).toContain('key claimed honoured: HONOURED');
    expect(honest.code).toBe(0);

    const lie = await runWith('ignored');
    const report = JSON.parse(readFileSync(json, 'utf8')) as {
      rows: Array<{
        id: string;
        passed: boolean;
        assertions: { remote_state: { actual: { applied_writes: number } } };
      }>;
    };
    const failed = report.rows.filter((r) => !r.passed);
    // The engine trusts the claimed key and repeats an applied order: a duplicate.
    expect(failed.map((r) => r.id).sort()).toEqual([
      'place-order-after-commit-delay',
      'place-order-after-forward-rst',
      'place-order-body-cut-fin',
      'place-order-body-cut-rst',
    ]);
    expect(failed.map((r) => r.assertions.remote_state.actual.applied_writes)).toEqual([
      2, 2, 2, 2,
    ]);
    const findings = JSON.parse(readFileSync(own, 'utf8')) as {
      actions: Array<{
        action: string;
        idempotency: { probe: { verdict: string } | null };
        fixes: string[];
      }>;
      problems: number;
    };
    const po = findings.actions.find((a) => a.action === 'place_order')!;
    expect(po.idempotency.probe?.verdict).toBe('ignored');
    expect(po.fixes[0]).toMatch(
      /^destinations\.petstore-api-key-keyed\.idempotency\.honoured: false/,
    );
    expect(findings.problems).toBe(1);
    expect(lie.text).toContain('key claimed honoured: IGNORED');
    expect(lie.code).toBe(1);
  }, 300_000);
});
