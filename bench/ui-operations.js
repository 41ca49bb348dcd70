// `candor ui` operations page benchmark. Builds a SQLite ledger of --ops operations (default
// 1,000,000: 1% open, 0.1% duplicate effects, 0.01% failed, the rest succeeded; 20 actions, 50
// sessions) through the store's ordinary append path (so the listing is what append maintains and
// the chain is one `audit verify` accepts), starts the view on it, and times whole page requests
// through the view's HTTP handler: the first page, deep pages (keyset cursors in the middle and at
// the end) and filtered pages. Prints p50 and p99 per group against the target (≤ 100 ms per
// page), as ratios against the same requests over a 1,000-operation ledger measured in the same
// run (machines here are noisy), and how long the view takes to start.
//
//   node bench/ui-operations.js [--ops N] [--requests R] [--verify] [--keep PATH]
//
// --verify runs `audit verify` over the big ledger (minutes); --keep writes it to PATH and keeps it.
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
const { verifyStore } = await import(new URL('ledger/chain/export.js', dist).href);

const { values: opts } = parseArgs({
  options: {
    ops: { type: 'string', default: '1000000' },
    requests: { type: 'string', default: '20' },
    verify: { type: 'boolean', default: false },
    keep: { type: 'string' },
  },
});
const OPS = Number(opts.ops);
const REQUESTS = Number(opts.requests);
const TARGET_MS = 100;
const T0 = 1767225600000;
const dir = mkdtempSync(join(tmpdir(), 'candor-bench-ui-'));

/** Appends `n` operations in batches of 10,000 events; returns the build time in seconds. */
async function build(store, n) {
  const started = performance.now();
  let pending = [];
  for (let i = 0; i < n; i++) {
    const op = `op_${String(i).padStart(10, '0')}`;
    const base = {
      at: T0 + i * 10,
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
    const resolved = (state, category, refs) =>
      pending.push({
        ...base,
        kind: 'operation_resolved',
        data: { state, category, by: 'attempt', remote_refs: refs },
      });
    if (i % 1000 === 7)
      resolved('duplicate_effect_confirmed', 'duplicate_effect', [`ref_${i}_a`, `ref_${i}_b`]);
    else if (i % 10_000 === 9) resolved('failed', 'confirmed_rejection', []);
    else if (i % 100 !== 3) resolved('succeeded', 'succeeded', [`ref_${i}`]);
    if (pending.length >= 10_000) {
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

/** Page requests by group; cursors are taken from the ledger itself (a row's listing key). */
async function pages(store, n) {
  const cursorAt = async (i) => {
    const { rows } = await store.operations({ search: `op_${String(i).padStart(10, '0')}` });
    const r = rows[0];
    return `${r.priority}.${r.opened_at}.${r.first_seq}`;
  };
  const mid = Math.floor(n / 2) + 1; // a succeeded operation
  const deep = await cursorAt(mid);
  const end = await cursorAt(101);
  return {
    first: ['/'],
    deep: [`/?after=${deep}`, `/?before=${deep}`, `/?after=${end}`],
    filtered: [
      '/?state=open,unknown',
      '/?state=failed',
      `/?state=succeeded&after=${deep}`,
      '/?action=action_3',
      `/?action=action_3&after=${deep}`,
      '/?class=read&session=ses_0020',
      `/?q=case-${mid}`,
      `/?q=ref_${mid}`,
      '/?from=2026-01-01T00:00:01&to=2026-01-01T00:20:00',
    ],
  };
}

async function measure(n, path) {
  const store = openSqliteLedger(path, { durability: 'process' });
  const buildSeconds = await build(store, n);
  const t = performance.now();
  const ui = await createUi({
    store,
    ledger: 'sqlite:bench.db',
    hosts: ['bench:1'],
    pollMs: 3_600_000,
  });
  const startMs = performance.now() - t;
  const headers = { host: 'bench:1', cookie: `${TOKEN_COOKIE}=${ui.token}` };
  const groups = await pages(store, n);
  const times = { first: [], deep: [], filtered: [] };
  const per = new Map();
  for (let r = 0; r < REQUESTS; r++) {
    for (const [group, paths] of Object.entries(groups)) {
      for (const p of paths) {
        const s = performance.now();
        const res = await ui.app.request(p, { headers });
        const body = await res.text();
        const ms = performance.now() - s;
        if (res.status !== 200 || !body.includes('data-total'))
          throw new Error(`${p}: ${res.status}`);
        if (r === 0 && !body.includes('data-op=')) throw new Error(`${p}: no row on the page`);
        times[group].push(ms);
        const key = p.replace(/-?\d+\.\d+\.\d+/, 'CURSOR');
        per.set(key, [...(per.get(key) ?? []), ms]);
      }
    }
  }
  await ui.close();
  let verified = null;
  if (opts.verify && n === OPS) verified = (await verifyStore(store, {})).code;
  await store.close();
  const stats = (ts) => {
    const s = [...ts].sort((a, b) => a - b);
    return { p50: percentile(s, 50), p99: percentile(s, 99) };
  };
  return {
    groups: Object.fromEntries(Object.entries(times).map(([g, ts]) => [g, stats(ts)])),
    all: stats(Object.values(times).flat()),
    per: [...per].map(([p, ts]) => [p, stats(ts).p50]),
    buildSeconds,
    startMs,
    verified,
  };
}

try {
  console.error(`ui operations page benchmark: ${REQUESTS} rounds of 13 page requests`);
  const base = await measure(1_000, join(dir, 'base.db'));
  console.error(`  building a ledger of ${OPS.toLocaleString('en')} operations…`);
  const big = await measure(OPS, opts.keep ?? join(dir, 'big.db'));
  console.log(
    `\noperations page (whole HTTP response, 50 rows) over ${OPS.toLocaleString('en')} operations on SQLite,`,
  );
  console.log(`baseline: the same requests over 1,000 operations in this run\n`);
  console.log('  group      p50 ms  p99 ms   ×base p50  ×base p99  target');
  for (const g of ['first', 'deep', 'filtered']) {
    const b = big.groups[g];
    const a = base.groups[g];
    console.log(
      `  ${g.padEnd(9)} ${b.p50.toFixed(1).padStart(7)} ${b.p99.toFixed(1).padStart(7)}   ${(b.p50 / a.p50).toFixed(2).padStart(9)}  ${(b.p99 / a.p99).toFixed(2).padStart(9)}  ${b.p99 <= TARGET_MS ? 'met' : 'MISSED'} (p99 ≤ ${TARGET_MS} ms)`,
    );
  }
  console.log(
    `  all       ${big.all.p50.toFixed(1).padStart(7)} ${big.all.p99.toFixed(1).padStart(7)}   ${(big.all.p50 / base.all.p50).toFixed(2).padStart(9)}  ${(big.all.p99 / base.all.p99).toFixed(2).padStart(9)}`,
  );
  console.log('\n  per request (p50 ms):');
  for (const [p, ms] of big.per) console.log(`    ${p.padEnd(52)} ${ms.toFixed(1)}`);
  console.log(
    `\n  the view started in ${big.startMs.toFixed(0)} ms over ${OPS.toLocaleString('en')} operations (${base.startMs.toFixed(0)} ms over 1,000); ledger built through append in ${big.buildSeconds.toFixed(0)} s`,
  );
  if (big.verified !== null) console.log(`  audit verify of the big ledger: ${big.verified}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
