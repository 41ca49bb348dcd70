// Crash test: a child appends operations in a loop and is killed with SIGKILL at seeded random
// points. After every kill the ledger must open, the chain must check out, every acknowledged
// append must be there unchanged, and every attempt started without a finish must be unresolved.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededRandom } from '../src/core/time.js';
import { expectLinearChain } from '../src/ledger/contract.case.js';
import { projectOperations, UNRESOLVED_STATES } from '../src/ledger/projection.js';
import { openSqliteLedger } from '../src/ledger/sqlite/store.js';
import { bundleForChildren, killAfterReady, type CompiledTree } from './fixtures/ledger/compile.js';

// 50 kills in the suite; scripts/test-node.sh --short-campaigns runs fewer on the other Node.js versions.
const TRIALS = Number(process.env['CANDOR_CRASH_TRIALS'] ?? 50);
const SEED = Number(process.env.CANDOR_CRASH_SEED ?? 424242);

let tree: CompiledTree;
const dir = mkdtempSync(join(tmpdir(), 'candor-crash-'));
// One bundled file per killed writer to load, not the ledger's module tree file by file.
beforeAll(async () => {
  tree = await bundleForChildren(['test/fixtures/ledger/writer.ts']);
});
afterAll(() => {
  tree?.remove();
  rmSync(dir, { recursive: true, force: true });
});

interface Ack {
  seq: number;
  hash: string;
}

/** Runs one writer, kills it `delayMs` after it is ready; returns the acks it printed. */
async function runAndKill(args: Record<string, unknown>, delayMs: number): Promise<Ack[]> {
  const out = await killAfterReady(tree.script('test/fixtures/ledger/writer.js'), args, delayMs);
  // Only complete lines count: a torn last line was never fully acknowledged.
  return out
    .slice(0, out.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((l) => l.startsWith('ack '))
    .map((l) => {
      const [, seq, hash] = l.split(' ');
      return { seq: Number(seq), hash: hash! };
    });
}

describe('ledger crash safety (SQLite, SIGKILL)', () => {
  it(`loses nothing acknowledged and lists unfinished attempts over ${TRIALS} kills (seed ${SEED})`, async () => {
    const rnd = seededRandom(SEED);
    const path = join(dir, 'crash.db');
    const acked = new Map<number, string>();
    let unfinishedSeen = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const durability = trial % 2 === 0 ? 'process' : 'power';
      const delay = 2 + (rnd.bytes(1)[0]! % 40);
      const acks = await runAndKill(
        {
          url: `sqlite:${path}`,
          durability,
          mode: 'crash',
          seed: SEED + trial,
          tag: `t${trial}`,
          count: 0,
        },
        delay,
      );
      for (const a of acks) acked.set(a.seq, a.hash);

      const store = openSqliteLedger(path);
      try {
        const all = await store.read();
        expectLinearChain(all);
        for (const [seq, hash] of acked) {
          expect(all[seq - 1]?.hash, `trial ${trial} (seed ${SEED}): acked seq ${seq}`).toBe(hash);
        }
        const views = projectOperations(all);
        const unresolved = await store.unresolved();
        expect(unresolved).toEqual(
          views
            .filter((v) => v.state !== null && UNRESOLVED_STATES.has(v.state))
            .map((v) => v.operation_id)
            .sort(),
        );
        const listed = new Set(unresolved);
        for (const v of views) {
          if (v.attempts.some((a) => a.finish === null)) {
            unfinishedSeen++;
            expect(listed.has(v.operation_id), `${v.operation_id} started without finish`).toBe(
              true,
            );
          }
        }
      } finally {
        await store.close();
      }
    }
    // The writers must have acknowledged something for the checks above to mean anything; how much
    // depends on the machine's load (the kill is timed from `ready`), so only "some" is required.
    expect(acked.size).toBeGreaterThan(0);
    // The kills must actually have landed between attempt_started and attempt_finished sometimes.
    expect(unfinishedSeen).toBeGreaterThan(0);
  }, 180_000);
});
