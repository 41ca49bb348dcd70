// The peer row: what `candor serve` costs against what users would run instead. One MCP client
// (the SDK v1 client) and one upstream MCP echo server over stdio (bench/support/mcp-echo.js),
// four ways:
//   direct        the client spawns the echo server itself (stdio): the floor
//   proxy http    through `mcp-proxy`, a plain pass-through proxy from npm that records nothing
//                 (Streamable HTTP in front, the echo server over stdio behind)
//   candor http   through `candor serve --http` (SQLite ledger, default durability)
//   candor stdio  through `candor serve` over stdio
// Workloads: reads and writes, sequential and 16 in flight on one session. Rounds interleave the
// four ways (order rotated each round) so a busy machine slows them alike; per workload it prints
// calls/s, p50/p99 and the gateway process's CPU per call (user + system from /proc, the proxy or
// Candor alone, not the echo server), and same-run ratios: Candor over HTTP against the proxy
// (target at 16 in flight: >= 1.0x throughput, p50 within 1 ms), Candor over stdio against direct.
//
//   node bench/gateway-vs-proxy.js [--quick] [--seconds S] [--rounds R]
//
// Imports the built package from dist/ (run `npm run build` first). Linux: gateway CPU is read
// from /proc/PID/stat (printed as '-' elsewhere).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const root = fileURLToPath(new URL('..', import.meta.url));
if (!existsSync(join(root, 'dist', 'index.js'))) {
  console.error('bench: dist/ is missing — run `npm run build` first');
  process.exit(3);
}
const { values: opts } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    seconds: { type: 'string' },
    rounds: { type: 'string' },
  },
  // bench/run.js passes every benchmark the same arguments.
  strict: false,
});
const SECONDS = Number(opts.seconds ?? (opts.quick ? 0.4 : 1.2));
const ROUNDS = Number(opts.rounds ?? (opts.quick ? 2 : 3));
const IN_FLIGHT = 16;
const ECHO = join(root, 'bench', 'support', 'mcp-echo.js');
const CANDOR = join(root, 'bin', 'candor.js');
const PROXY = join(root, 'node_modules', 'mcp-proxy', 'dist', 'bin', 'mcp-proxy.mjs');
const dir = mkdtempSync(join(tmpdir(), 'candor-bench-peer-'));
const children = [];

/** CPU time (user + system) of a process in µs, from /proc (undefined where there is none). */
const TICK_US = 10_000; // USER_HZ is 100 on Linux
function cpuOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_US;
  } catch {
    return undefined;
  }
}

/** A free loopback port (mcp-proxy needs one named; it cannot report a port 0 it was given). */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Waits until `child`'s output matches `re`; returns the match. */
function waitFor(child, streams, re, what) {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(
      () => reject(new Error(`${what}: not ready in 60 s:\n${seen}`)),
      60_000,
    );
    const on = (d) => {
      seen += String(d);
      const m = re.exec(seen);
      if (m) {
        clearTimeout(timer);
        for (const s of streams) s.off('data', on);
        resolve(m);
      }
    };
    for (const s of streams) s.on('data', on);
    child.once('exit', (code) =>
      reject(new Error(`${what} exited (${code}) before ready:\n${seen}`)),
    );
  });
}

const newClient = () => new Client({ name: 'candor-bench-peer', version: '1.0.0' });

async function direct() {
  const transport = new StdioClientTransport({ command: process.execPath, args: [ECHO] });
  const client = newClient();
  await client.connect(transport);
  return { name: 'direct (stdio)', client, tools: ['read', 'write'], pid: null };
}

async function proxyHttp() {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      PROXY,
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--server',
      'stream',
      '--',
      process.execPath,
      ECHO,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  await waitFor(child, [child.stdout, child.stderr], /starting server on port/, 'mcp-proxy');
  const client = newClient();
  // The server line comes just before listen(): retry the connect briefly.
  for (let i = 0; ; i++) {
    try {
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)),
      );
      break;
    } catch (err) {
      if (i >= 50) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  child.stdout.resume();
  child.stderr.resume();
  return { name: 'proxy http', client, tools: ['read', 'write'], pid: child.pid };
}

function candorConfig(name) {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    `upstreams:\n  echo:\n    command: ${JSON.stringify(process.execPath)}\n    args: [${JSON.stringify(ECHO)}]\n`,
  );
  return ['--config', path, '--ledger', `sqlite:${join(dir, `${name}.db`)}`];
}

async function candorHttp() {
  const child = spawn(process.execPath, [CANDOR, 'serve', ...candorConfig('http'), '--http', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const [, url] = await waitFor(
    child,
    [child.stdout],
    /MCP on (http:\/\/127\.0\.0\.1:\d+\/mcp)/,
    'candor serve --http',
  );
  child.stdout.resume();
  child.stderr.resume();
  const client = newClient();
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return { name: 'candor http', client, tools: ['echo_read', 'echo_write'], pid: child.pid };
}

async function candorStdio() {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CANDOR, 'serve', ...candorConfig('stdio')],
    stderr: 'ignore',
  });
  const client = newClient();
  await client.connect(transport);
  return { name: 'candor stdio', client, tools: ['echo_read', 'echo_write'], pid: transport.pid };
}

let unique = 0;
/** One call; throws unless it answered as a success (a failed call must not count as speed). */
async function call(target, write) {
  const name = target.tools[write ? 1 : 0];
  const text = `${write ? 'w' : 'r'}-${++unique}`; // never identical: the duplicate guard stays out
  const r = await target.client.callTool({ name, arguments: { text } });
  if (r.isError || !JSON.stringify(r.content).includes(text)) {
    throw new Error(`${target.name} ${name}: unexpected answer ${JSON.stringify(r).slice(0, 300)}`);
  }
}

