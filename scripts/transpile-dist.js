#!/usr/bin/env node
// The test suite's build of dist/: every source module with its types stripped, nothing else
// changed, written where `tsc -p tsconfig.build.json` writes it. Why: tests that spawn the command
// line or load the library from dist/ need JavaScript, not type checking — `npm run check` (and
// `npm run build` before a pack) type-check. In a fresh clone the type-checking build took 13 to
// 20 s on the 2-core machine before the first test could start, with one core idle; this takes
// about half a second.
//
// The transpiler is oxc's, through rolldown (already a devDependency: it bundles the command
// line). A file oxc would rewrite through a runtime helper (the web view's tagged templates) goes
// through TypeScript's transpileModule instead, which needs none. No declarations and no source
// maps are written: `npm run build` writes those, and a pack always runs it (`prepack`).
//
//   node scripts/transpile-dist.js      then `node scripts/bundle-cli.js`, as test/global-setup does
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'rolldown/experimental';

const root = fileURLToPath(new URL('..', import.meta.url));
const src = join(root, 'src');
const out = join(root, 'dist');

/** The modules tsconfig.build.json compiles: src/ without tests and contract suites. */
function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = join(dir, d.name);
    if (d.isDirectory()) return sources(p);
    const built =
      d.name.endsWith('.ts') &&
      !d.name.endsWith('.test.ts') &&
      !d.name.endsWith('.case.ts') &&
      !d.name.endsWith('.d.ts');
    return built ? [p] : [];
  });
}

let ts;
function viaTypeScript(file, source) {
  ts ??= createRequire(import.meta.url)('typescript');
  return ts.transpileModule(source, {
    fileName: file,
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2023,
      verbatimModuleSyntax: true,
    },
  }).outputText;
}

let count = 0;
for (const file of sources(src)) {
  const source = readFileSync(file, 'utf8');
  const result = transformSync(file, source, {
    lang: 'ts',
    sourceType: 'module',
    target: 'es2023',
    typescript: { onlyRemoveTypeImports: true },
  });
  if (result.errors.length > 0) {
    const first = result.errors[0];
    console.error(`transpile-dist: ${relative(root, file)}: ${first.message ?? String(first)}`);
    process.exit(1);
  }
  const js =
    Object.keys(result.helpersUsed ?? {}).length === 0 ? result.code : viaTypeScript(file, source);
  const dest = join(out, relative(src, file)).replace(/\.ts$/, '.js');
  mkdirSync(dirname(dest), { recursive: true });
  writeFileSync(dest, js);
  count++;
}
console.log(`transpile-dist: dist/ (${count} modules, types stripped)`);
