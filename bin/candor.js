#!/usr/bin/env node
// Thin launcher: the CLI is compiled to dist/ by `npm run build` (run by `npm ci` via `prepare`).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write('candor: not built yet; run `npm run build` (npm ci does this for you)\n');
  process.exit(3);
}
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
