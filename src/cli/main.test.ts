import { describe, expect, it } from 'vitest';
import { main } from './main.js';

async function runCli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}

describe('candor CLI', () => {
  it('exits 2 with one clear line for an unknown command', async () => {
    const r = await runCli(['nonsense']);
    expect(r.code).toBe(2);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toContain('unknown command "nonsense"');
  });

  it('prints help and version', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    expect(help.out).toContain('candor schema');
    const v = await runCli(['--version']);
    expect(v.out.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('prints the envelope JSON Schema with closed enums', async () => {
    const r = await runCli(['schema', 'envelope']);
    expect(r.code).toBe(0);
    const schema = JSON.parse(r.out) as { properties: { category: { enum: string[] } } };
    expect(schema.properties.category.enum).toContain('outcome_unknown');
  });

  it('names the bad schema in a usage error', async () => {
    const r = await runCli(['schema', 'bogus']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('unknown schema "bogus"');
  });
});
