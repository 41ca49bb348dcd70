// HTTP overhead benchmark: what the runtime costs over a raw request. Measures, in one run and
// against the same local server, `runtime.run` of a create action (SQLite ledger, durability
// `process`) and a raw `undici.request` of the same POST, sequentially and with 16 requests in
// flight. Prints throughput of each, their ratio, and the latency the runtime adds (p50, p99).
// Runtime and baseline alternate over several rounds; the median round of each is reported
// (machines here are noisy: absolute numbers mislead, ratios less so).
//
//   node bench/http-overhead.js [--seconds S] [--rounds R] [--concurrency C] [--delay-ms D]
//                               [--https-delay-ms D] [--skip-https]
//
// --delay-ms makes the server wait D ms before answering (a remote with latency instead of a
// loopback answer in microseconds). Two diagnostic columns attribute the gap: the runtime running
// a read-class action (which reuses pooled connections) and raw requests on a fresh connection
// each (as the runtime sends writes).
//
// Targets (printed as met / not met, never asserted): throughput ratio >= 0.5 at 16 concurrent;
// sequential added latency p50 <= 0.25 ms and p99 <= 2 ms.
//
// HTTPS mode (after the loopback run; --skip-https leaves it out): a self-signed local HTTPS
// server (certificate made with `openssl` in a temp dir, trusted through NODE_EXTRA_CA_CERTS in a
// child process) answering after --https-delay-ms (default 20: a remote API). For writes it
// reports TCP+TLS handshakes per write (full and resumed) and the p50 the runtime adds over raw
// undici on a keep-alive pool. Target: with an honoured idempotency key, 0 handshakes per write
// after warm-up and <= 1 ms added p50.
// Imports the built package from dist/ (run `npm run build` first).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const dist = new URL('../dist/', import.meta.url);
for (const f of ['engine/runtime.js', 'engine/action.js', 'engine/ports.js', 'ledger/open.js']) {
  if (!existsSync(new URL(f, dist))) {
    console.error(`bench: dist/${f} is missing — run \`npm run build\` first`);
    process.exit(3);
  }
}
const { createRuntime } = await import(new URL('runtime.js', dist).href);
const { defineAction } = await import(new URL('engine/action.js', dist).href);
const { staticCredentials } = await import(new URL('engine/ports.js', dist).href);
const { openLedger } = await import(new URL('ledger/open.js', dist).href);
const { Agent, Client, request } = await import('undici');
const { z } = await import('zod');

// Not strict: bench/run.js passes its arguments to every benchmark (e.g. --skip-postgres).
const { values: opts } = parseArgs({
  strict: false,
  options: {
    seconds: { type: 'string', default: '1.5' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '16' },
    'delay-ms': { type: 'string', default: '0' },
    'https-delay-ms': { type: 'string', default: '20' },
    'skip-https': { type: 'boolean', default: false },
    'https-child': { type: 'string' },
  },
});
if (typeof opts['https-child'] === 'string') {
  const { runHttps } = await import('./support/https-overhead.js');
  await runHttps(opts['https-child'], {
    seconds: Number(opts.seconds),
    rounds: Number(opts.rounds),
    delayMs: Number(opts['https-delay-ms']),
  });
  process.exit(0);
}
const SECONDS = Number(opts.seconds);
const ROUNDS = Number(opts.rounds);
const CONCURRENCY = Number(opts.concurrency);
const DELAY_MS = Number(opts['delay-ms']);
const TOKEN = 'bench-token-0123456789';

// ---- the destination: answers POST with 201 and a small JSON body -------------------------------
let created = 0;
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    created += 1;
    const body = JSON.stringify({ id: `thg_${created}`, state: 'created' });
    const answer = () => {
      res.writeHead(201, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
    };
    if (DELAY_MS > 0) setTimeout(answer, DELAY_MS);
    else answer();
  });
});
await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
const origin = `http://127.0.0.1:${port}`;

// ---- the runtime under test ----------------------------------------------------------------------
const dir = mkdtempSync(join(tmpdir(), 'candor-bench-http-'));
const opened = await openLedger(`sqlite:${join(dir, 'ledger.db')}`, { durability: 'process' });
if (!opened.ok) {
  console.error(`bench: cannot open the ledger: ${opened.failure.message}`);
  process.exit(3);
}
const ledger = opened.value;
const define = (name, actionClass) =>
  defineAction({
    name,
    class: actionClass,
    subject: 'the thing',
    input: z.object({ name: z.string() }),
    request: (i, ctx) => ({
      method: 'POST',
      path: '/v1/things',
      body: { ...i, client_ref: ctx.correlation_id },
    }),
    response: z.looseObject({ id: z.string(), state: z.string() }),
    remoteRef: (d) => d.id,
    destination: { origin, authority_ref: 'vault:bench' },
  });
const action = define('create_thing', 'create');
// Diagnostic only: the same POST declared as a read, which the runtime sends on pooled sockets.
const pooledAction = define('search_things', 'read');
const runtime = createRuntime({
  ledger,
  credentials: staticCredentials({ 'vault:bench': { authorization: `Bearer ${TOKEN}` } }),
  actions: [action, pooledAction],
  agent: 'bench',
});

let n = 0;
async function viaRuntime(a = action) {
  const env = await runtime.run(a, { name: `thing-${n++}` });
  if (!env.ok) throw new Error(`runtime.run: ${env.category}`);
}

