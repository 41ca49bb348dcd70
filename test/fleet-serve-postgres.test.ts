// `candor serve` fleets end to end on a real PostgreSQL (started by the test), through the built
// dist/ and real MCP clients over stdio:
// - a gateway stopped cleanly releases its lease and announces it (NOTIFY): another gateway, whose
//   periodic sweep is an hour away, takes the unresolved operation over at once and settles it;
// - a gateway started with `recover_on_start` takes over a SIGKILLed gateway's operation once the
//   dead one's lease has lapsed;
// - `candor ops follow` (a child process) prints what another connection appends, and exits 0 on
//   SIGINT.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelopeSchema } from '../src/core/envelope.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { opened } from '../src/ledger/contract.case.js';
import type { StoredEvent } from '../src/ledger/events.js';
import { openPostgresLedger } from '../src/ledger/postgres/store.js';
import { projectOperation } from '../src/ledger/projection.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';
import {
  connectStdio,
  ROOT,
  tempDir,
  writeConfig,
  type StdioGateway,
} from './fixtures/mcp/stdio.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from './support/postgres.js';

const skip = postgresSkipReason();
let server: ThrowawayPostgres | undefined;
let fake: FakeService;

beforeAll(async () => {
  if (skip !== undefined) return;
  server = await startPostgres();
  fake = await startFakeService({ tokens: [{ name: 'agent', token: TEST_TOKEN }] });
});
afterAll(async () => {
  await fake?.close();
  await server?.stop();
});

const urlOf = (schema: string) =>
  `${server!.url}${server!.url.includes('?') ? '&' : '?'}schema=${schema}`;

/** `candor serve` with a `fleet:` section, on the given ledger. */
async function serve(
  url: string,
  fleet: { lease_ms: number; recover_on_start: boolean; sweep_every_ms: number },
): Promise<StdioGateway> {
  const dir = tempDir('candor-fleet-serve-');
  const config = writeConfig(
    dir,
    `${testConfigYaml({ origin: fake.url, ledger: url })}fleet:
  lease_ms: ${fleet.lease_ms}
  recover_on_start: ${fleet.recover_on_start}
  sweep_every_ms: ${fleet.sweep_every_ms}
`,
  );
  return connectStdio(['--config', config], { [TEST_TOKEN_VAR]: TEST_TOKEN }, dir);
}

async function until(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  // A wait for a state, not a timed assertion: the test's own timeout bounds it.
  while (!(await check())) {
    await new Promise((r) => setTimeout(r, 50));
  }
  void what;
}

const ownerChanges = (events: StoredEvent[]) =>
  events.flatMap((e) => (e.kind === 'owner_changed' ? [e.data] : []));

async function createRecordLost(gw: StdioGateway, title: string) {
  // The fake commits the record and resets the connection: the outcome is unknown.
  fake.arm({
    match: { method: 'POST', path: '/v1/records' },
    phase: 'after_commit',
    action: 'rst',
  });
  const r = await gw.client.callTool({ name: 'create_record', arguments: { title } });
  const env = envelopeSchema.parse(r.structuredContent);
  expect(env).toMatchObject({ ok: false, category: 'outcome_unknown', remote_effect: 'unknown' });
  return env.operation_id!;
}

