#!/usr/bin/env node
// Bundles the command line (dist/cli/main.js, compiled by tsc) with the pure-JavaScript packages it
// imports into dist/bin/: main.js and one chunk per lazily loaded command. Why: Node resolves and
// loads every module file one by one, and `candor serve` reached about 570 files (undici, ajv, zod,
// yaml, jose, the MCP SDK, …) before answering its first message. Measured on the 2-core machine:
// `candor serve` start-up CPU 1.1 s → 0.6 s, `candor ops list` 0.5 s → 0.2 s. MCP clients spawn the
// gateway over stdio, and the test suite spawns the CLI hundreds of times.
//
// What stays outside the bundle, loaded from node_modules as before: Node's own modules, native
// addons (better-sqlite3, ssh2 and its optional cpu-features), the Cedar WebAssembly package (it
// reads its .wasm file beside itself), packages found at run time by name (@opentelemetry/*,
// @readme/openapi-*, pg-native). The library entry points (`candor`, `candor/mcp`, …) are not
// bundled: they stay tsc's one-file-per-module output in dist/.
//
// The bundled packages' licence texts are written to dist/bin/THIRD-PARTY-LICENSES.txt.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'dist', 'bin');

const EXTERNAL = [
  /^node:/,
  /^(better-sqlite3|ssh2|cpu-features|pg-native)(\/|$)/,
  /^@cedar-policy\//,
  /^@opentelemetry\//,
  /^@readme\//,
];
const builtin = new Set(
  (await import('node:module')).builtinModules.flatMap((m) => [m, `node:${m}`]),
);

rmSync(out, { recursive: true, force: true });
const result = await build({
  input: { main: join(root, 'dist', 'cli', 'main.js') },
  platform: 'node',
  logLevel: 'warn',
  external: (id) => builtin.has(id) || EXTERNAL.some((re) => re.test(id)),
  output: {
    dir: out,
    format: 'esm',
    entryFileNames: '[name].js',
    chunkFileNames: '[name]-[hash].js',
  },
  write: true,
});

// Which packages went into the bundle: every module id under node_modules names one.
const packages = new Map();
for (const chunk of result.output) {
  if (chunk.type !== 'chunk') continue;
  for (const id of Object.keys(chunk.modules)) {
    const at = id.lastIndexOf(`${sep}node_modules${sep}`);
    if (at < 0) continue;
    const rest = id.slice(at + 14).split(sep);
    const name = rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
    const dir = id.slice(0, at + 14) + name.split('/').join(sep);
    packages.set(name, dir);
  }
}
const sections = [];
for (const [name, dir] of [...packages].sort((a, b) => a[0].localeCompare(b[0]))) {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
  const text = file ? readFileSync(join(dir, file), 'utf8').trim() : '(no licence file shipped)';
  const license = typeof pkg.license === 'string' ? pkg.license : JSON.stringify(pkg.license);
  sections.push(`${name} ${pkg.version} (${license})\n\n${text}\n`);
}
writeFileSync(
  join(out, 'THIRD-PARTY-LICENSES.txt'),
  `The files in this folder bundle the following packages with Candor's own code.\n\n` +
    sections.join(`\n${'-'.repeat(72)}\n\n`),
);
if (!existsSync(join(out, 'main.js')))
  throw new Error(`bundle-cli: ${out}/main.js was not written`);
process.stderr.write(
  `bundle-cli: dist/bin/ (${result.output.length} files, ${packages.size} packages bundled)\n`,
);
