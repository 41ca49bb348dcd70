// Model-based history test (issue 29, acceptance 1 and 4), fleet variant: two gateways on one
// PostgreSQL ledger (the server started here; a fresh ledger every 100 histories). In every
// history the first owner stalls past its lease holding the answer to one of its attempts (201,
// 4xx, 429, 5xx, cut or lost), the other gateway takes the operation over and settles what it
// can, then the first owner resumes and acts on its late answer. After every step every claim —
// both gateways' envelopes, operation_status at each, the ledger as `ops` shows it — is checked
// against the fake's ground truth; every ledger ends as one intact chain (`audit verify`). Used by
// test/truth-history-fleet.test.ts and truth-history-fleet-2.test.ts.
//   CANDOR_HISTORIES=N (default 2000, split between the two files) · CANDOR_HISTORY_SEED=S replays
//   one history and prints it · CANDOR_HISTORY_BASE=B · CANDOR_HISTORY_REPORT=FILE (FILE.partN) ·
//   CANDOR_HISTORY_CONCURRENCY=K (default 6) · CANDOR_HISTORIES_PER_LEDGER=L (default 100).
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as audit } from '../../../src/cli/commands/audit.js';
import { startFakeService, type FakeService } from '../../../src/fakes/index.js';
import { openPostgresLedger } from '../../../src/ledger/postgres/store.js';
import type { LedgerStore } from '../../../src/ledger/store.js';
import type { HistoryResult } from './agent.js';
import { failureClasses, report, runCampaign, settingsFromEnv } from './campaign.js';
import { runFleetHistory, startFleetPair } from './fleet.js';
import { Claim } from './oracle.js';
import { planHistory } from './plan.js';
import { FaultedWorld, type GatewayProcess } from './world.js';
import {
  postgresCpuMs,
  postgresSkipReason,
  socketUrl,
  startPostgres,
  type ThrowawayPostgres,
} from '../postgres.js';

/**
 * Histories per ledger. A fleet sweep works through every unresolved operation in its ledger, and
 * about three histories in ten leave theirs unresolved (no lookup, or one that keeps failing: a
 * person's case), so on one ledger for the whole campaign each sweep costs more than the last:
 * at 1,000 histories the sweeps made 62 % of all ledger reads. A fresh ledger (schema, gateways,
 * reader) every L histories keeps that cost flat. Histories in flight still share their ledger,
 * gateways and sweeps with each other, as before.
 */
export const HISTORIES_PER_LEDGER = Number(process.env['CANDOR_HISTORIES_PER_LEDGER'] ?? 100);

/** What `audit verify` said about one ledger. */
interface Verdict {
  schema: string;
  code: number;
  out: string;
}

/** One ledger: a schema, the survivor A, the first owner B (its clock behind), a reader. */
interface Lane {
  readonly schema: string;
  readonly a: GatewayProcess;
  readonly b: GatewayProcess;
  readonly reader: LedgerStore;
}

interface LaneUse {
  opened: Promise<Lane>;
  started: number;
  finished: number;
  /** No further history starts here; it closes when its last one finishes. */
  retired: boolean;
}

/**
 * The campaign's ledgers, one after another: a history starts on the current one; after
 * HISTORIES_PER_LEDGER starts the next one opens, and the old one is closed (gateways stopped as
 * `candor serve` stops, then `audit verify`) once its histories in flight have finished.
 */
class Lanes {
  #current: LaneUse | null = null;
  #count = 0;
  readonly #closed: Promise<Verdict>[] = [];

  constructor(
    private readonly world: FaultedWorld,
    private readonly url: string,
  ) {}

  async run<T>(one: (lane: Lane) => Promise<T>): Promise<T> {
    if (this.#current === null || this.#current.started >= HISTORIES_PER_LEDGER) {
      if (this.#current) this.#retire(this.#current);
      this.#current = {
        opened: this.#open(++this.#count),
        started: 0,
        finished: 0,
        retired: false,
      };
    }
    const use = this.#current;
    use.started += 1;
    try {
      return await one(await use.opened);
    } finally {
      use.finished += 1;
      if (use.retired && use.finished === use.started) this.#closing(use);
    }
  }

  /** Closes the last ledger; every ledger's verdict, in order. */
  async finish(): Promise<Verdict[]> {
    if (this.#current) this.#retire(this.#current);
    this.#current = null;
    const verdicts = await Promise.all(this.#closed);
    return verdicts.sort((x, y) => x.schema.localeCompare(y.schema, 'en', { numeric: true }));
  }

  #retire(use: LaneUse): void {
    use.retired = true;
    if (use.finished === use.started) this.#closing(use);
  }

  /** Starts closing a ledger; a failure surfaces from finish(), not as an unhandled rejection. */
  #closing(use: LaneUse): void {
    const closed = this.#close(use);
    closed.catch(() => undefined);
    this.#closed.push(closed);
  }

