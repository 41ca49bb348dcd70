// Fleet append benchmark: events/s that 1 and 4 gateway processes reach together on one
// PostgreSQL ledger (each process its own connection pool, all extending one hash chain under the
// append lock), and the ratio 4 : 1 measured in the same run. Each gateway appends the three
// events of an operation (opened, attempt started, attempt finished) per round trip, with several
// operations in flight, and holds an ownership lease as a fleet member does.
//
//   node bench/fleet-append.js [--seconds S] [--inflight N]
//
// Imports the built package from dist/ (run `npm run build` first). Needs PostgreSQL (initdb).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const dist = new URL('../dist/ledger/', import.meta.url);
if (!existsSync(new URL('postgres/store.js', dist))) {
  console.error('bench: dist/ is missing — run `npm run build` first');
  process.exit(3);
}
const { values: opts } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    inflight: { type: 'string', default: '8' },
    child: { type: 'string' },
    url: { type: 'string' },
  },
  // bench/run.js passes every benchmark the same arguments.
  strict: false,
});
const SECONDS = Number(opts.seconds);
const INFLIGHT = Number(opts.inflight);

if (opts.child !== undefined) {
  // One gateway: append operations for SECONDS, print how many events were stored.
  const { openPostgresLedger } = await import(new URL('postgres/store.js', dist).href);
  const ledger = await openPostgresLedger(opts.url, { schema: 'fleet_bench' });
  const owner = opts.child;
  const start = Date.now();
  await ledger.leases.heartbeat(owner, start, start + 30_000);
  let n = 0;
  let events = 0;
  const op = (i) => `op_${owner}_${i}`;
  const base = (i) => ({
    at: Date.now(),
    session_id: `ses_${owner}`,
    operation_id: op(i),
    correlation_id: null,
  });
  const worker = async () => {
    while (Date.now() - start < SECONDS * 1000) {
      const i = n++;
      await ledger.append([
        {
          ...base(i),
          kind: 'operation_opened',
          data: {
            owner,
            action: 'create_deployment',
            action_class: 'create',
            intent: { kind: 'create_deployment', subject_ref: null, params_digest: 'd'.repeat(64) },
            destination: { method: 'POST', route_template: '/v1/deployments' },
            idempotency_key: null,
            supersedes_operation_id: null,
            attempt_budget: 3,
            params: { i },
          },
        },
      ]);
      await ledger.append([
        {
          ...base(i),
          kind: 'attempt_started',
          data: {
            attempt_id: `att_${owner}_${i}`,
            number: 1,
            worker: owner,
            retry_of_attempt_id: null,
            retry_reason: null,
            retry_decision: null,
            attempt_budget_remaining: 2,
            request_fingerprint: `sha256:${'a'.repeat(64)}`,
            prior_request_fingerprint: null,
            credential_ref: null,
            destination: { method: 'POST' },
          },
        },
      ]);
      await ledger.append([
        {
          ...base(i),
          kind: 'attempt_finished',
          data: {
            attempt_id: `att_${owner}_${i}`,
            dispatch_state: 'response_received',
            category: 'succeeded',
            retry: 'never',
            remote_effect: 'applied',
            rule: 'status_2xx',
            phases: {},
            response: null,
            duration_ms: 1,
            diagnostics_ref: null,
            diagnostics: null,
          },
        },
      ]);
      events += 3;
    }
  };
  await Promise.all(Array.from({ length: INFLIGHT }, worker));
  await ledger.close();
  process.stdout.write(`${events}\n`);
  process.exit(0);
}

const { findPostgresBin, startThrowawayPostgres } = await import('./support/postgres.js');
const found = findPostgresBin();
if (!found.ok) {
  console.error(`bench: PostgreSQL cannot run here: ${found.reason}`);
  process.exit(3);
}
const server = await startThrowawayPostgres({ fsync: true });
const self = fileURLToPath(import.meta.url);

/** Runs `gateways` processes at once; answers events/s of all of them together. */
async function fleet(gateways, round) {
  const runs = Array.from({ length: gateways }, (_, g) => {
    const proc = spawn(process.execPath, [
      self,
      '--child',
      `gw${round}-${g}`,
      '--url',
      server.url,
      '--seconds',
      String(SECONDS),
      '--inflight',
      String(INFLIGHT),
    ]);
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    return new Promise((resolve, reject) =>
      proc.on('exit', (code) =>
        code === 0 ? resolve(Number(out.trim())) : reject(new Error(`gateway exited ${code}`)),
      ),
    );
  });
  const counts = await Promise.all(runs);
  return counts.reduce((a, b) => a + b, 0) / SECONDS;
}

try {
  // Create the schema once so no gateway's timing includes the migration.
  const { openPostgresLedger } = await import(new URL('postgres/store.js', dist).href);
  await (await openPostgresLedger(server.url, { schema: 'fleet_bench' })).close();
  const one = await fleet(1, 'a');
  const four = await fleet(4, 'b');
  console.log('PostgreSQL ledger, appends by gateway processes (3 events per operation)');
  console.log(`  1 gateway : ${one.toFixed(0)} events/s (baseline)`);
  console.log(
    `  4 gateways: ${four.toFixed(0)} events/s (${(four / one).toFixed(2)}x the baseline)`,
  );
} finally {
  await server.stop();
}
