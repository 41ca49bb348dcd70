// The engine's own CPU per action: N `runtime.run` calls of a create action against a local server
// that runs in a child process (so its CPU is not counted), with raw `undici.request` of the same
// POST measured the same way in the same process. CPU time (process.cpuUsage, user + system) is
// what a shared, noisy machine cannot inflate much; wall-clock rates it can.
//
//   node bench/support/engine-cpu.js [--ledger memory|sqlite] [--actions N] [--concurrency C]
//                                    [--class create|read] [--rounds R] [--only runtime|raw]
//                                    [--transport http|canned] [--dist DIR] [--against DIR]
//
// `--transport canned` answers from memory (no socket: the engine and the ledger alone); `--dist`
// measures another build (e.g. an earlier commit built with `tsc --outDir DIR`) for a before/after
// on the same machine minutes apart; `--against DIR` loads that other build into the same process
// and alternates rounds between the two runtimes (each with its own ledger), which a busy machine
// skews far less than runs minutes apart (rounds of --actions, 20 by default, median and 25th
// percentile of each side). With the memory ledger it also reports the CPU spent inside
// the ledger's calls (its sealing and hashing), which is the ledger's share, not the engine's.
// Run it under `node --cpu-prof` to see where the runtime's share goes (bench/README.md).
// Imports the built package from dist/ (run `npm run build` first).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
  strict: false,
  options: {
    ledger: { type: 'string', default: 'memory' },
    actions: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '1' },
    class: { type: 'string', default: 'create' },
    rounds: { type: 'string', default: '3' },
    // Only one side (a profile of the runtime alone): `runtime` or `raw`.
    only: { type: 'string' },
    // `canned`: an HTTP transport that answers from memory (no socket): the engine alone.
    transport: { type: 'string', default: 'http' },
    // Another build to measure (e.g. the previous commit built into a directory): before/after.
    dist: { type: 'string' },
    // A second build measured in the same process, rounds alternating with the first.
    against: { type: 'string' },
  },
});
const N = Number(opts.actions);
const C = Number(opts.concurrency);
const ROUNDS = Number(opts.rounds);

const buildUrl = (dir) => pathToFileURL(`${dir.replace(/\/$/, '')}/`);
const dist =
  typeof opts.dist === 'string' ? buildUrl(opts.dist) : new URL('../../dist/', import.meta.url);
const { Agent, Client, request } = await import('undici');
const { z } = await import('zod');

