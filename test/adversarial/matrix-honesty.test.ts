// Issue 12, item 16: the matrix and its tests tell the truth. A row that never ran is `not_run`
// for the oracle (report, table, JUnit, summary), never `consistent`; the shipped harness takes
// "this is CI" from its caller instead of reading the environment; client events of a row carry
// their ledger sequence so tests order them without comparing two millisecond clocks; and the
// ledger contract's persistence case is a reasoned skip for the memory adapter, not a silent pass.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startFakeService } from '../../src/fakes/index.js';
import { openMemoryLedger } from '../../src/ledger/memory/store.js';
import { loadMatrix } from '../../src/matrix/load.js';
import { summaryLine, tableText, toJunit } from '../../src/matrix/report.js';
import { runMatrix, type MatrixReport } from '../../src/matrix/runner.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

async function runWithoutSsh(): Promise<MatrixReport> {
  const loaded = await loadMatrix(`${root}examples/matrix/reference.yaml`);
  if (!loaded.ok) throw new Error(loaded.failure.message);
  const fake = await startFakeService({ tokens: [{ name: 'reference', token: 'cnry_honest' }] });
  const ledger = openMemoryLedger();
  try {
    return await runMatrix(loaded.value, {
      ledger,
      fake,
      canary: 'cnry_honest',
      filter: (r) => r.id === 'ssh-restart-service-ok' || r.id === 'create-release-before-bytes',
      sshUnavailable: { reason: 'sshd not found (test)', fail: false },
    });
  } finally {
    await fake.close();
    await ledger.close();
  }
}

describe('matrix honesty', () => {
  it('a row that never ran is not_run for the oracle, everywhere it is reported', async () => {
    const report = await runWithoutSsh();
    const ssh = report.rows.find((r) => r.id === 'ssh-restart-service-ok')!;
    const http = report.rows.find((r) => r.id === 'create-release-before-bytes')!;
    expect(ssh.skipped).toBe('sshd not found (test)');
    expect(ssh.oracle.verdict).toBe('not_run');
    expect(http.oracle.verdict).toBe('consistent');
    expect(report.summary).toMatchObject({ rows: 2, skipped: 1, not_run: 1, passed: 1 });
    expect(summaryLine(report)).toContain('1 not judged by the oracle');
    const row = tableText(report)
      .split('\n')
      .find((l) => l.startsWith('ssh-restart-service-ok'))!;
    expect(row.trimEnd().endsWith('not_run')).toBe(true);
    expect(toJunit(report)).toContain(
      '<testcase classname="candor.matrix.reference" name="ssh-restart-service-ok"><properties><property name="oracle" value="not_run"/></properties><skipped',
    );
  });

  it('client events in a row timeline carry their ledger sequence, in ledger order', async () => {
    const report = await runWithoutSsh();
    const http = report.rows.find((r) => r.id === 'create-release-before-bytes')!;
    const seqs = http.timeline.filter((t) => t.source === 'ledger').map((t) => t.seq);
    expect(seqs.length).toBeGreaterThan(2);
    for (const s of seqs) expect(typeof s).toBe('number');
    expect([...seqs].sort((a, b) => a! - b!)).toEqual(seqs);
  });

  it("shipped matrix code never reads process.env (CI is the caller's to say)", () => {
    const dir = `${root}src/matrix/`;
    const offenders = readdirSync(dir)
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
      .filter((f) => readFileSync(dir + f, 'utf8').includes('process.env'));
    expect(offenders).toEqual([]);
  });

  // A second vitest process runs one file: its start-up (transform, import) is seconds when idle
  // but was measured at 47 s with four busy test files on a 2-core CI machine, so this test gets its
  // own bound, and the inner run uses one worker.
  it(
    'the memory ledger reports "persists across handles" as skipped with a reason',
    { timeout: 240_000 },
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'candor-honest-'));
      const out = join(dir, 'report.json');
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
      const r = spawnSync(
        process.execPath,
        [
          `${root}node_modules/vitest/vitest.mjs`,
          'run',
          'src/ledger/memory/store.test.ts',
          '--maxWorkers=1',
          '--reporter=json',
          '--reporter=default',
          `--outputFile.json=${out}`,
        ],
        { cwd: root, encoding: 'utf8', env: { ...process.env, CI: '' } },
      );
      const json = JSON.parse(readFileSync(out, 'utf8')) as {
        testResults: { assertionResults: { title: string; status: string }[] }[];
      };
      const persist = json.testResults
        .flatMap((t) => t.assertionResults)
        .find((a) => a.title.startsWith('persists across handles'))!;
      expect(persist.status).toBe('skipped');
      expect(r.stdout + r.stderr).toContain('this adapter is not persistent (no reopen)');
    },
  );
});
