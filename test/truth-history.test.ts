// Model-based history test (issue 29, acceptance 1), single gateway on a SQLite ledger file: random
// seeded histories of one operation each (1–4 attempts meeting refused connects, resets before and
// after the commit, replies lost or cut, 4xx/429/5xx answers, honoured keys or not, lookups that
// fail or hang, gateway restarts), driven through the gateway as a careful agent drives them, on
// real sockets against the fake service. After every step every claim about the operation is
// compared with the fake's ground truth (test/support/history/oracle.ts).
//
// Each claim family is its own test, so a failure names the claim that is false; its message lists
// every failure class with the shortest history that shows it, step by step, and its seed.
//   CANDOR_HISTORIES=N (default 2000, the bar) · CANDOR_HISTORY_SEED=S replays one history and prints it ·
//   CANDOR_HISTORY_BASE=B first seed · CANDOR_HISTORY_REPORT=FILE also writes the report there.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openLedger } from '../src/ledger/open.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { checkListing, runHistory, type HistoryResult } from './support/history/agent.js';
import {
  failureClasses,
  report,
  runCampaign,
  settingsFromEnv,
} from './support/history/campaign.js';
import { SoloHost } from './support/history/hosts.js';
import { Claim } from './support/history/oracle.js';
import { planHistory } from './support/history/plan.js';
import { FaultedWorld } from './support/history/world.js';

const settings = settingsFromEnv(2000, Number(process.env['CANDOR_HISTORY_CONCURRENCY'] ?? 12));
let fake: FakeService;
let dir: string;
let reader: LedgerStore;
let results: HistoryResult[] = [];
let elapsed = 0;
let cpuMs = 0;

beforeAll(
  async () => {
    fake = await startFakeService({ seed: 29 });
    const world = await FaultedWorld.start(fake);
    dir = mkdtempSync(join(tmpdir(), 'candor-history-'));
    const url = `sqlite:${join(dir, 'ledger.db')}`;
    const opened = await openLedger(url);
    if (!opened.ok) throw new Error(opened.failure.message);
    reader = opened.value;
    const t0 = Date.now();
    const cpu0 = process.cpuUsage();
    // One gateway process per concurrent agent session; a restart replaces that session's process.
    const hosts = Array.from(
      { length: settings.concurrency },
      () => new SoloHost(world, url, reader),
    );
    results = await runCampaign(settings, async (seed, slot) => {
      const { plan, r } = planHistory(seed, 'h');
      try {
        return await runHistory(world, hosts[slot]!, plan, r);
      } finally {
        world.untrack(plan.id);
      }
    });
    await checkListing(world, await hosts[0]!.current(), results);
    await Promise.all(hosts.map((h) => h.close()));
    elapsed = Date.now() - t0;
    const used = process.cpuUsage(cpu0);
    cpuMs = Math.round((used.user + used.system) / 1000);
    const all = report('truth-history (SQLite)', failureClasses(results), results.length);
    if (process.env['CANDOR_HISTORY_REPORT'])
      writeFileSync(process.env['CANDOR_HISTORY_REPORT'], `${all}\n`);
    if (process.env['CANDOR_HISTORY_TRACES'])
      writeFileSync(
        process.env['CANDOR_HISTORY_TRACES'],
        results.map((r) => r.trace.join('\n')).join('\n\n'),
      );
    if (settings.replay) console.log(results.map((r) => r.trace.join('\n')).join('\n\n'));
  },
  Math.max(600_000, settings.seeds.length * 1_000),
);

afterAll(async () => {
  await reader?.close();
  await fake?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('one truth per operation: random histories on one gateway (SQLite)', () => {
  it('runs every history to its end', () => {
    console.log(
      `truth-history (SQLite): ${results.length} histories in ${elapsed} ms (${cpuMs} ms of CPU)`,
    );
    expect(results).toHaveLength(settings.seeds.length);
    const classes = failureClasses(results).filter((c) => c.claim === Claim.exception);
    expect(classes, report('harness exceptions', classes, results.length)).toEqual([]);
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
    [
      Claim.status_disagrees,
      'operation_status right after a call says what the call said (one answer per state)',
    ],
  ];
  it.each(families)('%s: %s', (claim) => {
    const classes = failureClasses(results).filter((c) => c.claim === claim);
    expect(classes, report(`${claim} (SQLite)`, classes, results.length)).toEqual([]);
  });
});
