#!/usr/bin/env node
// Thin launcher for the CLI compiled to dist/. The published package ships dist/ (built by
// `prepack`); in a source checkout, `npm run build` builds it (`npm run demo` and `npm test` do
// when it is missing or stale). dist/bin/ is the command line bundled with its pure-JavaScript
// packages (scripts/bundle-cli.js: it starts in about half the CPU time); dist/cli/ is the same
// code one module per file, used when the bundle is absent.
import { existsSync } from 'node:fs';
import module from 'node:module';
import { fileURLToPath } from 'node:url';

// Node.js 22.1 and later keep V8's compiled code of the modules on disk between runs (in the
// system's temporary directory, or where NODE_COMPILE_CACHE says): an MCP client starts the gateway
// for every session, and each start then skips most of the compiling. Node.js 20 has no such cache.
module.enableCompileCache?.();

const bundled = new URL('../dist/bin/main.js', import.meta.url);
const entry = existsSync(fileURLToPath(bundled))
  ? bundled
  : new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write(
    'candor: dist/ is missing; in a source checkout run `npm run build` first (the published package ships it)\n',
  );
  process.exit(3);
}
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
