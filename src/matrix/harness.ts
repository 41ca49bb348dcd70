// Starts what a matrix run needs — the fake service with a canary token, and the ledger — and
// tears it down again, whatever happens.
import { randomBytes } from 'node:crypto';
import { lookupRefusingInvalid, startFakeService } from '../fakes/index.js';
import { closeHttpPools } from '../http/transport.js';
import { openLedger } from '../ledger/open.js';
import type { LedgerStore } from '../ledger/store.js';
import { runMatrix, type MatrixReport, type MatrixRunOptions, type RowResult } from './runner.js';
import type { Matrix } from './spec.js';

export type HarnessResult =
  | { ok: true; value: MatrixReport; failure?: never }
  | { ok: false; failure: { message: string }; value?: never };

export async function runMatrixWithFake(
  matrix: Matrix,
  options: {
    ledgerUrl: string;
    onRow?: (r: RowResult, i: number, total: number) => void;
    filter?: MatrixRunOptions['filter'];
    classify?: MatrixRunOptions['classify'];
    ledger?: LedgerStore;
  },
): Promise<HarnessResult> {
  let ledger = options.ledger;
  let ownLedger = false;
  if (!ledger) {
    const opened = await openLedger(options.ledgerUrl);
    if (!opened.ok)
      return {
        ok: false,
        failure: { message: `cannot open ledger ${options.ledgerUrl}: ${opened.failure.message}` },
      };
    ledger = opened.value;
    ownLedger = true;
  }
  // A fresh canary per run: it must appear in no envelope, transcript, trail or timeline.
  const canary = `cnry_${randomBytes(12).toString('hex')}`;
  const fake = await startFakeService({
    seed: matrix.seed,
    tokens: [{ name: 'reference', token: canary }],
    clock: () => performance.timeOrigin + performance.now(),
  });
  try {
    const report = await runMatrix(matrix, {
      ledger,
      fake,
      canary,
      lookup: lookupRefusingInvalid,
      ...(options.onRow ? { onRow: options.onRow } : {}),
      ...(options.filter ? { filter: options.filter } : {}),
      ...(options.classify ? { classify: options.classify } : {}),
    });
    return { ok: true, value: report };
  } finally {
    await fake.close();
    await closeHttpPools();
    if (ownLedger) await ledger.close();
  }
}
