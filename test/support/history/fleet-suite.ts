// Model-based history test (issue 29, acceptance 1 and 4), fleet variant: two gateways on one
// PostgreSQL ledger (started here). In every history the first owner stalls past its lease holding
// the answer to one of its attempts (201, 4xx, 429, 5xx, cut or lost), the other gateway takes the
// operation over and settles what it can, then the first owner resumes and acts on its late answer.
// After every step every claim — both gateways' envelopes, operation_status at each, the ledger as
// `ops` shows it — is checked against the fake's ground truth; at the end the ledger is one intact
// chain (`audit verify`). Used by test/truth-history-fleet.test.ts and truth-history-fleet-2.test.ts.
//   CANDOR_HISTORIES=N (default 2000, split between the two files) · CANDOR_HISTORY_SEED=S replays
//   one history and prints it · CANDOR_HISTORY_BASE=B · CANDOR_HISTORY_REPORT=FILE (FILE.partN) ·
//   CANDOR_HISTORY_CONCURRENCY=K (default 6).
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as audit } from '../../../src/cli/commands/audit.js';
import { startFakeService, type FakeService } from '../../../src/fakes/index.js';
import { openPostgresLedger } from '../../../src/ledger/postgres/store.js';
import type { LedgerStore } from '../../../src/ledger/store.js';
import type { HistoryResult } from './agent.js';
import { failureClasses, report, runCampaign, settingsFromEnv } from './campaign.js';
import { B_CLOCK_BEHIND_MS, LEASE_MS, runFleetHistory } from './fleet.js';
import { Claim } from './oracle.js';
import { planHistory } from './plan.js';
import { FaultedWorld, startGateway, type GatewayProcess } from './world.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from '../postgres.js';

/**
 * One half of the fleet campaign. The 2,000 histories run as two files of 1,000 (seeds
 * 1–1000 and 1001–2000 by default), each with its own PostgreSQL server and two gateways, so the
 * two halves use both cores side by side. CANDOR_HISTORIES=N splits N between the halves;
 * CANDOR_HISTORY_SEED=S replays S in the first half only.
 */
export function defineFleetCampaign(part: 1 | 2): void {
  const skip = postgresSkipReason();
  const SCHEMA = 'truth_history';
  const whole = settingsFromEnv(2000, Number(process.env['CANDOR_HISTORY_CONCURRENCY'] ?? 6));
  const half = Math.ceil(whole.seeds.length / 2);
  const settings = whole.replay
    ? { ...whole, seeds: part === 1 ? whole.seeds : [] }
    : { ...whole, seeds: part === 1 ? whole.seeds.slice(0, half) : whole.seeds.slice(half) };
  const label = `truth-history (PostgreSQL fleet, part ${part} of 2)`;
  let server: ThrowawayPostgres | undefined;
  let fake: FakeService | undefined;
  let reader: LedgerStore | undefined;
  let results: HistoryResult[] = [];
  let elapsed = 0;
  let cpuMs = 0;
  let verify: { code: number; out: string } = { code: -1, out: '' };

  beforeAll(
    async () => {
      if (skip !== undefined || settings.seeds.length === 0) return;
      server = await startPostgres();
      fake = await startFakeService({ seed: 2929 });
      const world = await FaultedWorld.start(fake);
      const open = () => openPostgresLedger(server!.url, { schema: SCHEMA });
      reader = await open();
      const a: GatewayProcess = startGateway(world, {
        ledger: await open(),
        ownsLedger: true,
        owner: 'gw-a',
        lease: { ttl_ms: LEASE_MS },
      });
      const b: GatewayProcess = startGateway(world, {
        ledger: await open(),
        ownsLedger: true,
        owner: 'gw-b',
        lease: { ttl_ms: LEASE_MS },
        clock: { now: () => Date.now() - B_CLOCK_BEHIND_MS },
      });
      // Both are alive in the lease table before the first history.
      await a.runtime.sessionId();
      await b.runtime.sessionId();
      const t0 = Date.now();
      const cpu0 = process.cpuUsage();
      results = await runCampaign(settings, async (seed) => {
        const { plan, r } = planHistory(seed, 'f', true);
        try {
          return await runFleetHistory(world, a, b, reader!, plan, r);
        } finally {
          world.untrack(plan.id);
        }
      });
      elapsed = Date.now() - t0;
      const used = process.cpuUsage(cpu0);
      cpuMs = Math.round((used.user + used.system) / 1000);
      await a.stop(true);
      await b.stop(true);
      let out = '';
      const url = `${server.url}${server.url.includes('?') ? '&' : '?'}schema=${SCHEMA}`;
      const code = await audit(['verify', url, '--json'], {
        out: (s) => void (out += s),
        err: (s) => void (out += s),
      });
      verify = { code, out };
      const all = report(label, failureClasses(results), results.length);
      if (process.env['CANDOR_HISTORY_REPORT'])
        writeFileSync(`${process.env['CANDOR_HISTORY_REPORT']}.part${part}`, `${all}\n`);
      if (process.env['CANDOR_HISTORY_TRACES'])
        writeFileSync(
          `${process.env['CANDOR_HISTORY_TRACES']}.part${part}`,
          results.map((r) => r.trace.join('\n')).join('\n\n'),
        );
      if (settings.replay) console.log(results.map((r) => r.trace.join('\n')).join('\n\n'));
    },
    Math.max(900_000, settings.seeds.length * 1_000),
  );

  afterAll(async () => {
    await reader?.close();
    await fake?.close();
    await server?.stop();
  });

  describe.skipIf(skip !== undefined || settings.seeds.length === 0)(
    `one truth per operation: a stalled owner and its successor (PostgreSQL fleet, part ${part} of 2)`,
    () => {
      it('runs every history to its end; the ledger is one intact chain', () => {
        console.log(
          `${label}: ${results.length} histories (seeds ${settings.seeds[0]}–${settings.seeds.at(-1)}) in ${elapsed} ms (${cpuMs} ms of CPU)`,
        );
        expect(results).toHaveLength(settings.seeds.length);
        const classes = failureClasses(results).filter((c) => c.claim === Claim.exception);
        expect(classes, report('exceptions and protocol errors', classes, results.length)).toEqual(
          [],
        );
        expect(verify.code, verify.out).toBe(0);
        expect((JSON.parse(verify.out) as { code: string }).code).toBe('INTACT');
      });

      const families: Array<[Claim, string]> = [
        [
          Claim.none_while_committed,
          'never says none / failed / not applied / nothing was sent while the fake committed',
        ],
        [
          Claim.applied_while_not_committed,
          'never says applied / succeeded while the fake did not commit',
        ],
        [Claim.duplicate_commit, 'never commits one operation twice'],
        [Claim.settled_reopened, 'never reopens a settled operation without positive evidence'],
        [Claim.incoherent, 'never gives an envelope whose fields and sentence disagree'],
      ];
      it.each(families)('%s: %s', (claim) => {
        const classes = failureClasses(results).filter((c) => c.claim === claim);
        expect(classes, report(`${claim} (fleet)`, classes, results.length)).toEqual([]);
      });
    },
  );
}
