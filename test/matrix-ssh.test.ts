// The SSH rows of the reference matrix (the full run is in test/matrix.test.ts): that they have
// teeth against a real OpenSSH server on loopback, and how a run without sshd reports them —
// skipped with the reason outside CI, failed under CI=true. The teeth suite needs sshd: outside CI a
// missing sshd skips it with a printed reason; under CI=true sshdSkipReason() throws instead.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { classify } from '../src/core/classify.js';
import { startFakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { runMatrixWithFake } from '../src/matrix/harness.js';
import { loadMatrix } from '../src/matrix/load.js';
import { isSshRow, runMatrix, type MatrixReport } from '../src/matrix/runner.js';
import type { Matrix } from '../src/matrix/spec.js';
import { sshdSkipReason } from './support/sshd.js';

const file = fileURLToPath(new URL('../examples/matrix/reference.yaml', import.meta.url));

async function reference(): Promise<Matrix> {
  const loaded = await loadMatrix(file);
  if (!loaded.ok) throw new Error(loaded.failure.message);
  return loaded.value;
}

describe('SSH rows without sshd', () => {
  const run = async (fail: boolean): Promise<MatrixReport> => {
    const fake = await startFakeService({ tokens: [{ name: 'reference', token: 'cnry_test' }] });
    const ledger = openMemoryLedger();
    try {
      const ids = new Set(['ssh-restart-service-ok', 'ssh-restart-service-cut-after-start']);
      return await runMatrix(await reference(), {
        ledger,
        fake,
        canary: 'cnry_test',
        filter: (r) => ids.has(r.id) || r.id === 'create-release-before-bytes',
        sshUnavailable: { reason: '/usr/sbin/sshd not found (test)', fail },
      });
    } finally {
      await fake.close();
      await ledger.close();
    }
  };

  it('are skipped with the reason outside CI, and a skip is not a failure', async () => {
    const report = await run(false);
    expect(report.summary).toMatchObject({ rows: 3, passed: 1, failed: 0, skipped: 2 });
    const skipped = report.rows.filter((r) => r.skipped !== undefined);
    expect(skipped.map((r) => r.id).sort()).toEqual([
      'ssh-restart-service-cut-after-start',
      'ssh-restart-service-ok',
    ]);
    for (const r of skipped) {
      expect(r.skipped).toBe('/usr/sbin/sshd not found (test)');
      expect(r.envelope).toBeNull();
      expect(r.error).toBeNull();
    }
  });

  it('fail under CI=true (the harness passes fail: true there), never skip', async () => {
    const report = await run(true);
    expect(report.summary).toMatchObject({ rows: 3, passed: 1, failed: 2, skipped: 0 });
    for (const r of report.rows.filter((x) => x.id.startsWith('ssh-')))
      expect(r.error).toContain('/usr/sbin/sshd not found (test)');
  });
});

const skip = sshdSkipReason();
if (skip !== undefined) console.warn(`skipping the SSH matrix teeth suite: ${skip}`);

describe.skipIf(skip !== undefined)('SSH rows have teeth (real sshd)', () => {
  it(
    'a classifier that calls "exec sent, no exit status" not-run, or exit 255 a lost transport, fails the rows it should',
    { timeout: 120_000 },
    async () => {
      const wrong: typeof classify = (evidence, contract) => {
        const c = classify(evidence, contract);
        if (c.dispatch_state === 'sent_no_response')
          return { ...c, category: 'local_failure', retry: 'allowed', remote_effect: 'none' };
        if ((evidence as { exit_status?: unknown }).exit_status === 255)
          return {
            ...c,
            category: 'outcome_unknown',
            retry: 'reconcile_first',
            remote_effect: 'unknown',
          };
        return c;
      };
      const ids = [
        'ssh-restart-service-cut-after-start',
        'ssh-rotate-logs-cut-after-completion',
        'ssh-rotate-logs-exit-255',
        'ssh-rotate-logs-nonzero-exit',
        'ssh-restart-service-connect-refused',
      ];
      const result = await runMatrixWithFake(await reference(), {
        ledgerUrl: 'memory:',
        ledger: openMemoryLedger(),
        filter: (r) => isSshRow(r) && ids.includes(r.id),
        classify: wrong,
      });
      if (!result.ok) throw new Error(result.failure.message);
      const byId = new Map(result.value.rows.map((r) => [r.id, r]));
      // The command started (and later completed) but the tool said "not run": unsafe.
      for (const id of ids.slice(0, 2)) {
        const r = byId.get(id)!;
        expect(r.envelope?.category).toBe('local_failure');
        expect(r.oracle.verdict).toBe('unsafe');
        expect(r.oracle.detail).toContain('the command ran');
        expect(r.passed).toBe(false);
        // The marker still kept the command to one execution.
        expect(r.assertions.remote_state.actual).toMatchObject({ executions: 1 });
      }
      // Exit 255 is an exit status: calling it a lost transport fails the claim assertion.
      const e255 = byId.get('ssh-rotate-logs-exit-255')!;
      expect(e255.assertions.category_and_retry.ok).toBe(false);
      expect(e255.passed).toBe(false);
      // Rows the wrong rules do not touch still pass.
      expect(byId.get('ssh-rotate-logs-nonzero-exit')!.passed).toBe(true);
      expect(byId.get('ssh-restart-service-connect-refused')!.passed).toBe(true);
    },
  );
});
