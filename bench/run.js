// Runs every benchmark in bench/ (each `*.js` file here except this one), one after another.
// Benchmarks import the built package from dist/: run `npm run build` first.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
if (!existsSync(fileURLToPath(new URL('../dist/index.js', import.meta.url)))) {
  console.error('bench: dist/ is missing — run `npm run build` first');
  process.exit(3);
}
const benches = readdirSync(here)
  .filter((f) => f.endsWith('.js') && f !== 'run.js')
  .sort();
let failed = 0;
for (const file of benches) {
  console.log(`\n== ${file}`);
  const r = spawnSync(process.execPath, [`${here}${file}`, ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  if (r.status !== 0) {
    failed++;
    console.error(`bench: ${file} exited with ${r.status ?? r.signal}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
