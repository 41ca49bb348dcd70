// A fleet on one PostgreSQL ledger (started by the test): three gateway processes run faulted
// operations against the fake; one is SIGKILLed mid-flight (its request committed, the reply held
// back); the survivors, sweeping concurrently, take its operation over once its lease lapses and
// settle it. Afterwards: one chain, `audit verify` INTACT, nothing unresolved, each taken-over
// operation has exactly one new owner, and the fake's ground truth shows no duplicate effect.
//
// 1,000 faulted operations per gateway (about 25 s here); FLEET_OPS sets fewer or more.
// bench/ledger-append.js measures the append rate of 1 vs 4 gateways against raw inserts.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as audit } from '../src/cli/commands/audit.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { staticCredentials } from '../src/engine/ports.js';
import { opened } from '../src/ledger/contract.case.js';
import { openPostgresLedger } from '../src/ledger/postgres/store.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';
import { createRuntime } from '../src/runtime.js';
import { projectOperations } from '../src/ledger/projection.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from './support/postgres.js';

const skip = postgresSkipReason();
const TOKEN = 'fleet-canary-token-93c1';
const OPS = Number(process.env['FLEET_OPS'] ?? 1000);
const LEASE_MS = 3_000;
const HUNG = 'gw-1-3'; // gw-1's fourth operation: committed by the fake, reply held back
const child = fileURLToPath(new URL('./fixtures/fleet/gateway.mjs', import.meta.url));
let server: ThrowawayPostgres | undefined;
let fake: FakeService;

beforeAll(async () => {
  if (skip !== undefined) return;
  server = await startPostgres();
  fake = await startFakeService({ tokens: [{ name: 'gateway', token: TOKEN }] });
});
const ownRuntimes: Array<{ close(): Promise<void> }> = [];
afterAll(async () => {
  // Each runtime owns its connection pools.
  await Promise.all(ownRuntimes.map((rt) => rt.close()));
  await fake?.close();
  await server?.stop();
});

interface Gateway {
  proc: ChildProcess;
  out: () => string;
  exited: Promise<NodeJS.Signals | number | null>;
}

function gateway(url: string, name: string): Gateway {
  const proc = spawn(
    process.execPath,
    [child, url, fake.url, TOKEN, name, String(OPS), String(LEASE_MS)],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
    proc.on('exit', (code, signal) => {
      if (code !== 0 && signal === null) console.error(`${name} failed: ${err}`);
      resolve(signal ?? code);
    }),
  );
  return { proc, out: () => out, exited };
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms: number) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Faults per operation: a reset after commit, a 429 before anything is done, or nothing. */
function armFaults(name: string): void {
  for (let i = 0; i < OPS; i++) {
    const call_id = `${name}-${i}`;
    if (call_id === HUNG) {
      fake.arm({ call_id, phase: 'after_commit', action: 'delay', delay_ms: 120_000 });
    } else if (i % 5 === 1) {
      fake.arm({ call_id, phase: 'after_commit', action: 'rst' });
    } else if (i % 7 === 2) {
      fake.arm({ call_id, phase: 'status', status: 429, retry_after: 0 });
    }
  }
}

