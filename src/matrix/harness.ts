// Starts what a matrix run needs — the fake service with a canary token, the ledger, and one real
// sshd for the SSH rows — and tears it down again, whatever happens.
import { randomBytes } from 'node:crypto';
import { lookupRefusingInvalid, startFakeService } from '../fakes/index.js';
import { sshdUnavailableReason } from '../fakes/sshd.js';
import { openLedger } from '../ledger/open.js';
import type { LedgerStore } from '../ledger/store.js';
import {
  isSshRow,
  runMatrix,
  type MatrixReport,
  type MatrixRunOptions,
  type RowResult,
} from './runner.js';
import type { Matrix } from './spec.js';
import { startSshMatrixEnv, type SshMatrixEnv } from './ssh-reference.js';

/**
 * The SSH fixture when the selected rows need one. Without sshd the SSH rows are skipped with the
 * reason, except when the caller says this is CI (`ci: true`), where they fail: CI must never
 * silently skip them. The library never reads the environment itself; the CLI and tests decide.
 */
async function sshFor(
  matrix: Matrix,
  filter: MatrixRunOptions['filter'],
  ci: boolean,
): Promise<Pick<MatrixRunOptions, 'ssh' | 'sshUnavailable'>> {
  if (!matrix.rows.some((r) => isSshRow(r) && (filter?.(r) ?? true))) return {};
  const missing = sshdUnavailableReason();
  if (missing !== undefined) return { sshUnavailable: { reason: missing, fail: ci } };
  try {
    return { ssh: await startSshMatrixEnv() };
  } catch (e) {
    const why = e instanceof Error ? e.message.split('\n')[0]! : String(e);
    return { sshUnavailable: { reason: `sshd did not start: ${why}`, fail: true } };
  }
}

export type HarnessResult =
  | { ok: true; value: MatrixReport; failure?: never }
  | { ok: false; failure: { message: string }; value?: never };

/** The ledger a matrix run writes to: the caller's, or one opened from the URL (closed by the run). */
export async function matrixLedger(options: {
  ledger?: LedgerStore | undefined;
  ledgerUrl: string;
}): Promise<
  { ok: true; ledger: LedgerStore; own: boolean } | { ok: false; failure: { message: string } }
> {
  if (options.ledger) return { ok: true, ledger: options.ledger, own: false };
  const opened = await openLedger(options.ledgerUrl);
  if (!opened.ok) {
    return {
      ok: false,
      failure: { message: `cannot open ledger ${options.ledgerUrl}: ${opened.failure.message}` },
    };
  }
  return { ok: true, ledger: opened.value, own: true };
}

export async function runMatrixWithFake(
  matrix: Matrix,
  options: {
    ledgerUrl: string;
    onRow?: (r: RowResult, i: number, total: number) => void;
    filter?: MatrixRunOptions['filter'];
    classify?: MatrixRunOptions['classify'];
    ledger?: LedgerStore;
    /** Running under CI: SSH rows that cannot run fail instead of being skipped. */
    ci?: boolean;
    /** Rows at once (default 1); see MatrixRunOptions.concurrency. */
    concurrency?: number;
  },
): Promise<HarnessResult> {
  const held = await matrixLedger(options);
  if (!held.ok) return held;
  const { ledger, own: ownLedger } = held;
  // A fresh canary per run: it must appear in no envelope, transcript, trail or timeline.
  const canary = `cnry_${randomBytes(12).toString('hex')}`;
  const fake = await startFakeService({
    seed: matrix.seed,
    tokens: [{ name: 'reference', token: canary }],
    clock: () => performance.timeOrigin + performance.now(),
  });
  let ssh: SshMatrixEnv | undefined;
  try {
    const sshOptions = await sshFor(matrix, options.filter, options.ci === true);
    ssh = sshOptions.ssh;
    const report = await runMatrix(matrix, {
      ...sshOptions,
      ledger,
      fake,
      canary,
      lookup: lookupRefusingInvalid,
      ...(options.onRow ? { onRow: options.onRow } : {}),
      ...(options.filter ? { filter: options.filter } : {}),
      ...(options.classify ? { classify: options.classify } : {}),
      ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
    });
    return { ok: true, value: report };
  } finally {
    await ssh?.close();
    await fake.close();
    if (ownLedger) await ledger.close();
  }
}