// The baseline: the same POST with plain undici on a keep-alive pool (what a tool without Candor
// would do), reading and parsing the JSON body.
const pool = new Agent();
async function raw(dispatcher = pool) {
  const i = n++;
  const res = await request(`${origin}/v1/things`, {
    dispatcher,
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      authorization: `Bearer ${TOKEN}`,
      'x-correlation-id': `raw-${i}`,
    },
    body: JSON.stringify({ name: `thing-${i}`, client_ref: `raw-${i}` }),
  });
  const data = await res.body.json();
  if (res.statusCode !== 201 || typeof data?.id !== 'string') throw new Error('raw: bad answer');
}
// Diagnostic only: the same raw POST on a fresh connection each time, as the runtime did for
// writes (an idle pooled socket could be the stale keep-alive race, which would swallow a write).
async function rawFresh() {
  const client = new Client(origin, { pipelining: 1 });
  try {
    await raw(client);
  } finally {
    await client.close();
  }
}

// ---- measuring -----------------------------------------------------------------------------------
/** Runs `fn` with `c` requests in flight for `seconds`; returns req/s and sorted latencies (ms). */
async function measure(fn, c, seconds) {
  const latencies = [];
  const started = performance.now();
  const stopAt = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < stopAt) {
      const t0 = performance.now();
      await fn();
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: c }, worker));
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { rps: latencies.length / elapsed, latencies };
}

const pct = (sorted, p) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const medianRound = (rounds) => {
  const m = median(rounds.map((r) => r.rps));
  return rounds.find((r) => r.rps === m);
};

/** Alternates the candidates over the rounds (after a short warm-up) and keeps the median round. */
async function compare(c, candidates) {
  for (const fn of Object.values(candidates)) await measure(fn, c, 0.3);
  const rounds = Object.fromEntries(Object.keys(candidates).map((k) => [k, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, fn] of Object.entries(candidates)) rounds[k].push(await measure(fn, c, SECONDS));
  }
  return Object.fromEntries(Object.entries(rounds).map(([k, rs]) => [k, medianRound(rs)]));
}

const f1 = (x) => x.toFixed(1);
const f2 = (x) => x.toFixed(2);
const rows = [];
const began = performance.now();
try {
  for (const [label, c] of [
    ['sequential', 1],
    [`${CONCURRENCY} concurrent`, CONCURRENCY],
  ]) {
    const m = await compare(c, {
      runtime: () => viaRuntime(),
      raw: () => raw(),
      pooledRuntime: () => viaRuntime(pooledAction),
      fresh: rawFresh,
    });
    rows.push({ label, c, ...m });
  }
} finally {
  await runtime.endSession('bench finished');
  await runtime.close();
  await ledger.close();
  await pool.close();
  await new Promise((r) => server.close(() => r(undefined)));
  rmSync(dir, { recursive: true, force: true });
}

const table = rows.map((r) => ({
  mode: r.label,
  'runtime req/s': f1(r.runtime.rps),
  'raw req/s': f1(r.raw.rps),
  ratio: f2(r.runtime.rps / r.raw.rps),
  'p50 runtime/raw ms': `${f2(pct(r.runtime.latencies, 50))} / ${f2(pct(r.raw.latencies, 50))}`,
  'added p50 ms': f2(pct(r.runtime.latencies, 50) - pct(r.raw.latencies, 50)),
  'added p99 ms': f2(pct(r.runtime.latencies, 99) - pct(r.raw.latencies, 99)),
  'runtime pooled-conn req/s': f1(r.pooledRuntime.rps),
  'raw fresh-conn req/s': f1(r.fresh.rps),
}));
console.log(
  `http-overhead: runtime.run (SQLite ledger, durability process) vs raw undici.request, server delay ${DELAY_MS} ms, ${ROUNDS} rounds x ${SECONDS}s, median round`,
);
console.table(table);
const at16 = rows.at(-1);
const seq = rows[0];
const ratio = at16.runtime.rps / at16.raw.rps;
const addedP50 = pct(seq.runtime.latencies, 50) - pct(seq.raw.latencies, 50);
const addedP99 = pct(seq.runtime.latencies, 99) - pct(seq.raw.latencies, 99);
const verdict = (ok) => (ok ? 'met' : 'not met');
console.log(
  `target: runtime.run vs raw, create, ${CONCURRENCY} in flight, throughput ratio >= 0.50 — measured ${f2(ratio)} (${verdict(ratio >= 0.5)})`,
);
console.log(
  `target: sequential added latency p50 <= 0.25 ms — measured ${f2(addedP50)} ms (${verdict(addedP50 <= 0.25)})`,
);
console.log(
  `target: sequential added latency p99 <= 2 ms — measured ${f2(addedP99)} ms (${verdict(addedP99 <= 2)})`,
);
console.log(
  `diagnostic at ${CONCURRENCY} concurrent, as a share of the pooled raw baseline: runtime running a read (pooled connections, the engine's own cost) ${f2(at16.pooledRuntime.rps / at16.raw.rps)}, raw on a fresh connection per request ${f2(at16.fresh.rps / at16.raw.rps)}`,
);
console.log(`total ${f1((performance.now() - began) / 1000)}s`);

if (!opts['skip-https']) {
  const { httpsChild } = await import('./support/https-overhead.js');
  const code = httpsChild(process.argv.slice(2));
  if (code !== 0) process.exit(code);
}
