// The reference matrix through the real runtime against the fake service (real sockets), and proof
// that the matrix has teeth: a deliberately wrong classification fails the rows it should.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { classify } from '../src/core/classify.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { runMatrixWithFake } from '../src/matrix/harness.js';
import { loadMatrix } from '../src/matrix/load.js';
import type { MatrixReport } from '../src/matrix/runner.js';

const file = fileURLToPath(new URL('../examples/matrix/reference.yaml', import.meta.url));

async function run(
  filter?: (id: string) => boolean,
  wrong?: typeof classify,
): Promise<MatrixReport> {
  const loaded = await loadMatrix(file);
  if (!loaded.ok) throw new Error(loaded.failure.message);
  const result = await runMatrixWithFake(loaded.value, {
    ledgerUrl: 'memory:',
    ledger: openMemoryLedger(),
    ...(filter ? { filter: (r) => filter(r.id) } : {}),
    ...(wrong ? { classify: wrong } : {}),
  });
  if (!result.ok) throw new Error(result.failure.message);
  return result.value;
}

describe('reference matrix', () => {
  it('holds on every row: four assertions, oracle, no secret', { timeout: 240_000 }, async () => {
    const report = await run();
    const failed = report.rows
      .filter((r) => !r.passed)
      .map((r) => `${r.id}: ${JSON.stringify(r.assertions)} ${r.oracle.detail} ${r.error ?? ''}`);
    expect(failed).toEqual([]);
    expect(report.summary.rows).toBeGreaterThanOrEqual(60);
    expect(report.summary.unsafe).toBe(0);
    expect(report.summary.secret_leaks).toBe(0);
    // Imprecision is allowed, but only where the tool could not know (nothing was committed).
    for (const r of report.rows.filter((x) => x.oracle.verdict === 'imprecise')) {
      expect(r.envelope?.category).toBe('outcome_unknown');
      expect(
        r.timeline.some(
          (t) =>
            t.source === 'fake' &&
            t.event === 'mutation_committed' &&
            t.at < r.timeline.find((x) => x.event === 'attempt_finished')!.at,
        ),
      ).toBe(false);
    }
    // after_commit rows: the fake committed before the client's deadline expired and the tool said unknown.
    const delayed = report.rows.find((r) => r.id === 'seed-create-deployment-deadline')!;
    const committed = delayed.timeline.find(
      (t) => t.source === 'fake' && t.event === 'mutation_committed',
    )!;
    const gaveUp = delayed.timeline.find(
      (t) => t.source === 'ledger' && t.event === 'attempt_finished',
    )!;
    expect(committed.at).toBeLessThan(gaveUp.at);
    expect(gaveUp.detail).toContain('sent_no_response');
    expect(delayed.final?.category).toBe('succeeded');
    // Honoured keys: the engine's own retries never made a second record.
    for (const r of report.rows.filter(
      (x) => x.operation === 'create_release' && x.condition !== 'before_bytes:refused',
    )) {
      expect(r.assertions.remote_state.actual).toEqual({ count: 1 });
    }
  });

  it(
    'has teeth: "read timeout after send -> local_failure" fails the rows it should',
    { timeout: 120_000 },
    async () => {
      const wrong: typeof classify = (evidence, contract) => {
        const c = classify(evidence, contract);
        return c.dispatch_state === 'sent_no_response'
          ? { ...c, category: 'local_failure', retry: 'allowed', remote_effect: 'none' }
          : c;
      };
      const ids = [
        'seed-create-deployment-deadline',
        'create-issue-after-body-fin',
        'delete-release-after-commit-delay',
        'create-release-before-bytes',
        'malformed-invalid-json',
      ];
      const report = await run((id) => ids.includes(id), wrong);
      const byId = new Map(report.rows.map((r) => [r.id, r]));
      // Committed remotely but claimed "not sent": the oracle calls it unsafe.
      expect(byId.get('seed-create-deployment-deadline')!.oracle.verdict).toBe('unsafe');
      expect(byId.get('delete-release-after-commit-delay')!.oracle.verdict).toBe('unsafe');
      // Not committed, but the claim and the agent's next step are still wrong.
      expect(byId.get('create-issue-after-body-fin')!.assertions.category_and_retry.ok).toBe(false);
      for (const id of ids.slice(0, 3)) expect(byId.get(id)!.passed).toBe(false);
      // Rows the wrong rule does not touch still pass.
      expect(byId.get('create-release-before-bytes')!.passed).toBe(true);
      expect(byId.get('malformed-invalid-json')!.passed).toBe(true);
    },
  );
});