/** Runs `inFlight` loops of calls for SECONDS; latencies in ms, gateway CPU µs, wall ms. */
async function run(target, write, inFlight) {
  const until = performance.now() + SECONDS * 1000;
  const latencies = [];
  const cpu0 = target.pid ? cpuOf(target.pid) : undefined;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < until) {
        const s = performance.now();
        await call(target, write);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const wall = performance.now() - t0;
  const cpu1 = target.pid ? cpuOf(target.pid) : undefined;
  return {
    latencies,
    wall,
    cpu: cpu0 === undefined || cpu1 === undefined ? undefined : cpu1 - cpu0,
  };
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

async function main() {
  console.error(
    `gateway vs pass-through proxy: ${ROUNDS} rounds × ${SECONDS}s per way and workload, interleaved`,
  );
  const loadBefore = loadavg()[0];
  const targets = [];
  for (const start of [direct, proxyHttp, candorHttp, candorStdio]) targets.push(await start());
  const workloads = [
    { name: 'reads, sequential', write: false, inFlight: 1 },
    { name: 'writes, sequential', write: true, inFlight: 1 },
    { name: `reads, ${IN_FLIGHT} in flight`, write: false, inFlight: IN_FLIGHT },
    { name: `writes, ${IN_FLIGHT} in flight`, write: true, inFlight: IN_FLIGHT },
  ];
  // Warm-up: JIT, connections, the ledger's first pages.
  const warm = opts.quick ? 10 : 40;
  for (const t of targets) for (let i = 0; i < warm; i++) await call(t, i % 2 === 1);
  const acc = new Map(); // `${workload}|${target}` → { latencies, wall, calls, cpu }
  for (let round = 0; round < ROUNDS; round++) {
    for (const w of workloads) {
      for (let k = 0; k < targets.length; k++) {
        const t = targets[(k + round) % targets.length];
        const r = await run(t, w.write, w.inFlight);
        const key = `${w.name}|${t.name}`;
        const a = acc.get(key) ?? { latencies: [], wall: 0, calls: 0, cpu: 0, cpuKnown: true };
        a.latencies.push(...r.latencies);
        a.wall += r.wall;
        a.calls += r.latencies.length;
        if (r.cpu === undefined) a.cpuKnown = false;
        else a.cpu += r.cpu;
        acc.set(key, a);
      }
    }
    console.error(`  round ${round + 1}/${ROUNDS} done`);
  }
  for (const t of targets) await t.client.close().catch(() => undefined);

  const stats = (w, t) => {
    const a = acc.get(`${w.name}|${t.name}`);
    const sorted = a.latencies.sort((x, y) => x - y);
    return {
      rate: a.calls / (a.wall / 1000),
      p50: quantile(sorted, 0.5),
      p99: quantile(sorted, 0.99),
      cpu: a.cpuKnown && t.pid ? a.cpu / a.calls : undefined,
    };
  };
  const header = ['way', 'calls/s', 'p50 ms', 'p99 ms', 'gateway cpu µs/call'];
  console.log(
    '\ngateway vs pass-through proxy (same client, same echo upstream over stdio, same run)',
  );
  const verdicts = [];
  for (const w of workloads) {
    const rows = targets.map((t) => {
      const s = stats(w, t);
      return [
        t.name,
        s.rate.toFixed(0),
        s.p50.toFixed(2),
        s.p99.toFixed(2),
        s.cpu === undefined ? '-' : s.cpu.toFixed(0),
      ];
    });
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    console.log(`\n${w.name}`);
    for (const r of [header, ...rows])
      console.log(`  ${r.map((c, i) => c.padEnd(widths[i])).join('  ')}`);
    const [d, p, ch, cs] = targets.map((t) => stats(w, t));
    const cpuRatio = p.cpu && ch.cpu ? `, gateway cpu ${(ch.cpu / p.cpu).toFixed(2)}×` : '';
    const http = `candor http / proxy http: throughput ${(ch.rate / p.rate).toFixed(2)}×, p50 ${signed(ch.p50 - p.p50)} ms, p99 ${signed(ch.p99 - p.p99)} ms${cpuRatio}`;
    const stdio = `candor stdio / direct: throughput ${(cs.rate / d.rate).toFixed(2)}×, p50 ${signed(cs.p50 - d.p50)} ms; candor stdio / proxy http: ${(cs.rate / p.rate).toFixed(2)}×`;
    console.log(`  ${http}`);
    console.log(`  ${stdio}`);
    if (w.inFlight === IN_FLIGHT) {
      const met = ch.rate / p.rate >= 1 && ch.p50 - p.p50 <= 1;
      verdicts.push(
        `${w.name}: target candor http >= 1.00× proxy throughput and p50 within 1 ms: ${met ? 'met' : 'not met'}`,
      );
    }
  }
  console.log('');
  for (const v of verdicts) console.log(v);
  console.log(
    `(load average ${loadBefore.toFixed(1)} → ${loadavg()[0].toFixed(1)} on ${availableParallelism()} CPUs; ` +
      'the client, the gateway and the echo server share them)',
  );
}

const signed = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(2)}`;

try {
  await main();
} finally {
  for (const c of children) c.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  rmSync(dir, { recursive: true, force: true });
}
