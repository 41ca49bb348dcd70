// Wall time of the reference matrix (`candor demo`: 80 HTTP rows against the fake, 14 SSH rows
// against a private sshd when one is installed), rows four at a time against `--serial` measured in
// the same run, and whether both runs gave the same row results (the --json reports compared row
// by row: claims, follow-ups, every assertion, oracle verdicts, secret checks).
//   npm run build && node bench/demo-wall.js
// Target: the default (concurrent) run ≤ 8 s with 0 unsafe claims and 0 secret leaks.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../bin/candor.js', import.meta.url));
const matrix = fileURLToPath(new URL('../examples/matrix/reference.yaml', import.meta.url));
if (!existsSync(fileURLToPath(new URL('../dist/cli/main.js', import.meta.url)))) {
  console.error('bench/demo-wall: dist/ is missing — run `npm run build` first');
  process.exit(3);
}
const TARGET_S = 8;
const dir = mkdtempSync(join(tmpdir(), 'candor-bench-demo-'));

function run(name, extra) {
  const json = join(dir, `${name}.json`);
  const t = performance.now();
  const r = spawnSync(
    process.execPath,
    [
      bin,
      'matrix',
      'run',
      matrix,
      '--quiet',
      '--json',
      json,
      '--ledger',
      `sqlite:${join(dir, `${name}.db`)}`,
      ...extra,
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  const secs = (performance.now() - t) / 1000;
  if (!existsSync(json)) {
    console.error(`bench/demo-wall: ${name} run wrote no report (exit ${r.status})\n${r.stderr}`);
    process.exit(3);
  }
  return { secs, report: JSON.parse(readFileSync(json, 'utf8')) };
}

const outcome = (r) =>
  JSON.stringify({
    id: r.id,
    first: r.envelope && [r.envelope.category, r.envelope.retry, r.envelope.remote_effect],
    final: r.final && [r.final.category, r.final.retry, r.final.remote_effect],
    checks: Object.values(r.assertions).map((a) => [a.ok, a.actual]),
    oracle: r.oracle.verdict,
    secret: r.secret_in_result,
    passed: r.passed,
    skipped: r.skipped ?? null,
  });

try {
  const serial = run('serial', ['--serial']);
  const together = run('concurrent', []);
  const s = together.report.summary;
  const differ = together.report.rows.filter(
    (r, i) => outcome(r) !== outcome(serial.report.rows[i] ?? {}),
  );
  console.log(
    `reference matrix: ${s.rows} rows (${s.skipped} skipped), serial ${serial.secs.toFixed(1)} s, ` +
      `4 at a time ${together.secs.toFixed(1)} s (ratio ${(serial.secs / together.secs).toFixed(2)}x)`,
  );
  console.log(
    `rows that differ from the serial run: ${differ.length}${differ.length ? ` (${differ.map((r) => r.id).join(', ')})` : ''}; ` +
      `${s.failed} failed, ${s.unsafe} unsafe claims, ${s.secret_leaks} secret leaks`,
  );
  const met =
    together.secs <= TARGET_S && s.unsafe === 0 && s.secret_leaks === 0 && differ.length === 0;
  console.log(
    `target wall time <= ${TARGET_S} s, same rows, 0 unsafe, 0 leaks: ${met ? 'met' : 'not met'}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