describe.skipIf(skip !== undefined)('candor serve fleets on PostgreSQL', () => {
  it(
    'a cleanly stopped gateway releases its lease and another takes its operation over at once, woken by the notification',
    { timeout: 120_000 },
    async () => {
      const url = urlOf('fleet_release');
      // B's periodic sweep is an hour away: only the release notification can wake it in time.
      const b = await serve(url, {
        lease_ms: 30_000,
        recover_on_start: true,
        sweep_every_ms: 3_600_000,
      });
      const a = await serve(url, {
        lease_ms: 30_000,
        recover_on_start: true,
        sweep_every_ms: 3_600_000,
      });
      const ledger = await openPostgresLedger(server!.url, { schema: 'fleet_release' });
      try {
        const op = await createRecordLost(a, 'released');
        const ownerA = projectOperation(await ledger.query({ operation_id: op }))!.owner!;
        // A's lease is live (30 s): B leaves the operation alone while A runs.
        expect(ownerChanges(await ledger.query({ operation_id: op }))).toEqual([]);

        await a.close(); // stdin ends: A finishes, ends its session and releases its lease
        await until(
          'B to take the operation over',
          async () => (await ledger.unresolved()).length === 0,
        );
        const events = await ledger.query({ operation_id: op });
        const [change] = ownerChanges(events);
        expect(ownerChanges(events)).toHaveLength(1);
        expect(change).toMatchObject({ from: ownerA, reason: 'lease_expired', by: 'sweep' });
        expect(change!.to).not.toBe(ownerA);
        const view = projectOperation(events)!;
        expect(view).toMatchObject({ owner: change!.to, state: 'succeeded' });
        // Settled by a lookup, never sent again: one record at the fake.
        expect(view.attempts).toHaveLength(1);
        expect(fake.resources.all('records').filter((r) => r['title'] === 'released')).toHaveLength(
          1,
        );
        // The pass that did it was the one the release woke (B's timer is an hour away). It logs
        // once the pass is over, just after its last record.
        await until('B to report the pass', () => b.stderr().includes('took over'));
        expect(b.stderr()).toContain(
          `candor serve: ${ownerA} released its lease: took over 1 operation(s) of lapsed gateways; 1 settled, 0 need a person`,
        );
        // B reports the same through MCP.
        const status = await b.client.callTool({
          name: 'operation_status',
          arguments: { operation_id: op },
        });
        expect(envelopeSchema.parse(status.structuredContent)).toMatchObject({
          ok: true,
          category: 'succeeded',
          operation_id: op,
        });
      } finally {
        await ledger.close();
        await b.close();
      }
    },
  );

  it(
    'recover_on_start takes over a SIGKILLed gateway’s operation once its lease has lapsed',
    { timeout: 120_000 },
    async () => {
      const url = urlOf('fleet_start');
      const ledger = await openPostgresLedger(server!.url, { schema: 'fleet_start' });
      const dead = await serve(url, {
        lease_ms: 1_000,
        recover_on_start: false,
        sweep_every_ms: 0,
      });
      let c: StdioGateway | undefined;
      try {
        const op = await createRecordLost(dead, 'orphaned');
        const events = await ledger.query({ operation_id: op });
        const deadOwner = projectOperation(events)!.owner!;
        const pid = (await ledger.read()).flatMap((e) =>
          e.kind === 'session_started' && e.data.owner === deadOwner ? [e.data.pid] : [],
        )[0]!;
        process.kill(pid, 'SIGKILL'); // no release, no session_ended: only the lease can lapse
        await dead.close().catch(() => undefined);
        await until('the dead gateway’s lease to lapse', async () => {
          const [lease] = await ledger.leases!.leases([deadOwner]);
          return lease !== undefined && lease.expires_at < Date.now();
        });
        expect(ownerChanges(await ledger.query({ operation_id: op }))).toEqual([]);

        c = await serve(url, { lease_ms: 30_000, recover_on_start: true, sweep_every_ms: 0 });
        await until(
          'C to settle the operation',
          async () => (await ledger.unresolved()).length === 0,
        );
        const after = await ledger.query({ operation_id: op });
        expect(ownerChanges(after)).toMatchObject([
          { from: deadOwner, reason: 'lease_expired', by: 'sweep' },
        ]);
        expect(projectOperation(after)).toMatchObject({ state: 'succeeded' });
        await until('C to report the pass', () => c!.stderr().includes('took over'));
        expect(c.stderr()).toContain(
          'candor serve: took over 1 operation(s) of lapsed gateways; 1 settled, 0 need a person',
        );
        expect(fake.resources.all('records').filter((r) => r['title'] === 'orphaned')).toHaveLength(
          1,
        );
      } finally {
        await ledger.close();
        await c?.close();
      }
    },
  );

  it(
    'candor ops follow prints what another connection appends and exits 0 on SIGINT',
    { timeout: 180_000 },
    async () => {
      const schema = 'fleet_follow';
      const writer: LedgerStore = await openPostgresLedger(server!.url, { schema });
      try {
        await writer.append([opened('op_before')]);
        const child = spawn(
          process.execPath,
          [join(ROOT, 'bin', 'candor.js'), 'ops', 'follow', '--ledger', urlOf(schema)],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        );
        let out = '';
        let err = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
        await until('the follower to listen', () => err.includes('Ctrl-C stops\n'));
        expect(err).toBe(
          'candor ops: following the postgres ledger from #2 (LISTEN/NOTIFY); Ctrl-C stops\n',
        );
        await writer.append([opened('op_after', { correlation: 'follow-pg' })]);
        await until('the append to show up', () => /op_after.*\n/.test(out));
        expect(out).toMatch(
          /^#2 \S+ operation_opened op_after create_deployment \(create\), owner gw-1\n$/,
        );
        child.kill('SIGINT');
        expect(await exited).toBe(0);
        expect(err).not.toMatch(/\n\s+at /);
        expect(out).not.toContain('op_before');
      } finally {
        await writer.close();
      }
    },
  );
});