  async #open(n: number): Promise<Lane> {
    const schema = `truth_history_${n}`;
    const open = () => openPostgresLedger(this.url, { schema });
    const reader = await open();
    // Both are alive in the lease table before the first history.
    const { a, b } = await startFleetPair(this.world, open);
    return { schema, a, b, reader };
  }

  async #close(use: LaneUse): Promise<Verdict> {
    const lane = await use.opened;
    await lane.a.stop(true);
    await lane.b.stop(true);
    await lane.reader.close();
    let out = '';
    const url = `${this.url}${this.url.includes('?') ? '&' : '?'}schema=${lane.schema}`;
    const code = await audit(['verify', url, '--json'], {
      out: (s) => void (out += s),
      err: (s) => void (out += s),
    });
    return { schema: lane.schema, code, out };
  }
}

/**
 * One half of the fleet campaign. The issue's 2,000 histories run as two files of 1,000 (seeds
 * 1–1000 and 1001–2000 by default), each with its own PostgreSQL server, so the two halves use
 * both cores side by side. CANDOR_HISTORIES=N splits N between the halves; CANDOR_HISTORY_SEED=S
 * replays S in the first half only.
 */
export function defineFleetCampaign(part: 1 | 2): void {
  const skip = postgresSkipReason();
  const whole = settingsFromEnv(2000, Number(process.env['CANDOR_HISTORY_CONCURRENCY'] ?? 6));
  const half = Math.ceil(whole.seeds.length / 2);
  const settings = whole.replay
    ? { ...whole, seeds: part === 1 ? whole.seeds : [] }
    : { ...whole, seeds: part === 1 ? whole.seeds.slice(0, half) : whole.seeds.slice(half) };
  const label = `truth-history (PostgreSQL fleet, part ${part} of 2)`;
  let server: ThrowawayPostgres | undefined;
  let fake: FakeService | undefined;
  let results: HistoryResult[] = [];
  let elapsed = 0;
  let cpuMs = 0;
  let serverCpuMs: number | null = null;
  let verified: Verdict[] = [];

  beforeAll(
    async () => {
      if (skip !== undefined || settings.seeds.length === 0) return;
      server = await startPostgres();
      fake = await startFakeService({ seed: 2929 });
      const world = await FaultedWorld.start(fake);
      const url = socketUrl(server);
      const t0 = Date.now();
      const cpu0 = process.cpuUsage();
      const server0 = postgresCpuMs(server);
      const lanes = new Lanes(world, url);
      results = await runCampaign(settings, (seed) =>
        lanes.run(async (lane) => {
          const { plan, r } = planHistory(seed, 'f', true);
          try {
            return await runFleetHistory(world, lane.a, lane.b, lane.reader, plan, r);
          } finally {
            world.untrack(plan.id);
          }
        }),
      );
      verified = await lanes.finish();
      elapsed = Date.now() - t0;
      const used = process.cpuUsage(cpu0);
      cpuMs = Math.round((used.user + used.system) / 1000);
      const server1 = postgresCpuMs(server);
      serverCpuMs = server0 !== null && server1 !== null ? server1 - server0 : null;
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
    await fake?.close();
    await server?.stop();
  });

  describe.skipIf(skip !== undefined || settings.seeds.length === 0)(
    `one truth per operation: a stalled owner and its successor (PostgreSQL fleet, part ${part} of 2)`,
    () => {
      it('runs every history to its end; each ledger is one intact chain', () => {
        console.log(
          `${label}: ${results.length} histories (seeds ${settings.seeds[0]}–${settings.seeds.at(-1)}) on ${verified.length} ledger(s) in ${elapsed} ms (${cpuMs} ms of CPU here${serverCpuMs === null ? '' : `, ${serverCpuMs} ms in PostgreSQL`})`,
        );
        expect(results).toHaveLength(settings.seeds.length);
        const classes = failureClasses(results).filter((c) => c.claim === Claim.exception);
        expect(classes, report('exceptions and protocol errors', classes, results.length)).toEqual(
          [],
        );
        expect(verified).toHaveLength(Math.ceil(settings.seeds.length / HISTORIES_PER_LEDGER));
        for (const v of verified) {
          expect(v.code, `${v.schema}: ${v.out}`).toBe(0);
          expect((JSON.parse(v.out) as { code: string }).code, v.schema).toBe('INTACT');
        }
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
