// Issue 12, item 9: a seeded crash campaign. A gateway process runs concurrent calls against the
// fake (some held at the fake after commit, some received and never committed, some clean) and is
// SIGKILLed at a random moment; `recover` runs twice; the ledger and the report are compared with
// the fake's ground truth: 0 orphan effects, 0 duplicates, 0 false claims, and every operation
// left unresolved is reported as needing a person. Replay a failure with CANDOR_CAMPAIGN_SEED.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticCredentials } from '../../src/engine/ports.js';
import { createRuntime } from '../../src/runtime.js';
import { seededRandom } from '../../src/core/time.js';
import { startFakeService, type FakeService } from '../../src/fakes/index.js';
import { openLedger } from '../../src/ledger/open.js';
import { projectOperations, UNRESOLVED_STATES } from '../../src/ledger/projection.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../../src/matrix/reference-actions.js';

const TOKEN = 'campaign-canary-token-77d1';
const SEED = Number(process.env['CANDOR_CAMPAIGN_SEED'] ?? 20261130);
// 20 trials of 6 calls in the suite (each ~2 s); CANDOR_CAMPAIGN_TRIALS=100 for a long campaign.
const TRIALS = Number(process.env['CANDOR_CAMPAIGN_TRIALS'] ?? 20);
const CALLS = 5;
const child = fileURLToPath(new URL('../fixtures/campaign/child.mjs', import.meta.url));

const KINDS: Record<string, string> = {
  create_deployment: 'deployments',
  create_release: 'releases',
  create_issue: 'issues',
  create_build: 'builds',
  create_payment: 'payments',
};
const INPUTS: Record<string, unknown> = {
  create_deployment: { service: 'billing', version: '1.2.3' },
  create_release: { version: '2.0.0' },
  create_issue: { title: 'campaign' },
  create_build: { ref: 'main' },
  create_payment: { amount: 500, currency: 'EUR' },
};

