// `candor init --openapi` and `candor fake serve --openapi` on GitHub's published description
// (devDependency @octokit/openapi, 1,223 operations), each in its own process: wall time, CPU time
// and peak RSS, against the same commands on the petstore example measured in the same run
// (ratios: this machine is shared and noisy). Targets (issue 35): ≤ 10 s and ≤ 400 MB each.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../bin/candor.js', import.meta.url));
const petstore = fileURLToPath(new URL('../examples/openapi/petstore.yaml', import.meta.url));
let github;
try {
  github = createRequire(import.meta.url).resolve('@octokit/openapi/generated/api.github.com.json');
} catch {
  console.log('openapi-scale: skipped (devDependency @octokit/openapi is not installed)');
  process.exit(0);
}
const dir = mkdtempSync(join(tmpdir(), 'candor-bench-openapi-'));

/** Runs the CLI; for `fake serve`, stops it once it printed its URL: the time is time-to-serving. */
function measure(args, untilUrl) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (untilUrl && /^http:\/\//m.test(out)) child.kill('SIGINT');
    });
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('exit', (code) => {
      const wall = performance.now() - started;
      resolve({ code, wall, out, err });
    });
  });
}

/** Peak RSS and CPU of a child, measured by running it under /usr/bin/time when present. */
async function run(label, args, untilUrl = false) {
  const timeFmt = ['-f', '%M %U %S'];
  const hasTime = await new Promise((r) =>
    spawn('/usr/bin/time', ['--version'], { stdio: 'ignore' })
      .on('error', () => r(false))
      .on('exit', () => r(true)),
  );
  let res;
  if (hasTime && !untilUrl) {
    res = await new Promise((resolve, reject) => {
      const started = performance.now();
      const child = spawn('/usr/bin/time', [...timeFmt, process.execPath, cli, ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (d) => (err += d));
      child.on('error', reject);
      child.on('exit', (code) => {
        const [kb, user, sys] = err.trim().split('\n').at(-1).split(' ').map(Number);
        resolve({
          code,
          wall: performance.now() - started,
          rss: kb / 1024,
          cpu: (user + sys) * 1000,
          err,
        });
      });
    });
  } else res = await measure(args, untilUrl);
  return { label, ...res };
}

const rows = [];
rows.push(
  await run('init petstore', [
    'init',
    '--openapi',
    petstore,
    '--out',
    join(dir, 'p.yaml'),
    '--force',
  ]),
);
rows.push(
  await run('init github', ['init', '--openapi', github, '--out', join(dir, 'g.yaml'), '--force']),
);
rows.push(await run('fake serve petstore', ['fake', 'serve', '--openapi', petstore], true));
rows.push(await run('fake serve github', ['fake', 'serve', '--openapi', github], true));
const base = (name) => rows.find((r) => r.label === name);
console.log('openapi-scale (GitHub: 1,223 operations; targets ≤ 10 s, ≤ 400 MB)');
for (const r of rows) {
  const ref = r.label.includes('github') ? base(r.label.replace('github', 'petstore')) : null;
  console.log(
    `  ${r.label.padEnd(20)} exit ${r.code}  wall ${(r.wall / 1000).toFixed(2)} s` +
      (r.cpu !== undefined ? `  cpu ${(r.cpu / 1000).toFixed(2)} s` : '') +
      (r.rss !== undefined ? `  peak RSS ${r.rss.toFixed(0)} MB` : '') +
      (ref ? `  (${(r.wall / ref.wall).toFixed(1)}x petstore)` : ''),
  );
  if (r.code !== 0 && !r.label.startsWith('fake'))
    console.log(r.err.split('\n').slice(-3).join('\n'));
}
