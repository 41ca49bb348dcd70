// The edges under hostile input (issue 38): a witness answering 300 MB, a lookup answered with
// 300 MB, an upstream MCP server sending one 300 MB message, and the `/audit` page on a big
// ledger. Prints, against a baseline measured in the same run:
//   - the process's peak RSS while a checkpoint is offered to a witness streaming 300 MB (against an
//     honest witness): the answer is read up to 64 KiB and then cut off, so the peak stays flat;
//   - the same for a lookup (`reconcile.max_answer_bytes`, 4 MiB) answered with 300 MB, against a
//     lookup answered with a small list, and for an upstream MCP message of 300 MB over stdio
//     (`max_message_bytes`, 16 MiB) against a small answer: memory stays bounded by the limits;
//   - `/audit` response time on a ledger of --mb MB (default 50) once the background verification
//     has finished, against the same request on a 100-record ledger (target: < 200 ms).
//
//   node bench/hostile-edges.js [--mb N]
//
// Imports the built package from dist/ (run `npm run build` first).
import { createServer } from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setInterval, clearInterval } from 'node:timers';
import { parseArgs } from 'node:util';

const dist = new URL('../dist/', import.meta.url);
if (!existsSync(new URL('ledger/chain/checkpointer.js', dist))) {
  console.error('bench: dist/ is missing — run `npm run build` first');
  process.exit(3);
}
const { createCheckpointer } = await import(new URL('ledger/chain/checkpointer.js', dist).href);
const { generateKey, parseSignerKey, parseVerifierKey, SigType } = await import(
  new URL('ledger/chain/note.js', dist).href
);
const { memoryWitnessState, startWitness } = await import(
  new URL('ledger/chain/witness.js', dist).href
);
const { openMemoryLedger } = await import(new URL('ledger/memory/store.js', dist).href);
const { openSqliteLedger } = await import(new URL('ledger/sqlite/store.js', dist).href);
const { createUi, TOKEN_COOKIE } = await import(new URL('web/server.js', dist).href);

const { values: opts } = parseArgs({ options: { mb: { type: 'string', default: '50' } } });
const MB = Number(opts.mb);

const ORIGIN = 'bench.candor/hostile';
const logKey = generateKey(ORIGIN);
const witnessKey = generateKey('bench.witness', SigType.cosignature_v1);
const must = (r) => {
  if (!r.ok) throw new Error(r.failure);
  return r.value;
};

const event = (i, pad = '') => ({
  kind: 'gate_changed',
  at: 1_767_225_600_000 + i,
  session_id: null,
  operation_id: null,
  correlation_id: `c-${i}`,
  data: { locked: false, by: `operator-${i}${pad}` },
});

/** Peak RSS (MB) sampled every 5 ms while `fn` runs. */
async function peakRss(fn) {
  globalThis.gc?.();
  let peak = process.memoryUsage().rss;
  const t = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
  const started = performance.now();
  await fn();
  clearInterval(t);
  return {
    mb: Math.max(peak, process.memoryUsage().rss) / 2 ** 20,
    ms: performance.now() - started,
  };
}

async function checkpointAgainst(url) {
  const ledger = openMemoryLedger();
  for (let i = 1; i <= 10; i++) await ledger.append([event(i)]);
  const cp = createCheckpointer({
    ledger,
    signer: must(parseSignerKey(logKey.signerKey)),
    origin: ORIGIN,
    witness: { url, key: must(parseVerifierKey(witnessKey.verifierKey)) },
  });
  const stored = await cp.checkpoint();
  return stored.data;
}

// Baseline: an honest witness.
const honest = await startWitness({
  signer: must(parseSignerKey(witnessKey.signerKey)),
  logs: [must(parseVerifierKey(logKey.verifierKey))],
  state: memoryWitnessState(),
});
const base = await peakRss(() => checkpointAgainst(honest.url));
await honest.close();

// The hostile witness: 200 OK and 300 MB of 'a', written as fast as the client reads.
const TOTAL = 300 * 2 ** 20;
let written = 0;
const hostile = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const pump = () => {
      while (written < TOTAL && !res.destroyed) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      if (!res.destroyed) res.end();
    };
    pump();
  });
});
await new Promise((r) => hostile.listen(0, '127.0.0.1', r));
const hostileUrl = `http://127.0.0.1:${hostile.address().port}`;
let data;
const bad = await peakRss(async () => {
  data = await checkpointAgainst(hostileUrl);
});
hostile.closeAllConnections();
hostile.close();
console.log(
  `witness 300 MB answer: peak RSS ${bad.mb.toFixed(0)} MB vs ${base.mb.toFixed(0)} MB honest (×${(bad.mb / base.mb).toFixed(2)}); ` +
    `${bad.ms.toFixed(0)} ms; server wrote ${(written / 2 ** 20).toFixed(1)} MB; outcome ${data.witness_problem_code}`,
);

