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

/**
 * Loaded into the measured process: its own peak RSS and CPU time (process.resourceUsage, exact
 * and portable), written to fd 3 when it exits, or on SIGUSR2 (a server is asked while serving).
 */
const HOOK = `import { writeSync } from 'node:fs';
const report = () => {
  const u = process.resourceUsage();
  writeSync(3, JSON.stringify({ rss: u.maxRSS / 1024, cpu: (u.userCPUTime + u.systemCPUTime) / 1000 }) + '\\n');
};
process.on('exit', report);
process.on('SIGUSR2', report);`;
const hook = `data:text/javascript,${encodeURIComponent(HOOK)}`;

/**
 * Runs the CLI: wall time, CPU time and peak RSS. `init` runs to its end; `fake serve` is measured
 * when it printed its URL (time to serving), then stopped.
 */
function run(label, args, untilUrl = false) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, ['--import', hook, cli, ...args], {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let stats = {};
    let wall;
    child.stdio[3].on('data', (d) => {
      stats = JSON.parse(String(d).trim().split('\n')[0]);
      if (untilUrl) child.kill('SIGINT');
    });
    child.stdout.on('data', (d) => {
      out += d;
      if (untilUrl && wall === undefined && /^http:\/\//m.test(out)) {
        wall = performance.now() - started;
        child.kill('SIGUSR2');
      }
    });
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ label, code, wall: wall ?? performance.now() - started, ...stats, out, err });
    });
  });
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
  if (r.code !== 0) console.log(r.err.split('\n').slice(-3).join('\n'));
}
