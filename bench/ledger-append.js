// Ledger append benchmark. Prints, from one run, events/s of the ledger stores (memory, SQLite in
// both durability modes, PostgreSQL with 1 and 4 writers in one process, and with 1 and 4
// gateways: separate processes, each its own store, one ledger) next to a raw-driver baseline
// measured in the same run (plain single-row inserts with the same durability, by as many clients
// or processes), the CPU time per append of this process, and the time of unresolved() over a
// ledger of 1,000,000 operations. Machines here are noisy: ledger and baseline alternate over
// several rounds and the median of each is reported.
//
//   node bench/ledger-append.js [--seconds S] [--rounds R] [--ops N] [--skip-postgres]
//                               [--only-postgres]
//
// Imports the built package from dist/ (run `npm run build` first).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(`Usage: node bench/ledger-append.js [--seconds S] [--rounds R] [--ops N]
                                 [--skip-postgres | --only-postgres]

events/s of each ledger store beside a raw-driver baseline measured in the same run (median of the
rounds; ledger and baseline alternate), CPU time per append, and unresolved() over N operations.
  --seconds S       length of each measured round (default 1)
  --rounds R        rounds per row; the median is reported (default 3)
  --ops N           operations in the ledger that unresolved() reads (default 1000000)
  --skip-postgres   no PostgreSQL rows (no server is started)
  --only-postgres   only the PostgreSQL rows (1 and 4 writers, 1 and 4 gateways)
