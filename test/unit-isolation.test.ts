// A test file that mocks a module (vi.mock, vi.doMock) or changes what the whole process sees
// (process.env, globals, fake timers, the working directory) must run in the `isolated` project:
// the `unit` and `integration` projects share one module graph and one process per worker, where an
// earlier file may have loaded the real module before the mock, and a later file would inherit the
// change (vitest.config.ts).
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';
import { ISOLATED_FILES } from '../vitest.config.js';

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

/** What only a process of its own may do. */
const PROCESS_WIDE = [
  /\bvi\.(do)?[mM]ock\(/,
  /\bvi\.stub(Env|Global)\(/,
  /\bvi\.useFakeTimers\(/,
  /\bprocess\.chdir\(/,
  /\bprocess\.env(\.\w+|\[[^\]]+\])\s*(=[^=]|\?\?=|\|\|=)/,
  /\bdelete\s+process\.env\b/,
  /\bObject\.assign\(\s*process\.env\b/,
  /\bglobalThis\.\w+\s*=[^=]/,
];

it('every test file that mocks a module or changes the process runs isolated, and the list names only such files', () => {
  const self = relative(ROOT, import.meta.filename)
    .split('\\')
    .join('/');
  const files = [...testFiles(join(ROOT, 'src')), ...testFiles(join(ROOT, 'test'))]
    .map((f) => relative(ROOT, f).split('\\').join('/'))
    .filter((f) => f !== self);
  const processWide = files
    .filter((f) => PROCESS_WIDE.some((re) => re.test(readFileSync(join(ROOT, f), 'utf8'))))
    .sort();
  expect(processWide.length).toBeGreaterThan(0);
  expect([...ISOLATED_FILES].sort()).toEqual(processWide);
});

it('the patterns find what they are for (teeth)', () => {
  for (const line of [
    "vi.mock('node:worker_threads')",
    "vi.stubEnv('CI', 'false')",
    'vi.useFakeTimers()',
    "process.chdir('/')",
    "process.env.CANDOR_X = '1'",
    "process.env['CANDOR_X'] = '1'",
    'process.env.CANDOR_X ??= "1"',
    'delete process.env.CANDOR_X',
    'Object.assign(process.env, extra)',
    'globalThis.fetch = fake',
  ])
    expect(
      PROCESS_WIDE.some((re) => re.test(line)),
      line,
    ).toBe(true);
  for (const line of [
    "if (process.env.CI === 'true')",
    "const x = process.env['PATH'] ?? ''",
    'env: { ...process.env, A: 1 }',
    'globalThis.fetch === f',
  ])
    expect(
      PROCESS_WIDE.some((re) => re.test(line)),
      line,
    ).toBe(false);
});
