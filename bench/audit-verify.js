// Benchmark: offline verification of an exported ledger bundle against `sha256sum` over the same
// file, measured in the same run (machines here are noisy; only the ratio means much).
//   npm run build && node bench/audit-verify.js [records=200000] [rounds=3]
// Verification reads and splits the file, hashes every record twice (chain hash and RFC 9162 leaf
// hash) and about once more for the tree, checks seqs and links, and checks the signed checkpoint.
// The hashing is shared chunk by chunk between the reading thread and as many workers as
// `workersByDefault` gives (one per CPU the load average leaves idle, none on a saturated
// machine); no workers and one worker are also timed forced, for comparison. CPU time counts
// every thread; "main" is the reading thread's own (from /proc/self/task/<pid>/schedstat), the rest
// is the workers' (and libuv's reads).
// Machines here are shared: the load average is printed with the ratio.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = new URL('../dist/', import.meta.url);
if (!existsSync(fileURLToPath(new URL('ledger/chain/bundle.js', dist)))) {
  console.error('bench/audit-verify: dist/ is missing or stale; run `npm run build` first');
  process.exit(3);
}
const { sealRecord } = await import(new URL('ledger/record.js', dist).href);
const { checkpointFor, writeBundle } = await import(new URL('ledger/chain/bundle.js', dist).href);
const { verifyBundleFile, workersByDefault } = await import(
  new URL('ledger/chain/bundle-file.js', dist).href
);
const { SigType, generateKey, parseSignerKey } = await import(
  new URL('ledger/chain/note.js', dist).href
);

const N = Number(process.argv[2] ?? 200_000);
const ROUNDS = Number(process.argv[3] ?? 3);
const GENESIS = '0'.repeat(64);

function event(i) {
  return {
    kind: 'attempt_finished',
    at: 1_767_225_600_000 + i,
    session_id: 'ses_01JD0000000000000000000000',
    operation_id: `op_01JD${String(i).padStart(22, '0')}`,
    correlation_id: `case-http-${i % 1000}`,
    data: {
      attempt_id: `att_01JD${String(i).padStart(22, '0')}`,
      dispatch_state: 'sent_no_response',
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      remote_effect: 'unknown',
      rule: 'read_timeout_after_request_sent',
      phases: { started_at: i, connected_at: i + 3, request_sent_at: i + 5 },
      response: null,
      duration_ms: 30_000,
      diagnostics_ref: `diag_01JD${String(i).padStart(22, '0')}`,
      diagnostics: null,
    },
  };
}

const dir = mkdtempSync(join(tmpdir(), 'candor-bench-'));
const path = join(dir, 'ledger.bundle');
try {
  const keys = generateKey('bench.candor/log', SigType.ed25519);
  const signer = parseSignerKey(keys.signerKey).value;
  const records = [];
  let prev = GENESIS;
  for (let i = 1; i <= N; i++) {
    const { record, bytes } = sealRecord(event(i), i, prev);
    prev = record.hash;
    records.push(bytes);
  }
  await writeBundle(path, {
    origin: signer.name,
    logKey: keys.verifierKey,
    records,
    checkpoints: [checkpointFor(records, signer)],
  });
  records.length = 0;
  const bytes = statSync(path).size;
  const mb = bytes / 1e6;

  const hasSha = spawnSync('sha256sum', ['--version']).status === 0;
  const runs = { auto: [], single: [], two: [] };
  const autoPaths = new Set();
  const shaTimes = [];
  // CPU time of this (the reading) thread in seconds; null where /proc is not there.
  const mainCpu = () => {
    try {
      return (
        Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e9
      );
    } catch {
      return null;
    }
  };
  const timed = async (opts) => {
    const c = process.cpuUsage();
    const m = mainCpu();
    const t = performance.now();
    const report = await verifyBundleFile(path, opts);
    const wall = (performance.now() - t) / 1000;
    const cpu = process.cpuUsage(c);
    const main = m === null ? null : mainCpu() - m;
    if (report.code !== 'INTACT' || report.size !== N) {
      console.error(`bench/audit-verify: unexpected report ${JSON.stringify(report)}`);
      process.exit(1);
    }
    return { wall, cpu: (cpu.user + cpu.system) / 1e6, main };
  };
  const loads = [];
  for (let r = 0; r < ROUNDS; r++) {
    loads.push(loadavg()[0]);
    const w = workersByDefault(bytes);
    autoPaths.add(w === 0 ? 'no worker' : `${w} worker${w > 1 ? 's' : ''}`);
    runs.auto.push(await timed({}));
    runs.single.push(await timed({ workers: 0 }));
    runs.two.push(await timed({ workers: 1 }));
    if (hasSha) {
      const t = performance.now();
      const s = spawnSync('sha256sum', [path], { stdio: ['ignore', 'ignore', 'inherit'] });
      shaTimes.push((performance.now() - t) / 1000);
      if (s.status !== 0) process.exit(3);
    }
  }
  const best = (xs) => xs.reduce((a, b) => (b.wall < a.wall ? b : a));
  const v = best(runs.auto);
  const one = best(runs.single);
  const two = best(runs.two);
  console.log(
    `bundle: ${N} records, ${mb.toFixed(1)} MB (${(bytes / N).toFixed(0)} B/record), best of ${ROUNDS}; ` +
      `${availableParallelism()} CPUs, load average ${Math.min(...loads).toFixed(1)}-${Math.max(...loads).toFixed(1)}`,
  );
  const line = (name, x) =>
    `${name}${(N / x.wall).toFixed(0)} events/s, ${(mb / x.wall).toFixed(1)} MB/s (${x.wall.toFixed(3)} s, CPU ${x.cpu.toFixed(3)} s` +
    (x.main === null
      ? ')'
      : `: main ${x.main.toFixed(3)} s, others ${(x.cpu - x.main).toFixed(3)} s)`);
  console.log(line(`verify (${[...autoPaths].join(', ')}): `, v));
  console.log(line('  forced no worker:  ', one));
  console.log(line('  forced one worker: ', two));
  if (hasSha) {
    const s = Math.min(...shaTimes);
    console.log(`sha256sum:           ${(mb / s).toFixed(1)} MB/s (${s.toFixed(3)} s)`);
    const ratio = s / v.wall;
    console.log(
      `ratio verify/sha256sum: ${(ratio * 100).toFixed(0)}% (target >= 80%): ${ratio >= 0.8 ? 'met' : 'not met'}` +
        ` (no worker ${((s / one.wall) * 100).toFixed(0)}%, one worker ${((s / two.wall) * 100).toFixed(0)}%;` +
        ' each record is hashed twice and the tree once more, as the format requires)',
    );
  } else {
    console.log('sha256sum: not installed; no baseline in this run');
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