// A lookup answered with 300 MB (the operation was left unknown by a dropped connection).
const { createRuntime } = await import(new URL('runtime.js', dist).href);
const { defineAction } = await import(new URL('engine/action.js', dist).href);
const { staticCredentials } = await import(new URL('engine/ports.js', dist).href);
const { z } = await import('zod');
async function lookupRss(hugeAnswer) {
  let sent = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'POST') return void req.socket.destroy();
      res.writeHead(200, { 'content-type': 'application/json' });
      if (!hugeAnswer) return void res.end('{"items":[]}');
      res.write('{"items":[');
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const pump = () => {
        while (sent < TOTAL && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end(']}');
      };
      pump();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${server.address().port}`;
  const record = z.looseObject({ id: z.string() });
  const create = defineAction({
    name: 'create_item',
    class: 'create',
    subject: 'the item',
    input: z.object({}),
    request: () => ({ method: 'POST', path: '/v1/items', body: {} }),
    response: record,
    remoteRef: (d) => d.id,
    destination: {
      origin,
      authority_ref: 'vault:bench',
      reconciliation: {
        lookup: (ctx) => ({ method: 'GET', path: `/v1/items?ref=${ctx.correlation_id}` }),
        matches: (body) => body.items.map((r) => ({ ref: r.id, record: r })),
      },
    },
  });
  const rt = createRuntime({
    ledger: openMemoryLedger(),
    credentials: staticCredentials({ 'vault:bench': {} }),
    actions: [create],
    sleep: () => Promise.resolve(),
  });
  const env = await rt.run(create, {});
  let out;
  const r = await peakRss(async () => {
    out = await rt.reconcile(env.operation_id);
  });
  await rt.close();
  server.closeAllConnections();
  server.close();
  return { ...r, sent, category: out.category };
}
const lookupBase = await lookupRss(false);
const lookupBad = await lookupRss(true);
console.log(
  `lookup 300 MB answer: peak RSS ${lookupBad.mb.toFixed(0)} MB vs ${lookupBase.mb.toFixed(0)} MB small (×${(lookupBad.mb / lookupBase.mb).toFixed(2)}); ` +
    `${lookupBad.ms.toFixed(0)} ms; server wrote ${(lookupBad.sent / 2 ** 20).toFixed(1)} MB; outcome ${lookupBad.category}`,
);

// An upstream MCP server (stdio) answering one call with a 300 MB line.
const { upstreamConnection } = await import(new URL('upstream/connection.js', dist).href);
const oversized = new URL('../test/fixtures/upstream/oversized-server.mjs', import.meta.url);
const conn = upstreamConnection(
  'bench',
  async () => ({ kind: 'stdio', command: process.execPath, args: [oversized.pathname], env: {} }),
  {},
);
await conn.listTools();
let facts;
const mcpBase = await peakRss(async () => {
  facts = await conn.call('small', {}, { id: 'b1', deadline_ms: 30_000 });
});
const mcpBad = await peakRss(async () => {
  facts = await conn.call('huge', {}, { id: 'b2', deadline_ms: 60_000 });
});
await conn.close();
console.log(
  `upstream MCP 300 MB message (stdio): peak RSS ${mcpBad.mb.toFixed(0)} MB vs ${mcpBase.mb.toFixed(0)} MB small (×${(mcpBad.mb / mcpBase.mb).toFixed(2)}); ` +
    `${mcpBad.ms.toFixed(0)} ms; outcome ${facts.stage} ${facts.error_code ?? ''}`,
);

// /audit on a big ledger: served from the background verification's cache.
async function auditTiming(records, pad) {
  const dir = mkdtempSync(join(tmpdir(), 'candor-bench-audit-'));
  const store = openSqliteLedger(join(dir, 'ledger.db'));
  for (let i = 1; i <= records; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(i + 1000, records + 1); j++) batch.push(event(j, pad));
    await store.append(batch);
  }
  const ui = await createUi({ store, ledger: 'sqlite:bench', hosts: ['b:1'], token: 't' });
  await ui.auditIdle();
  const times = [];
  for (let k = 0; k < 20; k++) {
    const t = performance.now();
    const res = await ui.app.request('/audit', {
      headers: { host: 'b:1', cookie: `${TOKEN_COOKIE}=t` },
    });
    await res.text();
    times.push(performance.now() - t);
  }
  await ui.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  times.sort((a, b) => a - b);
  return { p50: times[10], max: times.at(-1) };
}
const pad = '.'.repeat(400);
const perRecord = 650;
const small = await auditTiming(100, pad);
const big = await auditTiming(Math.round((MB * 2 ** 20) / perRecord), pad);
console.log(
  `/audit on a ${MB} MB ledger (cached): p50 ${big.p50.toFixed(1)} ms, max ${big.max.toFixed(1)} ms ` +
    `vs ${small.p50.toFixed(1)} ms on 100 records (×${(big.p50 / small.p50).toFixed(2)}); target < 200 ms`,
);