// The destination, in its own process: 201 with a small JSON body, keep-alive announced.
const serverSource = `
const http = require('node:http');
let n = 0;
let connections = 0;
const s = http.createServer((req, res) => {
  req.resume();
  if (req.method === 'GET') return void res.end(String(connections));
  req.on('end', () => {
    const body = JSON.stringify({ id: 'thg_' + ++n, state: 'created' });
    res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
s.on('connection', () => connections++);
s.keepAliveTimeout = 5000;
s.listen(0, '127.0.0.1', () => process.stdout.write(String(s.address().port) + '\\n'));
`;
const child = spawn(process.execPath, ['-e', serverSource], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const port = await new Promise((resolve, reject) => {
  child.stdout.once('data', (d) => resolve(Number(String(d).trim())));
  child.once('exit', (code) => reject(new Error(`server exited (${code})`)));
});
const origin = `http://127.0.0.1:${port}`;
const TOKEN = 'bench-token-0123456789';

const dir = mkdtempSync(join(tmpdir(), 'candor-bench-cpu-'));
let sides = 0;

/** A runtime of the build at `distUrl` with its own ledger, and the CPU spent in that ledger's calls. */
async function engineOf(distUrl) {
  const { createRuntime } = await import(new URL('runtime.js', distUrl).href);
  const { defineAction } = await import(new URL('engine/action.js', distUrl).href);
  const { staticCredentials } = await import(new URL('engine/ports.js', distUrl).href);
  const { openLedger } = await import(new URL('ledger/open.js', distUrl).href);
  const url = opts.ledger === 'sqlite' ? `sqlite:${join(dir, `ledger-${sides++}.db`)}` : 'memory:';
  const opened = await openLedger(url, { durability: 'process' });
  if (!opened.ok) throw new Error(opened.failure.message);
  const ledger = opened.value;
  // Time spent synchronously inside the ledger's methods (all of a memory ledger's work; for SQLite
  // only what runs before its group commit yields): the engine's share is the rest.
  const side = { inLedgerUs: 0, ledger };
  for (const m of ['append', 'query', 'read']) {
    const f = ledger[m].bind(ledger);
    ledger[m] = (...args) => {
      const t = process.cpuUsage();
      try {
        return f(...args);
      } finally {
        const u = process.cpuUsage(t);
        side.inLedgerUs += u.user + u.system;
      }
    };
  }
  side.action = defineAction({
    name: 'create_thing',
    class: opts.class,
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
  side.runtime = createRuntime({
    ledger,
    credentials: staticCredentials({ 'vault:bench': { authorization: `Bearer ${TOKEN}` } }),
    actions: [side.action],
    agent: 'bench',
    ...(opts.transport === 'canned' ? { transports: { http: cannedHttp() } } : {}),
  });
  return side;
}
const main = await engineOf(dist);
const other = typeof opts.against === 'string' ? await engineOf(buildUrl(opts.against)) : null;

/** An HTTP transport that answers every request at once with what the local server would send. */
function cannedHttp() {
  let k = 0;
  return {
    kind: 'http',
    dispatch: async () => {
      const t = Date.now();
      const body = Buffer.from(JSON.stringify({ id: `thg_${++k}`, state: 'created' }));
      const headers = {
        'content-type': 'application/json',
        'content-length': String(body.length),
        connection: 'keep-alive',
        'keep-alive': 'timeout=5',
      };
      return {
        evidence: { phase: 'response_complete', status: 201 },
        data: null,
        reply: { status: 201, headers, body, framing: 'length' },
        diagnostics: { status: 201, headers, framing: 'length', error_code: null },
        phases: { started_at: t, request_sent_at: t, headers_at: t, finished_at: t },
      };
    },
  };
}

let n = 0;
const runOf = (side) => async () => {
  const env = await side.runtime.run(side.action, { name: `thing-${n++}` });
  if (!env.ok) throw new Error(`runtime.run: ${env.category}`);
};
const viaRuntime = runOf(main);
const pool = new Agent();
const raw = async () => {
  const i = n++;
  const res = await request(`${origin}/v1/things`, {
    dispatcher: pool,
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
};

/** The connections the server has accepted so far (asked on a connection of its own). */
async function connections() {
  const client = new Client(origin);
  try {
    return Number(await (await request(`${origin}/count`, { dispatcher: client })).body.text());
  } finally {
    await client.close();
  }
}

/** CPU microseconds per call of `fn` over `count` calls, `C` in flight (`side`: whose ledger). */
async function cpuPer(fn, count, side = main) {
  let left = count;
  const conns = await connections();
  const worker = async () => {
    while (left-- > 0) await fn();
  };
  const t0 = performance.now();
  const ledgerBefore = side.inLedgerUs;
  const before = process.cpuUsage();
  await Promise.all(Array.from({ length: C }, worker));
  const used = process.cpuUsage(before);
  const wall = ((performance.now() - t0) * 1000) / count;
  // Less the one connection the count request itself opens.
  return {
    cpu: (used.user + used.system) / count,
    sys: used.system / count,
    wall,
    ledger: (side.inLedgerUs - ledgerBefore) / count,
    conns: ((await connections()) - conns - 1) / count,
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const quartile = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 4)];

/** `--against`: both builds' runtimes, rounds alternating (which goes first alternates too). */
async function alternate() {
  const pair = [
    ['this build', main],
    [opts.against, other],
  ];
  const rounds = Math.max(ROUNDS, 20);
  for (const [, side] of pair) await cpuPer(runOf(side), Math.min(N, 500), side);
  const got = new Map(pair.map(([name]) => [name, []]));
  for (let r = 0; r < rounds; r++) {
    for (const [name, side] of r % 2 ? pair : [...pair].reverse())
      got.get(name).push(await cpuPer(runOf(side), N, side));
  }
  console.log(
    `engine-cpu: ${opts.class} action, ${opts.ledger} ledger, ${opts.transport} transport, ${N} actions x ${rounds} rounds per build, alternating, ${C} in flight`,
  );
  for (const [name, xs] of got) {
    const cpu = xs.map((x) => x.cpu);
    const outside = xs.map((x) => x.cpu - x.ledger);
    console.log(
      `  ${name.padEnd(24)} ${median(cpu).toFixed(0).padStart(5)} us CPU/action (p25 ${quartile(cpu).toFixed(0)}), outside the ledger's calls ${median(outside).toFixed(0)} us (p25 ${quartile(outside).toFixed(0)})`,
    );
  }
}

try {
  if (other) await alternate();
  else await againstRaw();
} finally {
  for (const side of other ? [main, other] : [main]) {
    await side.runtime.endSession('bench finished');
    await side.runtime.close();
    await side.ledger.close();
  }
  await pool.close();
  child.kill();
  rmSync(dir, { recursive: true, force: true });
}

/** The runtime against raw undici requests of the same POST, rounds alternating. */
async function againstRaw() {
  const sides = { runtime: opts.only !== 'raw', raw: opts.only !== 'runtime' };
  const none = { cpu: NaN, sys: NaN, wall: NaN, ledger: NaN, conns: NaN };
  if (sides.runtime) await cpuPer(viaRuntime, Math.min(N, 500));
  if (sides.raw) await cpuPer(raw, Math.min(N, 500));
  const rt = [];
  const rw = [];
  for (let r = 0; r < ROUNDS; r++) {
    rt.push(sides.runtime ? await cpuPer(viaRuntime, N) : none);
    rw.push(sides.raw ? await cpuPer(raw, N) : none);
  }
  const cpuRt = median(rt.map((x) => x.cpu));
  const cpuRaw = median(rw.map((x) => x.cpu));
  console.log(
    `engine-cpu: ${opts.class} action, ${opts.ledger} ledger, ${N} actions x ${ROUNDS} rounds, ${C} in flight (median round)`,
  );
  console.log(
    `  runtime.run  ${cpuRt.toFixed(0).padStart(6)} us CPU/action (${median(rt.map((x) => x.sys)).toFixed(0)} system)  ${median(
      rt.map((x) => x.wall),
    )
      .toFixed(0)
      .padStart(
        6,
      )} us wall/action  ${median(rt.map((x) => x.conns)).toFixed(2)} connections/action  (of the CPU, in ledger calls: ${median(rt.map((x) => x.ledger)).toFixed(0)} us)`,
  );
  if (sides.raw) {
    const rawWall = median(rw.map((x) => x.wall)).toFixed(0);
    const rawSys = median(rw.map((x) => x.sys)).toFixed(0);
    console.log(
      `  raw undici   ${cpuRaw.toFixed(0).padStart(6)} us CPU/request (${rawSys} system) ${rawWall.padStart(6)} us wall/request`,
    );
  }
  if (sides.runtime && sides.raw)
    console.log(
      `  runtime.run over raw undici: ${(cpuRt - cpuRaw).toFixed(0)} us CPU per action (the ledger's calls included)`,
    );
}