let fake: FakeService;
let dir: string;
beforeAll(async () => {
  fake = await startFakeService({ seed: SEED, tokens: [{ name: 'gateway', token: TOKEN }] });
  dir = mkdtempSync(join(tmpdir(), 'candor-campaign-'));
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Planned {
  cor: string;
  action: string;
  input: unknown;
  open_only: boolean;
}

async function crashOnce(ledgerPath: string, plan: Planned[], killAfterMs: number): Promise<void> {
  const proc = spawn(process.execPath, [child, ledgerPath, fake.url, TOKEN, JSON.stringify(plan)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    proc.on('exit', (_code, signal) => resolve(signal)),
  );
  await new Promise<void>((resolve, reject) => {
    proc.stdout.on('data', (d: Buffer) => {
      if (d.toString().includes('dispatching')) resolve();
    });
    proc.on('exit', () => reject(new Error(`the gateway exited before dispatching: ${stderr}`)));
  });
  await new Promise((r) => setTimeout(r, killAfterMs));
  proc.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
}

describe(`crash campaign (seed ${SEED}, ${TRIALS} trials)`, () => {
  it(
    'recover twice after each SIGKILL: no orphan, no duplicate, no false claim',
    { timeout: 120_000 + TRIALS * 30_000 },
    async () => {
      const random = seededRandom(SEED);
      const unit = (): number => {
        const b = random.bytes(4);
        return ((b[0]! << 24) >>> 0) / 2 ** 32 + ((b[1]! << 16) | (b[2]! << 8) | b[3]!) / 2 ** 56;
      };
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(unit() * xs.length)]!;
      const totals = { ops: 0, leftovers: 0, found: 0, first: 0 };
      for (let t = 0; t < TRIALS; t++) {
        const where = `seed ${SEED} trial ${t}`;
        const ledgerPath = join(dir, `trial-${t}.db`);
        const plan: Planned[] = [];
        for (let i = 0; i <= CALLS; i++) {
          const action = pick(Object.keys(KINDS));
          const cor = `camp-${SEED}-${t}-${i}`;
          plan.push({ cor, action, input: INPUTS[action], open_only: i === CALLS });
          const fault = pick(['hold_after_commit', 'stall_before_commit', 'none'] as const);
          if (fault === 'hold_after_commit')
            fake.arm({ call_id: cor, phase: 'after_commit', action: 'delay', delay_ms: 60_000 });
          else if (fault === 'stall_before_commit')
            fake.arm({ call_id: cor, phase: 'after_request_body', action: 'stall' });
        }
        await crashOnce(ledgerPath, plan, 20 + Math.floor(unit() * 400));
        fake.disarm();

        const opened = await openLedger(`sqlite:${ledgerPath}`);
        if (!opened.ok) throw new Error(opened.failure.message);
        const ledger = opened.value;
        const before = projectOperations(await ledger.read());
        const runtime = createRuntime({
          ledger,
          credentials: staticCredentials({
            [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` },
          }),
          actions: referenceActions(fake.url).map((a) => ({
            ...a,
            timeouts: {
              total_ms: 5_000,
              connect_ms: 2_000,
              first_byte_ms: 5_000,
              body_idle_ms: 2_000,
            },
          })),
          owner: 'campaign-recovery',
          sleep: () => Promise.resolve(),
        });
        const first = await runtime.recover();
        const postsAfterFirst = fake
          .groundTruth()
          .filter((e) => e.event === 'received' && e.method === 'POST').length;
        const obsAfterFirst = (await ledger.read()).filter(
          (e) => e.kind === 'observation_recorded',
        ).length;
        const second = await runtime.recover();
        const postsAfterSecond = fake
          .groundTruth()
          .filter((e) => e.event === 'received' && e.method === 'POST').length;
        const obsAfterSecond = (await ledger.read()).filter(
          (e) => e.kind === 'observation_recorded',
        ).length;
        // Repeated runs add no duplicate observations and send no further write.
        expect(obsAfterSecond, where).toBe(obsAfterFirst);
        expect(postsAfterSecond, where).toBe(postsAfterFirst);

        const after = projectOperations(await ledger.read());
        const byCor = new Map(after.map((v) => [v.correlation_id, v]));
        for (const p of plan) {
          const truth = fake.resources.list(KINDS[p.action]!, { client_ref: p.cor }).length;
          const v = byCor.get(p.cor);
          const w = `${where} ${p.cor} (${p.action})`;
          // No duplicate effect, ever.
          expect(truth, w).toBeLessThanOrEqual(1);
          if (!v) {
            // Killed before the operation was opened: nothing may have reached the fake.
            expect(truth, `${w}: orphan effect`).toBe(0);
            continue;
          }
          totals.ops += 1;
          const state = v.state!;
          // No false claim: succeeded means exactly one record; failed/cancelled means none.
          if (state === 'succeeded') expect(truth, `${w}: false success`).toBe(1);
          if (state === 'failed' || state === 'cancelled')
            expect(truth, `${w}: false failure`).toBe(0);
          // No orphan: a record the fake committed is accounted for (succeeded, or left for a person).
          if (truth === 1) expect(['succeeded', 'unknown'], `${w}: orphan effect`).toContain(state);
          const report = second.find((r) => r.operation_id === v.operation_id);
          const firstReport = first.find((r) => r.operation_id === v.operation_id);
          if (UNRESOLVED_STATES.has(state)) {
            totals.leftovers += 1;
            expect(report, `${w}: leftover not reported`).toMatchObject({
              outcome: 'needs_person',
              unresolved: true,
            });
            expect(firstReport?.outcome, w).toBe('needs_person');
          }
          if (firstReport?.outcome === 'found_by_lookup') totals.found += 1;
          // An operation that never sent anything is never turned `unknown` by a lookup.
          const was = before.find((b) => b.operation_id === v.operation_id);
          if (was && was.attempts.length === 0) {
            expect(v.observations, w).toHaveLength(0);
            if (firstReport?.outcome === 'first_attempt_made') totals.first += 1;
          }
        }
        await ledger.close();
      }
      // The campaign exercised something (printed so a seed's coverage is visible).
      console.log(`crash campaign seed ${SEED}: ${JSON.stringify(totals)}`);
      expect(totals.ops).toBeGreaterThan(0);
    },
  );
});
