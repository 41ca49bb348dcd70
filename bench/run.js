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
// `--only a,b` / `--skip a,b` (names without `.js`) choose benches; every other argument is passed on.
const passOn = [];
const pick = { only: null, skip: [] };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const m = /^--(only|skip)(?:=(.*))?$/.exec(argv[i]);
  if (!m) {
    passOn.push(argv[i]);
    continue;
  }
  const value = m[2] ?? argv[++i];
  if (value === undefined || value === '') {
    console.error(`bench: --${m[1]} needs a comma-separated list of bench names`);
    process.exit(2);
  }
  const names = value.split(',').map((n) => n.trim().replace(/\.js$/, ''));
  if (m[1] === 'only') pick.only = names;
  else pick.skip.push(...names);
}
const all = readdirSync(here)
  .filter((f) => f.endsWith('.js') && f !== 'run.js')
  .map((f) => f.slice(0, -3))
  .sort();
for (const name of [...(pick.only ?? []), ...pick.skip]) {
  if (!all.includes(name)) {
    console.error(`bench: no bench named ${name} (have: ${all.join(', ')})`);
    process.exit(2);
  }
}
const benches = all
  .filter((n) => (pick.only ? pick.only.includes(n) : true) && !pick.skip.includes(n))
  .map((n) => `${n}.js`);
let failed = 0;
for (const file of benches) {
  console.log(`\n== ${file}`);
  const r = spawnSync(process.execPath, [`${here}${file}`, ...passOn], {
    stdio: 'inherit',
  });
  if (r.status !== 0) {
    failed++;
    console.error(`bench: ${file} exited with ${r.status ?? r.signal}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
