// `candor init --openapi` and `candor fake serve --openapi` on GitHub's published description
// (devDependency @octokit/openapi, 1,223 operations), each in its own process: wall time, CPU time
// and peak RSS, against the same commands on the petstore example measured in the same run
// (ratios: this machine is shared and noisy). Targets (issue 35): ≤ 10 s and ≤ 400 MB each, judged
// on the median wall time and the largest peak RSS of `--runs N` (default 3) interleaved runs; the
// load average is printed with them, since wall time on a busy machine is mostly waiting for a core.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
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
    let stopping = false;
    child.stdio[3].on('data', (d) => {
      // The first report is the one asked for while serving (or the one at exit); a server is
      // stopped once, as Ctrl-C would: a second SIGINT while it closes would kill it outright.
      if (stopping) return;
      stats = JSON.parse(String(d).trim().split('\n')[0]);
      if (untilUrl) {
        stopping = true;
        child.kill('SIGINT');
      }
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

const runsAt = process.argv.indexOf('--runs');
const runs = runsAt > 0 ? Number(process.argv[runsAt + 1]) : 3;
if (!Number.isInteger(runs) || runs < 1) {
  console.error(
    `openapi-scale: --runs must be a whole number ≥ 1, not "${process.argv[runsAt + 1] ?? ''}"`,
  );
  process.exit(2);
}
const LIMIT_S = 10;
const LIMIT_MB = 400;
const commands = [
  ['init petstore', ['init', '--openapi', petstore, '--out', join(dir, 'p.yaml'), '--force']],
  ['init github', ['init', '--openapi', github, '--out', join(dir, 'g.yaml'), '--force']],
  ['fake serve petstore', ['fake', 'serve', '--openapi', petstore, '--port', '0'], true],
  ['fake serve github', ['fake', 'serve', '--openapi', github, '--port', '0'], true],
];
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
const loadBefore = load();
// Interleaved rounds: a burst of load from another process lands on every command alike.
const results = new Map(commands.map(([label]) => [label, []]));
for (let round = 0; round < runs; round++)
  for (const [label, args, untilUrl] of commands)
    results.get(label).push(await run(label, args, untilUrl));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const sec = (ms) => `${(ms / 1000).toFixed(2)} s`;
console.log(
  `openapi-scale (GitHub: 1,223 operations; targets ≤ ${LIMIT_S} s and ≤ ${LIMIT_MB} MB each)` +
    `\n  ${runs} interleaved runs each; ${cpus().length} cores, load average ${loadBefore} before, ${load()} after`,
);
for (const [label] of commands) {
  const rs = results.get(label);
  const failed = rs.find((r) => r.code !== 0);
  const wall = median(rs.map((r) => r.wall));
  const cpu = median(rs.map((r) => r.cpu ?? NaN));
  const rss = Math.max(...rs.map((r) => r.rss ?? NaN));
  const ref = label.includes('github')
    ? median(results.get(label.replace('github', 'petstore')).map((r) => r.wall))
    : undefined;
  const verdict = label.includes('github')
    ? `  ${wall <= LIMIT_S * 1000 ? 'within' : 'OVER'} ${LIMIT_S} s, ${rss <= LIMIT_MB ? 'within' : 'OVER'} ${LIMIT_MB} MB`
    : '';
  console.log(
    `  ${label.padEnd(20)} ${failed ? `exit ${failed.code}` : 'exit 0'}  wall ${sec(wall)}` +
      ` (min ${sec(Math.min(...rs.map((r) => r.wall)))}, max ${sec(Math.max(...rs.map((r) => r.wall)))})` +
      `  cpu ${sec(cpu)}  peak RSS ${rss.toFixed(0)} MB` +
      (ref ? `  (${(wall / ref).toFixed(1)}x petstore)` : '') +
      verdict,
  );
  if (failed) console.log(failed.err.split('\n').slice(-3).join('\n'));
}
