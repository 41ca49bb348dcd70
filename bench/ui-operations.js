// `candor ui` operations page benchmark. Builds a SQLite ledger of --ops operations (default
// 1,000,000: 1% unknown, 0.1% duplicate effects, the rest succeeded, 20 actions, 50 sessions),
// starts the view on it, and times whole page requests (filters, search, deep pages) through the
// view's HTTP handler: p50 and p99 against the target (≤ 100 ms per page), with the same requests
// over a 1,000-operation ledger measured in the same run as the baseline (machines here are noisy).
// Also prints how long the view takes to read the ledger at start.
//
//   node bench/ui-operations.js [--ops N] [--requests R]
//
// Imports the built package from dist/ (run `npm run build` first).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const dist = new URL('../dist/', import.meta.url);
if (!existsSync(new URL('web/server.js', dist))) {
  console.error('bench: dist/web/ is missing — run `npm run build` first');
  process.exit(3);
}
const { openSqliteLedger } = await import(new URL('ledger/sqlite/store.js', dist).href);
const { createUi, TOKEN_COOKIE } = await import(new URL('web/server.js', dist).href);

const { values: opts } = parseArgs({
  options: {
    ops: { type: 'string', default: '1000000' },
    requests: { type: 'string', default: '20' },
  },
});
const OPS = Number(opts.ops);
const REQUESTS = Number(opts.requests);
const TARGET_MS = 100;
const dir = mkdtempSync(join(tmpdir(), 'candor-bench-ui-'));

/** Appends `n` operations in large batches; returns the build time in seconds. */
async function build(store, n) {
  const started = performance.now();
  let pending = [];
  for (let i = 0; i < n; i++) {
    const op = `op_${String(i).padStart(10, '0')}`;
    const base = {
      at: 1767225600000 + i * 10,
      session_id: `ses_${String(i % 50).padStart(4, '0')}`,
      operation_id: op,
      correlation_id: `case-${i}`,
    };
    const action = `action_${i % 20}`;
    pending.push({
      ...base,
      kind: 'operation_opened',
      data: {
        owner: 'gw-1',
        action,
        action_class: i % 20 === 0 ? 'read' : 'create',
        intent: { kind: action, subject_ref: `app:${i}`, params_digest: 'd'.repeat(64) },
        destination: { method: 'POST', route_template: '/v1/things' },
        idempotency_key: null,
        supersedes_operation_id: null,
        attempt_budget: 2,
        params: null,
      },
    });
    if (i % 1000 === 7) {
      pending.push({
        ...base,
        kind: 'operation_resolved',
        data: {
          state: 'duplicate_effect_confirmed',
          category: 'duplicate_effect',
          by: 'reconciliation',
          remote_refs: [`ref_${i}_a`, `ref_${i}_b`],
        },
      });
    } else if (i % 100 !== 3) {
      pending.push({
        ...base,
        kind: 'operation_resolved',
        data: {
          state: 'succeeded',
          category: 'succeeded',
          by: 'attempt',
          remote_refs: [`ref_${i}`],
        },
      });
    }
    if (pending.length >= 5_000) {
      await store.append(pending);
      pending = [];
    }
  }
  if (pending.length > 0) await store.append(pending);
  return (performance.now() - started) / 1000;
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function measure(n) {
  const store = openSqliteLedger(join(dir, `ops-${n}.db`), { durability: 'process' });
  const buildSeconds = await build(store, n);
  const t = performance.now();
  const ui = await createUi({
    store,
    ledger: 'sqlite:bench.db',
    hosts: ['bench:1'],
    pollMs: 3_600_000,
  });
  const loadSeconds = (performance.now() - t) / 1000;
  const headers = { host: 'bench:1', cookie: `${TOKEN_COOKIE}=${ui.token}` };
  const mid = Math.floor(n / 2);
  const paths = [
    '/',
    `/?page=${Math.max(1, Math.floor(n / 100))}`,
    '/?state=unknown',
    '/?state=succeeded&page=50',
    '/?action=action_3',
    '/?class=read&session=ses_0020',
    `/?q=case-${mid}`,
    `/?q=ref_${mid}`,
    '/?from=2026-01-01T00:00:10&to=2026-01-01T00:20:00',
  ];
  const times = [];
  const per = new Map();
  for (let r = 0; r < REQUESTS; r++) {
    for (const path of paths) {
      const s = performance.now();
      const res = await ui.app.request(path, { headers });
      const body = await res.text();
      const ms = performance.now() - s;
      if (res.status !== 200 || !body.includes('data-total'))
        throw new Error(`${path}: ${res.status}`);
      times.push(ms);
      per.set(path, [...(per.get(path) ?? []), ms]);
    }
  }
  await ui.close();
  await store.close();
  times.sort((a, b) => a - b);
  return {
    p50: percentile(times, 50),
    p99: percentile(times, 99),
    per: [...per].map(([p, ts]) => [
      p,
      percentile(
        ts.sort((a, b) => a - b),
        50,
      ),
    ]),
    buildSeconds,
    loadSeconds,
    heapMb: process.memoryUsage().heapUsed / 2 ** 20,
  };
}

try {
  console.error(`ui operations page benchmark: ${REQUESTS} rounds of 9 page requests`);
  const base = await measure(1_000);
  console.error(`  building a ledger of ${OPS.toLocaleString('en')} operations…`);
  const big = await measure(OPS);
  console.log(
    `\noperations page (whole HTTP response, 50 rows) over ${OPS.toLocaleString('en')} operations on SQLite:`,
  );
  console.log(
    `  p50 ${big.p50.toFixed(1)} ms, p99 ${big.p99.toFixed(1)} ms — ${big.p99 <= TARGET_MS ? 'met' : 'MISSED'} (≤ ${TARGET_MS} ms per page)`,
  );
  console.log(
    `  baseline (1,000 operations, same run): p50 ${base.p50.toFixed(1)} ms, p99 ${base.p99.toFixed(1)} ms; ratio p50 ×${(big.p50 / base.p50).toFixed(1)}`,
  );
  for (const [p, ms] of big.per) console.log(`  ${p.padEnd(52)} p50 ${ms.toFixed(1)} ms`);
  console.log(
    `  the view read the ledger at start in ${big.loadSeconds.toFixed(1)} s (heap ${big.heapMb.toFixed(0)} MB); ledger built in ${big.buildSeconds.toFixed(0)} s`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
