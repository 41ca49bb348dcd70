// The reference matrix through the real runtime against the fake service (real sockets) and a real
// OpenSSH server on loopback, and proof that the matrix has teeth: a deliberately wrong
// classification fails the rows it should. Without sshd the SSH rows are skipped with the reason
// (outside CI); under CI=true they fail instead (test/matrix-ssh.test.ts checks both), and the SSH
// checks below always run there.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { classify } from '../src/core/classify.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { runMatrixWithFake } from '../src/matrix/harness.js';
import { loadMatrix } from '../src/matrix/load.js';
import type { MatrixReport } from '../src/matrix/runner.js';
import type { TimelineEntry } from '../src/matrix/spec.js';

const file = fileURLToPath(new URL('../examples/matrix/reference.yaml', import.meta.url));
const CI = process.env.CI === 'true';

async function run(
  filter?: (id: string) => boolean,
  wrong?: typeof classify,
  concurrency?: number,
): Promise<MatrixReport> {
  const loaded = await loadMatrix(file);
  if (!loaded.ok) throw new Error(loaded.failure.message);
  const result = await runMatrixWithFake(loaded.value, {
    ledgerUrl: 'memory:',
    ledger: openMemoryLedger(),
    ci: CI,
    ...(filter ? { filter: (r) => filter(r.id) } : {}),
    ...(wrong ? { classify: wrong } : {}),
    ...(concurrency !== undefined ? { concurrency } : {}),
  });
  if (!result.ok) throw new Error(result.failure.message);
  return result.value;
}

/** What a row concluded, without ids, times or the run's correlation suffix. */
function outcome(r: MatrixReport['rows'][number]): unknown {
  const pick = (e: MatrixReport['rows'][number]['envelope']) =>
    e && { category: e.category, retry: e.retry, remote_effect: e.remote_effect };
  return {
    id: r.id,
    first: pick(r.envelope),
    final: pick(r.final),
    assertions: Object.fromEntries(
      Object.entries(r.assertions).map(([k, a]) => [k, { ok: a.ok, actual: a.actual }]),
    ),
    oracle: r.oracle.verdict,
    secret_in_result: r.secret_in_result,
    passed: r.passed,
    skipped: r.skipped ?? null,
    error: r.error,
  };
}

/** What the SSH rows must show beyond their expectations (they ran against a real sshd). */
function sshRowChecks(report: MatrixReport): void {
  const ssh = report.rows.filter((r) => r.condition.startsWith('ssh:'));
  expect(ssh.length).toBeGreaterThanOrEqual(13);
  // Never two executions, whatever the condition or the agent's follow-up.
  for (const r of ssh)
    expect((r.assertions.remote_state.actual as { executions: number }).executions).toBeLessThan(2);
  const entry = (id: string, source: string, event: string): TimelineEntry => {
    const row = report.rows.find((r) => r.id === id)!;
    const hit = row.timeline.find((t) => t.source === source && t.event === event);
    if (!hit) throw new Error(`${id}: no ${source} ${event} in the timeline`);
    return hit;
  };
  const at = (id: string, source: string, event: string): number => entry(id, source, event).at;
  /** The ledger's own order: its sequence, never two millisecond clocks compared strictly. */
  const seq = (id: string, event: string): number => entry(id, 'ledger', event).seq!;
  // Cut after the start marker: the tool answered before the command completed, then the
  // reconciliation read the completion from the marker. Client events are ordered by ledger
  // sequence; a remote event and a client event can share a millisecond, so across the two
  // clocks only "not after" is claimed.
  const cut = 'ssh-restart-service-cut-after-start';
  expect(seq(cut, 'attempt_finished')).toBeLessThan(seq(cut, 'observation_recorded'));
  expect(at(cut, 'fake', 'start')).toBeLessThanOrEqual(at(cut, 'ledger', 'attempt_finished'));
  expect(at(cut, 'ledger', 'attempt_finished')).toBeLessThanOrEqual(at(cut, 'fake', 'done'));
  expect(at(cut, 'fake', 'done')).toBeLessThanOrEqual(at(cut, 'ledger', 'observation_recorded'));
  // Killed remotely: reconciliation sees "started, process gone" and escalates.
  const killed = report.rows.find((r) => r.id === 'ssh-restart-service-remote-killed')!;
  expect(killed.final).toMatchObject({ category: 'outcome_unknown', retry: 'escalate' });
  expect(seq(killed.id, 'attempt_finished')).toBeLessThan(seq(killed.id, 'observation_recorded'));
  expect(at(killed.id, 'fake', 'remote_killed')).toBeLessThanOrEqual(
    at(killed.id, 'ledger', 'observation_recorded'),
  );
  // Before exec: nothing ran on the first call; the agent's retry ran the command exactly once.
  const before = report.rows.find((r) => r.id === 'ssh-restart-service-cut-before-exec')!;
  expect(before.timeline.some((t) => t.event === 'handshake_held')).toBe(true);
  expect(before.final?.category).toBe('succeeded');
}

