// A campaign: many seeded histories at once (they share the fake and the ledger file, never an
// operation), then the failure classes they found, each with its shortest history as the example.
//   CANDOR_HISTORIES=N      how many histories (default per test file)
//   CANDOR_HISTORY_SEED=S   replays history S alone and prints its whole trace
//   CANDOR_HISTORY_BASE=B   first seed of a campaign (default 1)
import type { Claim, Violation } from './oracle.js';
import type { HistoryResult } from './agent.js';

export interface CampaignSettings {
  seeds: number[];
  /** Histories in flight at once. */
  concurrency: number;
  /** Whether one seed is being replayed (then every trace is printed). */
  replay: boolean;
}

export function settingsFromEnv(defaultCount: number, concurrency: number): CampaignSettings {
  const one = process.env['CANDOR_HISTORY_SEED'];
  if (one !== undefined && one !== '') {
    return { seeds: [Number(one)], concurrency: 1, replay: true };
  }
  const count = Number(process.env['CANDOR_HISTORIES'] ?? defaultCount);
  const base = Number(process.env['CANDOR_HISTORY_BASE'] ?? 1);
  return {
    seeds: Array.from({ length: count }, (_, i) => base + i),
    concurrency,
    replay: false,
  };
}

/** Runs `one` over every seed, `concurrency` at a time; a history that hangs is an exception. */
export async function runCampaign(
  s: CampaignSettings,
  /** Runs history `seed` in worker `slot` (a worker runs its histories one after another). */
  one: (seed: number, slot: number) => Promise<HistoryResult>,
  limitMs = 30_000,
): Promise<HistoryResult[]> {
  const results: HistoryResult[] = [];
  let next = 0;
  const worker = async (slot: number): Promise<void> => {
    while (next < s.seeds.length) {
      const seed = s.seeds[next++]!;
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`history ${seed} hung for ${limitMs} ms`)),
          limitMs,
        );
      });
      const t0 = performance.now();
      try {
        results.push(await Promise.race([one(seed, slot), hung]));
        results.at(-1)!.ms = Math.round(performance.now() - t0);
      } finally {
        clearTimeout(timer);
      }
    }
  };
  await Promise.all(Array.from({ length: s.concurrency }, (_, slot) => worker(slot)));
  return results.sort((a, b) => a.plan.seed - b.plan.seed);
}

export interface FailureClass {
  key: string;
  claim: Claim;
  count: number;
  /** The shortest history that shows it. */
  example: HistoryResult;
  violation: Violation;
}

export function failureClasses(results: readonly HistoryResult[]): FailureClass[] {
  const byKey = new Map<string, FailureClass>();
  for (const r of results) {
    for (const v of r.violations) {
      const c = byKey.get(v.key);
      if (!c) byKey.set(v.key, { key: v.key, claim: v.claim, count: 1, example: r, violation: v });
      else {
        c.count += 1;
        if (
          r.steps < c.example.steps ||
          (r.steps === c.example.steps && r.trace.length < c.example.trace.length)
        ) {
          c.example = r;
          c.violation = v;
        }
      }
    }
  }
  return [...byKey.values()].sort((a, b) => a.claim.localeCompare(b.claim) || b.count - a.count);
}

/** The report of one claim family: each class, its count, and one replayable example. */
export function report(
  title: string,
  classes: readonly FailureClass[],
  total: number,
  envVar = 'CANDOR_HISTORY_SEED',
): string {
  if (classes.length === 0) return `${title}: no false claim in ${total} histories`;
  const lines = [`${title}: ${classes.length} failure class(es) in ${total} histories`];
  for (const c of classes) {
    lines.push(
      '',
      `■ ${c.key}  (${c.count} histories; replay: ${envVar}=${c.example.plan.seed})`,
      ...c.example.trace,
    );
  }
  return lines.join('\n');
}
