// A unit test file that mocks a module (vi.mock, vi.doMock) must run in the `unit-isolated`
// project: the `unit` project shares one module graph per worker, where an earlier file may have
// loaded the real module before the mock (vitest.config.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';
import { MOCKING_UNIT_FILES } from '../vitest.config.js';

const ROOT = join(import.meta.dirname, '..');

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? testFiles(join(dir, e.name))
      : e.name.endsWith('.test.ts')
        ? [join(dir, e.name)]
        : [],
  );
}

it('every unit test file that mocks a module runs isolated, and the list names only such files', () => {
  const mocking = testFiles(join(ROOT, 'src'))
    .filter((f) => /\bvi\.(do)?[mM]ock\(/.test(readFileSync(f, 'utf8')))
    .map((f) => relative(ROOT, f).split('\\').join('/'))
    .sort();
  expect(mocking.length).toBeGreaterThan(0);
  expect([...MOCKING_UNIT_FILES].sort()).toEqual(mocking);
});
