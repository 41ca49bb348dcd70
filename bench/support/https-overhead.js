// The HTTPS mode of bench/http-overhead.js: writes to a self-signed local HTTPS server that answers
// after a delay (a remote API), through the runtime and through raw undici on a keep-alive pool.
// Reports, per write, the TCP+TLS handshakes the server saw (full and resumed) and the p50 the
// runtime adds. The parent makes the certificate (openssl) and runs this in a child process whose
// NODE_EXTRA_CA_CERTS trusts it: the runtime has no "insecure" switch, and gets none for a bench.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** In the parent: makes a certificate, runs the HTTPS mode in a child; returns its exit code. */
export function httpsChild(args) {
  const dir = mkdtempSync(join(tmpdir(), 'candor-bench-tls-'));
  try {
    const made = spawnSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    if (made.error || made.status !== 0) {
      console.log(
        `https mode: skipped (openssl could not make a certificate: ${made.error?.message ?? made.stderr.toString().trim()})`,
      );
      return 0;
    }
    const script = fileURLToPath(new URL('../http-overhead.js', import.meta.url));
    const r = spawnSync(process.execPath, [script, ...args, '--https-child', dir], {
      stdio: 'inherit',
      env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') },
    });
    return r.status ?? 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** In the child: the measurement. */
export async function runHttps(certDir, { seconds, rounds, delayMs }) {
  const dist = new URL('../../dist/', import.meta.url);
  const { createRuntime } = await import(new URL('runtime.js', dist).href);
  const { defineAction } = await import(new URL('engine/action.js', dist).href);
  const { staticCredentials } = await import(new URL('engine/ports.js', dist).href);
  const { openLedger } = await import(new URL('ledger/open.js', dist).href);
  const { Agent, request } = await import('undici');
  const { z } = await import('zod');
  const TOKEN = 'bench-token-0123456789';

  // Handshakes as the server sees them: every TCP connection, and whether its TLS session resumed.
  const seen = { tcp: 0, full: 0, resumed: 0 };
  let created = 0;
  const server = createServer(
    { key: readFileSync(join(certDir, 'key.pem')), cert: readFileSync(join(certDir, 'cert.pem')) },
    (req, res) => {
      req.resume();
      req.on('end', () => {
        created += 1;
        const body = JSON.stringify({ id: `thg_${created}`, state: 'created' });
        setTimeout(() => {
          res.writeHead(201, {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          });
          res.end(body);
        }, delayMs);
      });
    },
  );
  server.on('connection', () => (seen.tcp += 1));
  server.on('secureConnection', (s) => (s.isSessionReused() ? seen.resumed++ : seen.full++));
  await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
  const origin = `https://127.0.0.1:${server.address().port}`;

  const dir = mkdtempSync(join(tmpdir(), 'candor-bench-https-'));
  const opened = await openLedger(`sqlite:${join(dir, 'ledger.db')}`, { durability: 'process' });
  if (!opened.ok) throw new Error(`cannot open the ledger: ${opened.failure.message}`);
  const ledger = opened.value;
  const define = (name, idempotency) =>
    defineAction({
      name,
      class: 'create',
      subject: 'the thing',
      input: z.object({ name: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: '/v1/things',
        body: { ...i, client_ref: ctx.correlation_id },
      }),
      response: z.looseObject({ id: z.string(), state: z.string() }),
      remoteRef: (d) => d.id,
      destination: {
        origin,
        authority_ref: 'vault:bench',
        ...(idempotency
          ? { idempotency: { header: 'Idempotency-Key', honoured: true, retention_ms: 86_400_000 } }
          : {}),
      },
    });
  const keyed = define('create_thing_keyed', true);
  const plain = define('create_thing', false);
  const runtime = createRuntime({
    ledger,
    credentials: staticCredentials({ 'vault:bench': { authorization: `Bearer ${TOKEN}` } }),
    actions: [keyed, plain],
    agent: 'bench',
  });
  let n = 0;
  const viaRuntime = (a) => async () => {
    const env = await runtime.run(a, { name: `thing-${n++}` });
    if (!env.ok) throw new Error(`runtime.run: ${env.category}`);
  };
  const pool = new Agent();
  const raw = async () => {
    const i = n++;
    const res = await request(`${origin}/v1/things`, {
      dispatcher: pool,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${TOKEN}`,
        'idempotency-key': `raw-${i}`,
      },
      body: JSON.stringify({ name: `thing-${i}`, client_ref: `raw-${i}` }),
    });
    await res.body.json();
    if (res.statusCode !== 201) throw new Error('raw: bad answer');
  };

  /** Sequential writes for `secs`: latencies (sorted) and the handshakes seen meanwhile. */
  const measure = async (fn, secs) => {
    const before = { ...seen };
    const latencies = [];
    const stopAt = performance.now() + secs * 1000;
    while (performance.now() < stopAt) {
      const t0 = performance.now();
      await fn();
      latencies.push(performance.now() - t0);
    }
    latencies.sort((a, b) => a - b);
    const per = (k) => (seen[k] - before[k]) / latencies.length;
    return { latencies, tcp: per('tcp'), full: per('full'), resumed: per('resumed') };
  };
  const p50 = (xs) => xs[Math.floor(xs.length / 2)] ?? NaN;
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

  const candidates = { raw, keyed: viaRuntime(keyed), plain: viaRuntime(plain) };
  const results = { raw: [], keyed: [], plain: [] };
  try {
    for (const fn of Object.values(candidates)) await measure(fn, 0.3); // warm-up
    for (let r = 0; r < rounds; r++)
      for (const [k, fn] of Object.entries(candidates)) results[k].push(await measure(fn, seconds));
  } finally {
    await runtime.endSession('bench finished');
    await runtime.close();
    await ledger.close();
    await pool.close();
    await new Promise((r) => server.close(() => r(undefined)));
    rmSync(dir, { recursive: true, force: true });
  }
  const rawP50 = median(results.raw.map((m) => p50(m.latencies)));
  const f2 = (x) => x.toFixed(2);
  const row = (label, ms) => {
    const added = median(ms.map((m) => p50(m.latencies))) - rawP50;
    return {
      writes: label,
      'p50 ms': f2(median(ms.map((m) => p50(m.latencies)))),
      'added p50 ms': f2(added),
      'handshakes/write': f2(median(ms.map((m) => m.tcp))),
      'full TLS/write': f2(median(ms.map((m) => m.full))),
      'resumed TLS/write': f2(median(ms.map((m) => m.resumed))),
      added,
      handshakes: median(ms.map((m) => m.tcp)),
    };
  };
  const rows = [
    row('raw undici, keep-alive pool', results.raw),
    row('runtime, honoured idempotency key', results.keyed),
    row('runtime, no idempotency key', results.plain),
  ];
  console.log(
    `\nhttps: sequential writes to a self-signed local HTTPS server answering after ${delayMs} ms, ${rounds} rounds x ${seconds}s, median round`,
  );
  console.table(rows.map(({ added: _a, handshakes: _h, ...r }) => r));
  const k = rows[1];
  const verdict = (ok) => (ok ? 'met' : 'not met');
  console.log(
    `target: https writes with an honoured key, handshakes per write after warm-up = 0 — measured ${f2(k.handshakes)} (${verdict(k.handshakes < 0.005)})`,
  );
  console.log(
    `target: https writes with an honoured key, added p50 <= 1 ms — measured ${f2(k.added)} ms (${verdict(k.added <= 1)})`,
  );
}