describe.skipIf(skip !== undefined)('a fleet of gateways on one PostgreSQL ledger', () => {
  it(
    'three gateways, one SIGKILLed mid-flight: a survivor takes over and settles; one chain, no duplicate effect',
    { timeout: 300_000 },
    async () => {
      const url = `${server!.url}${server!.url.includes('?') ? '&' : '?'}schema=fleet`;
      const names = ['gw-1', 'gw-2', 'gw-3'];
      for (const n of names) armFaults(n);
      const gws = names.map((n) => gateway(url, n));
      const [g1, g2, g3] = gws as [Gateway, Gateway, Gateway];

      await until(
        `${HUNG} to be committed`,
        () => fake.groundTruth(HUNG).some((t) => t.event === 'mutation_committed'),
        120_000,
      );
      g1.proc.kill('SIGKILL');
      expect(await g1.exited).toBe('SIGKILL');

      const ledger = await openPostgresLedger(server!.url, { schema: 'fleet' });
      try {
        await until(
          'the survivors to finish their operations',
          () => [g2, g3].every((g) => g.out().includes('ops done')),
          240_000,
        );
        // The dead gateway's operation is taken over once its lease lapses, then settled.
        await until(
          'nothing unresolved',
          async () => (await ledger.unresolved()).length === 0,
          60_000,
        );
        for (const g of [g2, g3]) g.proc.stdin!.end();
        expect(await g2.exited).toBe(0);
        expect(await g3.exited).toBe(0);

        const events = await ledger.read();
        const ops = projectOperations(events);
        // One chain: consecutive seqs, each record chained to the one before.
        events.forEach((e, i) => {
          expect(e.seq).toBe(i + 1);
          if (i > 0) expect(e.prev_hash).toBe(events[i - 1]!.hash);
        });
        let out = '';
        const code = await audit(['verify', url, '--json'], {
          out: (s) => void (out += s),
          err: () => undefined,
        });
        expect(code).toBe(0);
        expect((JSON.parse(out) as { code: string }).code).toBe('INTACT');

        // Every operation is settled; the hung one by a survivor that took it over exactly once.
        expect(ops.filter((o) => o.state !== 'succeeded')).toEqual([]);
        const hung = ops.find((o) => o.correlation_id === HUNG)!;
        expect(hung.owner_changes).toHaveLength(1);
        expect(hung.owner_changes[0]).toMatchObject({ from: 'gw-1', reason: 'lease_expired' });
        expect(['gw-2', 'gw-3']).toContain(hung.owner);
        for (const o of ops) expect(o.owner_changes.length).toBeLessThanOrEqual(1);
        // gw-1 got no further than its hung operation; the survivors ran all of theirs.
        expect(ops.filter((o) => o.owner === 'gw-2')).toHaveLength(
          OPS + (hung.owner === 'gw-2' ? 1 : 0),
        );
        expect(ops.filter((o) => o.correlation_id?.startsWith('gw-1-'))).toHaveLength(4);

        // Ground truth: every settled operation committed exactly once at the fake.
        for (const o of ops) {
          const commits = fake
            .groundTruth(o.correlation_id!)
            .filter((t) => t.event === 'mutation_committed');
          expect(commits, o.correlation_id!).toHaveLength(1);
        }
        expect(JSON.stringify(events)).not.toContain(TOKEN);
      } finally {
        await ledger.close();
        for (const g of gws) if (g.proc.exitCode === null) g.proc.kill('SIGKILL');
      }
    },
  );

  it(
    'two gateways recover the same dead owner concurrently: each operation gets exactly one new owner and one lookup',
    { timeout: 120_000 },
    async () => {
      const schema = 'fleet_race';
      // The reference actions' 400 ms deadlines suit the matrix's delay faults; here a lookup that
      // times out on a loaded machine would leave an operation for a person, and this test is
      // about who owns it, not about timing.
      const actions = referenceActions(fake.url).map((a) => ({
        ...a,
        timeouts: {
          total_ms: 30_000,
          connect_ms: 10_000,
          first_byte_ms: 30_000,
          body_idle_ms: 10_000,
        },
      }));
      const deploy = actions.find((a) => a.name === 'create_deployment')!;
      const credentials = staticCredentials({
        [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` },
      });
      const handle = () => openPostgresLedger(server!.url, { schema });
      // The dead owner: its clock a minute behind, so its 30 s lease has lapsed by real time.
      const deadLedger = await handle();
      const dead = createRuntime({
        ledger: deadLedger,
        credentials,
        actions,
        owner: 'gw-dead',
        lease: { ttl_ms: 30_000 },
        clock: { now: () => Date.now() - 60_000 },
      });
      ownRuntimes.push(dead);
      const ops: string[] = [];
      for (let i = 0; i < 12; i++) {
        const cor = `race-${i}`;
        fake.arm({ call_id: cor, phase: 'after_commit', action: 'rst' });
        const env = await dead.run(
          deploy,
          { service: 'race', version: `${i}` },
          { correlationId: cor },
        );
        expect(env.category).toBe('outcome_unknown');
        ops.push(env.operation_id!);
      }
      await deadLedger.close();

      const gateways = await Promise.all(
        ['gw-b', 'gw-c'].map(async (owner) => {
          const ledger = await handle();
          const rt = createRuntime({
            ledger,
            credentials,
            actions,
            owner,
            lease: { ttl_ms: 30_000 },
          });
          ownRuntimes.push(rt);
          return { ledger, rt };
        }),
      );
      try {
        const reports = await Promise.all(gateways.map((g) => g.rt.recover()));
        // Each operation is settled by exactly one of them; the other, if it met the operation
        // after the winner took it over but before it settled, reports it left to that owner
        // (sending and looking up nothing).
        const items = reports.flat();
        const found = items.filter((i) => i.outcome === 'found_by_lookup');
        expect(found.map((i) => i.operation_id).sort()).toEqual([...ops].sort());
        const others = items.filter((i) => i.outcome !== 'found_by_lookup');
        for (const i of others) {
          expect(i.outcome).toBe('left_to_owner');
          expect(i.detail).toMatch(
            /owned by gw-[bc](, whose lease is live until|, not gw-dead: another gateway took it over first)/,
          );
          expect(i.envelope.remote_effect).not.toBe('none');
        }
        const check = gateways[0]!.ledger;
        for (const [i, op] of ops.entries()) {
          const changes = (await check.query({ operation_id: op })).filter(
            (e) => e.kind === 'owner_changed',
          );
          expect(changes).toHaveLength(1);
          expect(changes[0]!.data).toMatchObject({ from: 'gw-dead', reason: 'lease_expired' });
          const lookups = fake
            .groundTruth(`race-${i}.lookup`)
            .filter((t) => t.event === 'received' && t.method === 'GET');
          expect(lookups).toHaveLength(1);
        }
      } finally {
        for (const g of gateways) await g.ledger.close();
      }
    },
  );

  it('LISTEN/NOTIFY: a watcher hears of another gateway’s commit without polling', async () => {
    const a = await openPostgresLedger(server!.url, { schema: 'fleet_notify' });
    const b = await openPostgresLedger(server!.url, { schema: 'fleet_notify' });
    try {
      let heard = 0;
      let wake!: () => void;
      const woken = new Promise<void>((r) => (wake = r));
      const stop = await a.watch!(() => {
        heard++;
        wake();
      });
      const stored = await b.append([opened('op_notify_1')]);
      await woken;
      expect(heard).toBeGreaterThanOrEqual(1);
      expect((await a.read(stored[0]!.seq)).map((e) => e.operation_id)).toEqual(['op_notify_1']);
      await stop();
      await b.append([opened('op_notify_2')]);
      // After stop() nothing more is delivered: a read of the new head proves the append landed.
      expect((await a.read(stored[0]!.seq + 1)).map((e) => e.operation_id)).toEqual([
        'op_notify_2',
      ]);
      expect(heard).toBe(1);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
