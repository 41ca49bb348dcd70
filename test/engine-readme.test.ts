// src/engine/README.md is the newcomer's map of the engine (issue 32): it must not name a file that
// is gone, and every engine file must have its row in the table of files.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const engine = join(root, 'src', 'engine');

/** Every `file.ext` in backticks: engine files by name, others from src/ or the repository root. */
function namedFiles(markdown: string): string[] {
  const names = [...markdown.matchAll(/`([\w./-]+\.(?:ts|js|json|md|yaml))`/g)].map((m) => m[1]!);
  return [...new Set(names)].sort();
}

/** The first column of the "## Files" table. */
function tableFiles(markdown: string): string[] {
  const section = markdown.split(/^## Files$/m)[1] ?? '';
  return [...section.matchAll(/^\|\s*`([^`]+)`\s*\|/gm)].map((m) => m[1]!);
}

function exists(name: string): boolean {
  return [join(engine, name), join(root, 'src', name), join(root, name)].some((p) => existsSync(p));
}

describe('src/engine/README.md', () => {
  const readme = readFileSync(join(engine, 'README.md'), 'utf8');

  it('names only files that exist', () => {
    const named = namedFiles(readme);
    expect(named).toContain('drive.ts');
    expect(named.filter((n) => !exists(n))).toEqual([]);
  });

  it('has a row for every engine file, once', () => {
    const files = readdirSync(engine)
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
      .sort();
    const rows = tableFiles(readme);
    expect(rows.length, 'a file has two rows').toBe(new Set(rows).size);
    expect([...rows].sort()).toEqual(files);
  });

  it('would catch a missing file and a missing row', () => {
    const sample = [
      'See `drive.ts`, `core/transport.ts` and `gone.ts`.',
      '## Files',
      '| file | holds |',
      '| --- | --- |',
      '| `drive.ts` | the loop |',
    ].join('\n');
    expect(namedFiles(sample).filter((n) => !exists(n))).toEqual(['gone.ts']);
    expect(tableFiles(sample)).toEqual(['drive.ts']);
  });
});