Other arguments are ignored: bench/run.js passes every benchmark the same ones.
Needs dist/ (npm run build); PostgreSQL rows start a throwaway server (initdb on PATH or in
/usr/lib/postgresql/*/bin).`);
  process.exit(0);
}

const dist = new URL('../dist/ledger/', import.meta.url);
if (!existsSync(new URL('open.js', dist))) {
  console.error('bench: dist/ is missing — run `npm run build` first');
  process.exit(3);
}
const { openMemoryLedger } = await import(new URL('memory/store.js', dist).href);
const { openSqliteLedger } = await import(new URL('sqlite/store.js', dist).href);
const { openPostgresLedger } = await import(new URL('postgres/store.js', dist).href);
const { default: Database } = await import('better-sqlite3');
const { default: pg } = await import('pg');
const { findPostgresBin, startThrowawayPostgres } = await import('./support/postgres.js');

const { values: opts } = parseArgs({
  options: {
    seconds: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '3' },
    ops: { type: 'string', default: '1000000' },
    'skip-postgres': { type: 'boolean', default: false },
    'only-postgres': { type: 'boolean', default: false },
    // A gateway process of the fleet rows (spawned by this file): `ledger` or `raw`.
    gateway: { type: 'string' },
    url: { type: 'string' },
    schema: { type: 'string' },
    id: { type: 'string', default: 'BENCH' },
  },
  // bench/run.js passes every benchmark the same arguments.
  strict: false,
});
const SECONDS = Number(opts.seconds);
const ROUNDS = Number(opts.rounds);
const OPS = Number(opts.ops);
const dir = mkdtempSync(join(tmpdir(), 'candor-bench-'));
let seq = 0; // event counter for event()
const ID = String(opts.id); // keeps the operations of several gateway processes apart

/** Realistic events: each operation is opened, has one attempt started, and finished. */
function event() {
  const n = seq++;
  const op = `op_01J${ID}${String(Math.floor(n / 3)).padStart(16, '0')}`;
  const att = `att_01J${ID}${String(Math.floor(n / 3)).padStart(16, '0')}`;
  const base = {
    at: 1767225600000 + n,
    session_id: 'ses_01JBENCH00000000000000000',
    operation_id: op,
    correlation_id: `case-${Math.floor(n / 3)}`,
  };
  const destination = {
    method: 'POST',
    route_template: '/v1/deployments',
    authority_ref: 'vault:prod',
  };
  if (n % 3 === 0) {
    return {
      ...base,
      kind: 'operation_opened',
      data: {
        owner: 'gw-1',
        action: 'create_deployment',
        action_class: 'create',
        intent: {
          kind: 'create_deployment',
          subject_ref: `app:${n}`,
          params_digest: 'd'.repeat(64),
        },
        destination,
        idempotency_key: `candor-${'k'.repeat(20)}${n}`,
        supersedes_operation_id: null,
        attempt_budget: 3,
        params: { app: 'web', version: n },
      },
    };
  }
  if (n % 3 === 1) {
    return {
      ...base,
      kind: 'attempt_started',
      data: {
        attempt_id: att,
        number: 1,
        worker: 'gw-1',
        retry_of_attempt_id: null,
        retry_reason: null,
        retry_decision: null,
        attempt_budget_remaining: 2,
        request_fingerprint: `sha256:${'ab'.repeat(32)}`,
        prior_request_fingerprint: null,
        credential_ref: 'vault:prod#deploy',
        destination,
      },
    };
  }
  return {
    ...base,
    kind: 'attempt_finished',
    data: {
      attempt_id: att,
      dispatch_state: 'response_received',
      category: 'succeeded',
      retry: 'never',
      remote_effect: 'applied',
      rule: 'http.2xx',
      phases: { started_at: base.at, request_sent_at: base.at + 1, finished_at: base.at + 20 },
      response: {
        status: 201,
        fingerprint: `sha256:${'cd'.repeat(32)}`,
        remote_ref: `dep_${n}`,
        replay: false,
      },
      duration_ms: 20,
      diagnostics_ref: null,
      diagnostics: null,
    },
  };
}

/**
 * The engine's two commits per successful action (src/engine): `operation_opened` with the first
 * `attempt_started`, then `attempt_finished` with `operation_resolved`. Each call returns the
 * next commit's two events (the three events of event() plus the resolution).
 */
let engineSeq = 0;
function engineCommit() {
  const n = engineSeq++;
  const k = Math.floor(n / 2);
  // event() numbers its events n % 3: opened, started, finished.
  const shaped = (i) => {
    const saved = seq;
    seq = k * 3 + i;
    const e = event();
    seq = saved;
    const op = `op_01JENG${ID}${String(k).padStart(16, '0')}`;
    const att = `att_01JENG${ID}${String(k).padStart(16, '0')}`;
    const data = e.data.attempt_id ? { ...e.data, attempt_id: att } : e.data;
    return { ...e, at: 1767225600000 + n, operation_id: op, data };
  };
  if (n % 2 === 0) return [shaped(0), shaped(1)];
  const finished = shaped(2);
  return [
    finished,
    {
      ...finished,
      kind: 'operation_resolved',
      data: {
        state: 'succeeded',
        category: 'succeeded',
        by: 'attempt',
        remote_refs: [finished.data.response.remote_ref],
      },
    },
  ];
}

/**
 * Runs `step` (one write) for SECONDS with `writers` concurrent loops; returns writes/s and this
 * process's CPU time (user + system) per write in µs: unlike wall time, barely moved by the other
 * work on a shared machine.
 */
async function rate(step, writers = 1, finish = () => {}) {
  const until = performance.now() + SECONDS * 1000;
  let count = 0;
  const start = performance.now();
  const cpu = process.cpuUsage();
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      while (performance.now() < until) {
        await step(w);
        count++;
      }
    }),
  );
  // Work the store still owes for these writes (SQLite's listing projection) is timed with them.
  await finish();
  const used = process.cpuUsage(cpu);
  return {
    rate: count / ((performance.now() - start) / 1000),
    cpu: (used.user + used.system) / Math.max(1, count),
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Alternates ledger and baseline for ROUNDS rounds; returns the medians. */
async function compare(ledgerStep, rawStep, writers = 1, finish = undefined) {
  return alternate(
    () => rate(ledgerStep, writers, finish),
    () => rate(rawStep, writers),
  );
}

async function alternate(ledgerRun, rawRun) {
  const l = [];
  const r = [];
  for (let i = 0; i < ROUNDS; i++) {
    l.push(await ledgerRun());
    r.push(await rawRun());
  }
  const cpu = (xs) =>
    xs.some((x) => x.cpu === undefined) ? undefined : median(xs.map((x) => x.cpu));
  return {
    ledger: median(l.map((x) => x.rate)),
    raw: median(r.map((x) => x.rate)),
    ledgerCpu: cpu(l),
    rawCpu: cpu(r),
  };
}

const rows = [];
function report(name, { ledger, raw, ledgerCpu, rawCpu }, target) {
  const ratio = ledger / raw;
  const verdict =
    target === undefined
      ? ''
      : `target >= ${target.toFixed(2)}: ${ratio >= target ? 'met' : 'not met'}`;
  const us = (x) => (x === undefined ? '-' : x.toFixed(0));
  rows.push([
    name,
    ledger.toFixed(0),
    raw.toFixed(0),
    ratio.toFixed(2),
    `${us(ledgerCpu)} / ${us(rawCpu)}`,
    verdict,
  ]);
  console.error(`  measured ${name}`);
}

function rawSqlite(path, synchronous) {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${synchronous}`);
  db.exec('CREATE TABLE raw (seq INTEGER PRIMARY KEY, bytes BLOB NOT NULL)');
  const insert = db.prepare('INSERT INTO raw (bytes) VALUES (?)');
  // The engine's shape: the same rows, as many a transaction as the ledger commits at once.
  const many = db.transaction((events) => {
    for (const e of events) insert.run(Buffer.from(JSON.stringify(e)));
  });
  return {
    step: () => insert.run(Buffer.from(JSON.stringify(event()))),
    engineStep: () => many(engineCommit()),
    close: () => db.close(),
  };
}

/** Projection lags (ms from a commit to the projector's commit covering it), SQLite `process`. */
const lags = [];
/** The same for PostgreSQL, 4 writers. */
const pgLags = [];

async function sqlite() {
  const mem = openMemoryLedger();
  const arr = [];
  report(
    'memory',
    await compare(
      () => mem.append([event()]),
      () => arr.push(Buffer.from(JSON.stringify(event()))),
    ),
  );

  for (const [mode, sync] of [
    ['process', 'NORMAL'],
    ['power', 'FULL'],
  ]) {
    const store = openSqliteLedger(join(dir, `ledger-${mode}.db`), {
      durability: mode,
      ...(mode === 'process' ? { onProjected: (ms) => lags.push(ms) } : {}),
    });
    // The listing is projected after the commits (schema 7): what is still pending when a timed
    // run ends is projected inside its time, so the baseline's turn never hides that work (and a
    // raw run, which never yields to timers, is not counted as projection lag).
    const project = () => store.project?.();
    const raw = rawSqlite(join(dir, `raw-${mode}.db`), sync);
    report(
      `sqlite ${mode}`,
      await compare(() => store.append([event()]), raw.step, 1, project),
      mode === 'process' ? 0.5 : undefined,
    );
    if (mode === 'process') {
      // Two events a commit, as the engine writes them; raw: the same rows, two a transaction.
      const c = await compare(() => store.append(engineCommit()), raw.engineStep, 1, project);
      const per = (x) => (x === undefined ? undefined : x / 2);
      report(
        'sqlite process, 2 events a commit (engine)',
        {
          ledger: c.ledger * 2,
          raw: c.raw * 2,
          ledgerCpu: per(c.ledgerCpu),
          rawCpu: per(c.rawCpu),
        },
        0.5,
      );
    }
    if (mode === 'power') {
      // 16 callers in flight: group commit shares one fsync among them; the raw baseline cannot.
      report(
        'sqlite power, 16 in flight',
        await compare(() => store.append([event()]), raw.step, 16, project),
      );
    }
    await store.close();
    raw.close();
  }
}

async function postgres() {
  if (opts['skip-postgres']) return 'skipped (--skip-postgres)';
  const found = findPostgresBin();
  if (!found.ok) return `skipped: ${found.reason}`;
  const server = await startThrowawayPostgres({ fsync: true });
  const loadBefore = loadavg()[0];
  try {
    for (const writers of [1, 4]) {
      const schema = `bench_${writers}`;
      const stores = await Promise.all(
        Array.from({ length: writers }, () =>
          openPostgresLedger(server.url, {
            schema,
            poolSize: 1,
            ...(writers === 4 ? { onProjected: (ms) => pgLags.push(ms) } : {}),
          }),
        ),
      );
      const clients = await Promise.all(
        Array.from({ length: writers }, async () => {
          const c = new pg.Client({ connectionString: server.url });
          c.on('error', (e) => console.error('bench: raw client error', e.message));
          await c.connect();
          return c;
        }),
      );
      await clients[0].query(
        `CREATE TABLE raw_${writers} (seq bigserial PRIMARY KEY, bytes bytea NOT NULL)`,
      );
      // The listing is projected after the commits (schema 6): what is still owed when a timed
      // run ends is projected inside its time.
      const result = await compare(
        (w) => stores[w].append([event()]),
        (w) =>
          clients[w].query(`INSERT INTO raw_${writers} (bytes) VALUES ($1)`, [
            Buffer.from(JSON.stringify(event())),
          ]),
        writers,
        () => Promise.all(stores.map((s) => s.project())),
      );
      report(
        `postgres, ${writers} writer${writers > 1 ? 's' : ''}`,
        result,
        writers === 4 ? 0.5 : undefined,
      );
      await Promise.all([...stores.map((s) => s.close()), ...clients.map((c) => c.end())]);
    }
    // Gateways: separate processes (their own event loop, pool and CPU time), one ledger, against
    // as many processes inserting raw rows. Each appends one event at a time.
    for (const gateways of [1, 4]) {
      const schema = `bench_gw_${gateways}`;
      const table = `raw_gw_${gateways}`;
      await (await openPostgresLedger(server.url, { schema })).close(); // migrated before timing
      const admin = new pg.Client({ connectionString: server.url });
      await admin.connect();
      await admin.query(`CREATE TABLE ${table} (seq bigserial PRIMARY KEY, bytes bytea NOT NULL)`);
      await admin.end();
      let round = 0;
      const result = await alternate(
        () => fleet(server.url, 'ledger', schema, gateways, round++),
        () => fleet(server.url, 'raw', table, gateways, round++),
      );
      report(
        `postgres, ${gateways} gateway${gateways > 1 ? 's' : ''}`,
        result,
        gateways === 4 ? 0.5 : undefined,
      );
    }
    pgLoad = `load average ${loadBefore.toFixed(1)} → ${loadavg()[0].toFixed(1)} on ${availableParallelism()} CPUs`;
    return null;
  } finally {
    await server.stop();
  }
}

/** The machine's load while the PostgreSQL rows ran (they are CPU-bound on a shared machine). */
let pgLoad = '';

/**
 * Runs `n` gateway processes (`kind` ledger or raw) together for SECONDS, started at once after
 * each has connected and warmed up; returns their summed writes/s and mean CPU µs per write.
 */
async function fleet(url, kind, target, n, round) {
  const self = fileURLToPath(import.meta.url);
  const children = Array.from({ length: n }, (_, g) =>
    spawn(
      process.execPath,
      [self, '--gateway', kind, '--url', url, '--schema', target, '--id', `G${round}X${g}`].concat([
        '--seconds',
        String(SECONDS),
      ]),
      { stdio: ['pipe', 'pipe', 'inherit'] },
    ),
  );
  const exited = children.map((c) => new Promise((resolve) => c.on('exit', resolve)));
  const lines = children.map((c) => createInterface({ input: c.stdout })[Symbol.asyncIterator]());
  const next = async (l) => {
    const r = await l.next();
    if (r.done) throw new Error(`bench: a ${kind} gateway process exited early`);
    return r.value;
  };
  for (const l of lines) await next(l); // 'ready'
  for (const c of children) c.stdin.write('go\n');
  const results = [];
  for (const l of lines) results.push(JSON.parse(await next(l)));
  await Promise.all(exited);
  return {
    rate: results.reduce((a, r) => a + r.rate, 0),
    cpu: results.reduce((a, r) => a + r.cpu, 0) / results.length,
  };
}

/** One gateway process of `fleet`: connects, warms up, says ready, runs on `go`, reports. */
async function gatewayChild() {
  let step;
  let close;
  let finish;
  if (opts.gateway === 'ledger') {
    const store = await openPostgresLedger(opts.url, { schema: opts.schema, poolSize: 1 });
    step = () => store.append([event()]);
    finish = () => store.project();
    close = () => store.close();
  } else {
    const client = new pg.Client({ connectionString: opts.url });
    await client.connect();
    const sql = `INSERT INTO ${opts.schema} (bytes) VALUES ($1)`;
    step = () => client.query(sql, [Buffer.from(JSON.stringify(event()))]);
    close = () => client.end();
  }
  for (let i = 0; i < 50; i++) await step();
  const input = createInterface({ input: process.stdin });
  const go = new Promise((resolve) => input.once('line', resolve));
  process.stdout.write('ready\n');
  await go;
  const result = await rate(step, 1, finish);
  input.close();
  await close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** Builds a ledger of OPS operations (1% left unresolved) through append() in large batches. */
async function unresolvedQuery() {
  const store = openSqliteLedger(join(dir, 'million.db'), { durability: 'process' });
  const started = performance.now();
  const BATCH = 5_000;
  let pending = [];
  for (let i = 0; i < OPS; i++) {
    const op = `op_${String(i).padStart(10, '0')}`;
    const base = {
      at: 1767225600000 + i,
      session_id: 'ses_bulk',
      operation_id: op,
      correlation_id: null,
    };
    pending.push({
      ...base,
      kind: 'operation_opened',
      data: {
        owner: 'gw-1',
        action: 'create_deployment',
        action_class: 'create',
        intent: {
          kind: 'create_deployment',
          subject_ref: `app:${i}`,
          params_digest: 'd'.repeat(64),
        },
        destination: { method: 'POST', route_template: '/v1/deployments' },
        idempotency_key: `key-${i}`,
        supersedes_operation_id: null,
        attempt_budget: 2,
        params: null,
      },
    });
    if (i % 100 !== 0) {
      pending.push({
        ...base,
        kind: 'operation_resolved',
        data: { state: 'succeeded', category: 'succeeded', by: 'attempt', remote_refs: [] },
      });
    }
    if (pending.length >= BATCH) {
      await store.append(pending);
      pending = [];
    }
  }
  if (pending.length > 0) await store.append(pending);
  const buildSeconds = (performance.now() - started) / 1000;
  const times = [];
  let ids = [];
  for (let i = 0; i < 7; i++) {
    const t = performance.now();
    ids = await store.unresolved();
    times.push(performance.now() - t);
  }
  await store.close();
  return { ms: median(times), count: ids.length, buildSeconds };
}

if (opts.gateway !== undefined) {
  rmSync(dir, { recursive: true, force: true });
  await gatewayChild();
  process.exit(0);
}

try {
  console.error(`ledger append benchmark: ${ROUNDS} rounds × ${SECONDS}s per side, medians`);
  if (!opts['only-postgres']) await sqlite();
  const pgNote = await postgres();
  console.error(`  building a ledger of ${OPS.toLocaleString('en')} operations…`);
  const u = opts['only-postgres'] ? null : await unresolvedQuery();

  const header = ['store', 'ledger ev/s', 'raw ev/s', 'ratio', 'cpu µs/ev ledger / raw', 'target'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  console.log(
    '\nledger append: events/s, ledger vs raw-driver baseline (same durability, same run)',
  );
  for (const r of [header, ...rows]) console.log(r.map((c, i) => c.padEnd(widths[i])).join('  '));
  for (const [name, xs] of [
    ['sqlite process', lags],
    ['postgres, 4 writers', pgLags],
  ]) {
    if (xs.length === 0) continue;
    const sorted = [...xs].sort((a, b) => a - b);
    const at = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
    const p99 = at(0.99);
    console.log(
      `${name}: listing projector lag p50 ${at(0.5).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${sorted.at(-1).toFixed(1)} ms over ${sorted.length.toLocaleString('en')} commits — target p99 <= 100 ms: ${p99 <= 100 ? 'met' : 'not met'}`,
    );
  }
  if (pgNote) console.log(`postgres: ${pgNote} — target >= 0.50 for 4 writers: not measured`);
  else console.log(`(postgres rows: ${pgLoad} — the server shares the CPUs with the clients)`);
  if (u)
    console.log(
      '(cpu µs/ev: of the appending process — PostgreSQL rows: the client side only; gateways: mean of the processes)',
    );
  if (u)
    console.log(
      `\nunresolved() over ${OPS.toLocaleString('en')} operations (${u.count.toLocaleString('en')} unresolved): ` +
        `${u.ms.toFixed(1)} ms median of 7 — target < 50 ms: ${u.ms < 50 ? 'met' : 'not met'}; ledger built in ${u.buildSeconds.toFixed(0)} s`,
    );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
