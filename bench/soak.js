// Soak benchmark: N actions (default 100,000) through the MCP gateway over stdio — `candor serve`
// as a child process, a real MCP client from @modelcontextprotocol/sdk — against the fake service,
// with the embedded SQLite ledger. Reports the gateway's RSS and heap after a warm-up and at the end
// (both after a full garbage collection, taken inside the gateway by bench/support/memory-probe.js)
// and checks that nothing was lost: every call answered ok, the fake created one record per call,
// and the ledger holds one opened and one resolved operation per call.
//
//   npm run build && node bench/soak.js [--actions N] [--inflight K] [--warmup W]
//
// Target: RSS and heap growth from the warm-up sample to the end ≤ 20%, ledger count = calls.
// Imports the built package from dist/ (run `npm run build` first).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const dist = new URL('../dist/', import.meta.url);
if (!existsSync(new URL('fakes/index.js', dist))) {
  console.error('bench/soak: dist/ is missing — run `npm run build` first');
  process.exit(3);
}
const { startFakeService } = await import(new URL('fakes/index.js', dist).href);
const { openSqliteLedger } = await import(new URL('ledger/sqlite/store.js', dist).href);

// bench/run.js hands every bench the same arguments: ignore the ones that are not ours.
const { values: opts } = parseArgs({
  strict: false,
  options: {
    actions: { type: 'string', default: '100000' },
    inflight: { type: 'string', default: '16' },
    warmup: { type: 'string', default: '2000' },
  },
});
const N = Number(opts.actions);
const INFLIGHT = Number(opts.inflight);
const WARMUP = Math.min(Number(opts.warmup), Math.floor(N / 10));
if (!(N > 0 && INFLIGHT > 0)) {
  console.error('usage: node bench/soak.js [--actions N] [--inflight K] [--warmup W]');
  process.exit(2);
}
const TARGET_GROWTH = 0.2;
const TOKEN = 'tok-soak-5d1e0c3b7a';
const bin = fileURLToPath(new URL('../bin/candor.js', import.meta.url));
const probe = new URL('support/memory-probe.js', import.meta.url).href;

const dir = mkdtempSync(join(tmpdir(), 'candor-soak-'));
const fake = await startFakeService({ seed: 1, tokens: [{ name: 'soak', token: TOKEN }] });
const ledgerPath = join(dir, 'ledger.db');
const memFile = join(dir, 'memory.jsonl');
writeFileSync(memFile, '');
writeFileSync(
  join(dir, 'candor.yaml'),
  `ledger: 'sqlite:${ledgerPath}'
credentials:
  fake: { ref: env:CANDOR_SOAK_TOKEN, scheme: Bearer }
destinations:
  records: { origin: ${fake.url}, credential: fake, route_prefix: /v1/records }
actions:
  - name: create_record
    class: create
    subject: the record
    description: Create a record with a title.
    destination: records
    request:
      method: POST
      path: /v1/records
      body: { title: '{{input.title}}', client_ref: '{{operation_id}}' }
    input:
      type: object
      properties: { title: { type: string, minLength: 1 } }
      required: [title]
      additionalProperties: false
    response:
      type: object
      properties: { id: { type: string }, title: { type: string } }
      required: [id]
    remote_ref: id
    reconcile: { method: GET, path: '/v1/records?client_ref={{operation_id}}', items: items, ref: id }
`,
);

const transport = new StdioClientTransport({
  command: process.execPath,
  args: ['--expose-gc', '--import', probe, bin, 'serve', '--config', join(dir, 'candor.yaml')],
  env: { PATH: process.env.PATH ?? '', CANDOR_SOAK_TOKEN: TOKEN, CANDOR_SOAK_MEMORY: memFile },
  cwd: dir,
  stderr: 'pipe',
});
let stderr = '';
transport.stderr?.on('data', (d) => (stderr += d.toString('utf8')));
const client = new Client({ name: 'candor-soak', version: '1.0.0' });

