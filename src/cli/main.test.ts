import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

describe('candor upstream status', () => {
  it('says so when no upstream uses OAuth, instead of printing nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-upstream-status-'));
    try {
      const config = join(dir, 'candor.yaml');
      writeFileSync(
        config,
        readFileSync(
          join(fileURLToPath(new URL('../../examples', import.meta.url)), 'candor.yaml'),
          'utf8',
        ),
      );
      const r = await runCli(['upstream', 'status', '--config', config]);
      expect(r).toEqual({
        code: 0,
        out: 'no upstream in this configuration uses auth: oauth (see docs/upstreams.md)\n',
        err: '',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('candor CLI manners', () => {
  it('suggests the command meant, in one line, exit 2', async () => {
    const r = await runCli(['serv', '--config', 'x.yaml']);
    expect(r.code).toBe(2);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toContain('unknown command "serv" (did you mean candor serve?)');
    // Nothing close: no guess.
    expect((await runCli(['zzzzzz'])).err).not.toContain('did you mean');
  });

  it('suggests the flag meant, at the top and inside a command', async () => {
    const top = await runCli(['--versoin']);
    expect(top.code).toBe(2);
    expect(top.out).toBe('');
    expect(top.err.trim().split('\n')).toHaveLength(1);
    expect(top.err).toContain('unknown option --versoin (did you mean --version?)');
    const inner = await runCli(['ui', '--prot', '0']);
    expect(inner.code).toBe(2);
    expect(inner.err.trim().split('\n')).toHaveLength(1);
    expect(inner.err).toContain('unknown option --prot (did you mean --port?)');
  });

  it('wraps help between options: no line breaks inside brackets, no line over 100 characters', async () => {
    const texts = [(await runCli(['--help'])).out];
    const names = [...texts[0]!.matchAll(/^ {2}candor (\w+)/gm)].map((m) => m[1]!);
    expect(names).toContain('approve');
    for (const name of new Set(names)) texts.push((await runCli([name, '--help'])).out);
    for (const text of texts) {
      for (const line of text.split('\n')) {
        expect(line.length, line).toBeLessThanOrEqual(100);
        // Every bracket opened on a line is closed on it.
        let depth = 0;
        for (const ch of line) depth += ch === '[' ? 1 : ch === ']' ? -1 : 0;
        expect(depth, line).toBe(0);
      }
    }
    // The line that used to break mid-bracket is whole now.
    expect(texts[0]).toMatch(/\[--concurrency N \| --serial\]/);
    expect(texts[0]).not.toMatch(/candor demo --serial\]/);
  });
});

describe('candor matrix run --only', () => {
  it('refuses row ids the matrix does not have, naming them, before running anything', async () => {
    const file = fileURLToPath(new URL('../../examples/matrix/reference.yaml', import.meta.url));
    const r = await runCli(['matrix', 'run', file, '--only', 'nope-row,reconcile-finds-tw']);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toContain('--only: no row "nope-row", "reconcile-finds-tw"');
    expect(r.err).toContain('"reconcile-finds-tw" (did you mean reconcile-finds-two?)');
    expect((await runCli(['matrix', 'run', file, '--only', ','])).code).toBe(2);
  });
});

describe('read-only commands', () => {
  it('create nothing in an empty directory, whatever they answer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-readonly-'));
    const home = process.cwd();
    const commands = [
      ['approve', 'list'],
      ['approve', 'list', '--json'],
      ['approve', 'show', 'apr_missing'],
      ['ops', 'list'],
      ['ops', 'list', '--json'],
      ['ops', 'show', 'op_missing'],
      ['audit', 'verify', 'sqlite:./.candor/ledger.db'],
      ['vault', 'list'],
      ['vault', 'list', '--json'],
      ['ui'],
      ['recover'],
      ['schema', 'config'],
      ['transcript', 'check', 'missing.jsonl'],
      ['--help'],
      ['--version'],
    ];
    const answers: string[] = [];
    try {
      process.chdir(dir);
      for (const argv of commands) {
        const r = await runCli(argv);
        answers.push(`${argv.join(' ')} -> ${r.code}`);
        expect(readdirSync(dir), `after candor ${argv.join(' ')}`).toEqual([]);
      }
    } finally {
      process.chdir(home);
      rmSync(dir, { recursive: true, force: true });
    }
    // They did run (and answered), not stopped before looking.
    expect(answers).toContain('approve list -> 0');
    expect(answers).toContain('ops list -> 3');
  });
});

describe('candor init --openapi on a file that is no OpenAPI document', () => {
  it('says so, in one line, and writes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-init-notspec-'));
    try {
      const readme = join(dir, 'README.md');
      writeFileSync(readme, '# My service\n\nIt does things.\n\n- one\n- two\n');
      const schema = join(dir, 'schema.json');
      writeFileSync(schema, '{"$schema":"https://json-schema.org/draft/2020-12/schema"}');
      const out = join(dir, 'candor.yaml');
      for (const [file, why] of [
        [readme, 'it is not a JSON or YAML mapping'],
        [schema, 'it has no top-level "openapi" field'],
      ] as const) {
        const r = await runCli(['init', '--openapi', file, '--out', out]);
        expect(r.code).toBe(2);
        expect(r.err.trim().split('\n')).toHaveLength(1);
        expect(r.err).toContain(`${file} is not an OpenAPI document: ${why}`);
        expect(r.err).not.toContain('JSON Schema');
      }
      expect(readdirSync(dir).sort()).toEqual(['README.md', 'schema.json']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