// The full matrix one row at a time: the first test judges it, the second compares the concurrent
// run with it (one serial run serves both; running the same rows serially twice proved nothing more).
let serialRun: Promise<MatrixReport> | undefined;
const serialReport = (): Promise<MatrixReport> => (serialRun ??= run(undefined, undefined, 1));

describe('reference matrix', () => {
  it('holds on every row: four assertions, oracle, no secret', { timeout: 240_000 }, async () => {
    const report = await serialReport();
    const skipped = report.rows.filter((r) => r.skipped !== undefined);
    // Under CI nothing may be skipped (the harness fails SSH rows it cannot run).
    if (CI) expect(skipped.map((r) => r.id)).toEqual([]);
    if (skipped.length > 0)
      console.warn(
        `skipped ${skipped.length} SSH rows and the SSH timeline checks (outside CI): ${skipped[0]!.skipped ?? ''}`,
      );
    // Rows that ran were judged; rows that did not are never reported as consistent.
    for (const r of report.rows) {
      if (r.skipped !== undefined) expect(r.oracle.verdict).toBe('not_run');
      if (r.passed) expect(r.oracle.verdict).not.toBe('not_run');
    }
    const failed = report.rows
      .filter((r) => !r.passed && r.skipped === undefined)
      .map((r) => `${r.id}: ${JSON.stringify(r.assertions)} ${r.oracle.detail} ${r.error ?? ''}`);
    expect(failed).toEqual([]);
    expect(report.summary.rows).toBeGreaterThanOrEqual(90);
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
    if (CI || skipped.length === 0) sshRowChecks(report);
    // Honoured keys: the engine's own retries never made a second record.
    for (const r of report.rows.filter(
      (x) => x.operation === 'create_release' && x.condition !== 'before_bytes:refused',
    )) {
      expect(r.assertions.remote_state.actual).toEqual({ count: 1 });
    }
  });

  it(
    'gives the same row outcomes four rows at a time as one at a time',
    { timeout: 300_000 },
    async () => {
      const together = await run(undefined, undefined, 4);
      const serial = await serialReport();
      // The report keeps the file's row order either way.
      expect(together.rows.map((r) => r.id)).toEqual(serial.rows.map((r) => r.id));
      // Row by row: the claims, the agent's follow-up, every assertion with what it saw (remote
      // state and event trail included), the oracle's verdict and the secret check.
      // A difference prints both rows' timelines (ledger events, the fake's ground truth).
      for (const [i, r] of together.rows.entries())
        expect(
          outcome(r),
          `${r.id}\ntogether: ${JSON.stringify(r.timeline)}\nserial: ${JSON.stringify(serial.rows[i]!.timeline)}`,
        ).toEqual(outcome(serial.rows[i]!));
      expect(together.summary).toEqual(serial.summary);
      expect(together.summary.unsafe).toBe(0);
      expect(together.summary.secret_leaks).toBe(0);
    },
  );

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