/** The gateway's memory after a full GC, as its own process.memoryUsage() sees it. */
async function sample() {
  const before = readFileSync(memFile, 'utf8').split('\n').filter(Boolean).length;
  process.kill(transport.pid, 'SIGUSR2');
  for (let i = 0; i < 500; i++) {
    const lines = readFileSync(memFile, 'utf8').split('\n').filter(Boolean);
    if (lines.length > before) return JSON.parse(lines.at(-1));
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the gateway did not report its memory');
}

let ok = 0;
let failed = 0;
const failures = new Map();
async function drive(from, to) {
  let next = from;
  const worker = async () => {
    while (next < to) {
      const i = next++;
      const res = await client.callTool({ name: 'create_record', arguments: { title: `t${i}` } });
      if (res.structuredContent?.ok === true) ok++;
      else {
        failed++;
        const c = String(res.structuredContent?.category ?? 'no envelope');
        failures.set(c, (failures.get(c) ?? 0) + 1);
      }
    }
  };
  await Promise.all(Array.from({ length: INFLIGHT }, worker));
}

const mb = (b) => `${(b / 1048576).toFixed(1)} MB`;
let code = 0;
try {
  await client.connect(transport);
  const t0 = performance.now();
  await drive(0, WARMUP);
  const start = await sample();
  const t1 = performance.now();
  let done = WARMUP;
  const step = Math.max(1, Math.floor((N - WARMUP) / 4));
  const mid = [];
  while (done < N) {
    const to = Math.min(N, done + step);
    await drive(done, to);
    done = to;
    if (done < N) mid.push(await sample());
  }
  const end = await sample();
  const secs = (performance.now() - t1) / 1000;
  await client.close();

  const ledger = openSqliteLedger(ledgerPath);
  const kinds = new Map();
  for (let from = 1; ;) {
    const page = await ledger.read(from, 20_000);
    if (page.length === 0) break;
    for (const e of page) kinds.set(e.kind, (kinds.get(e.kind) ?? 0) + 1);
    from = page.at(-1).seq + 1;
  }
  await ledger.close();
  const created = fake.resources.all('records').length;

  const growth = (a, b) => (b - a) / a;
  const rssGrowth = growth(start.rss, end.rss);
  const heapGrowth = growth(start.heapUsed, end.heapUsed);
  console.log(
    `soak: ${N} actions (${WARMUP} warm-up) through candor serve over stdio, ${INFLIGHT} in flight, ` +
      `${((N - WARMUP) / secs).toFixed(0)} actions/s after warm-up (${((performance.now() - t0) / 1000).toFixed(1)} s in all)`,
  );
  console.log(
    `gateway RSS:  start ${mb(start.rss)}, end ${mb(end.rss)} (${(rssGrowth * 100).toFixed(1)}%)` +
      `; along the way ${mid.map((m) => mb(m.rss)).join(', ') || '-'}`,
  );
  console.log(
    `gateway heap: start ${mb(start.heapUsed)}, end ${mb(end.heapUsed)} (${(heapGrowth * 100).toFixed(1)}%)` +
      `; along the way ${mid.map((m) => mb(m.heapUsed)).join(', ') || '-'}`,
  );
  const grew = Math.max(rssGrowth, heapGrowth) <= TARGET_GROWTH;
  console.log(`target memory growth <= ${TARGET_GROWTH * 100}%: ${grew ? 'met' : 'NOT MET'}`);
  const opened = kinds.get('operation_opened') ?? 0;
  const resolved = kinds.get('operation_resolved') ?? 0;
  const complete = ok === N && created === N && opened === N && resolved === N;
  console.log(
    `calls ${N}: ok ${ok}, not ok ${failed}${failures.size ? ` (${[...failures].map(([k, v]) => `${k} ${v}`).join(', ')})` : ''}; ` +
      `fake records ${created}; ledger operation_opened ${opened}, operation_resolved ${resolved}, ` +
      `attempt_started ${kinds.get('attempt_started') ?? 0}, attempt_finished ${kinds.get('attempt_finished') ?? 0}`,
  );
  console.log(`target ledger count = calls (no event lost): ${complete ? 'met' : 'NOT MET'}`);
  if (!grew || !complete) code = 1;
} catch (e) {
  console.error(
    `bench/soak: ${e instanceof Error ? e.message : String(e)}\n${stderr.slice(-2000)}`,
  );
  code = 3;
} finally {
  await client.close().catch(() => undefined);
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);
