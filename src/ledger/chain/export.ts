// Reading a ledger through the LedgerStore port for export and direct verification. The port hands
// back parsed events, so the stored bytes are rebuilt with canonical JSON (the same encoding every
// adapter wrote) and checked against the hash the adapter computed from the bytes it actually holds:
// a mismatch means the stored bytes are not what the writer produced.
import { canonicalJson } from '../../core/canonical.js';
import { sha256Hex } from '../../core/fingerprint.js';
import type { StoredEvent } from '../events.js';
import type { LedgerStore } from '../store.js';
import { checkpointFor, keepSignatures, writeBundle, type VerifyOptions } from './bundle.js';
import { parseVerifierKey, verifierKeyOf, type NoteSigner } from './note.js';
import { RecordScanner, scanInto } from './scan.js';
import { classify, VerifyCode, type VerifyReport } from './verify.js';

/** The canonical stored bytes of an event (the event's own `v`, not the current version). */
export function storedBytes(e: StoredEvent): Buffer {
  return Buffer.from(
    canonicalJson({
      at: e.at,
      correlation_id: e.correlation_id,
      data: e.data,
      kind: e.kind,
      operation_id: e.operation_id,
      prev_hash: e.prev_hash,
      seq: e.seq,
      session_id: e.session_id,
      v: e.v,
    }),
    'utf8',
  );
}

export interface StoreRecords {
  records: Buffer[];
  /** Seqs whose rebuilt bytes do not hash to the hash the store reported. */
  mismatched: number[];
  /** How many records are `checkpoint` events (checkpoints inside the ledger). */
  checkpoints: number;
}

/**
 * The store's records a page at a time, as stored bytes, with the counts of `StoreRecords` for
 * that page (a mismatch: rebuilt bytes that do not hash to the hash the store reported).
 */
async function* storePages(store: LedgerStore, pageSize: number): AsyncGenerator<StoreRecords> {
  for (let from = 1; ;) {
    const page = await store.read(from, pageSize);
    const out: StoreRecords = { records: [], mismatched: [], checkpoints: 0 };
    for (const e of page) {
      if (e.kind === 'checkpoint') out.checkpoints++;
      const bytes = storedBytes(e);
      if (sha256Hex(bytes) !== e.hash) out.mismatched.push(e.seq);
      out.records.push(bytes);
    }
    yield out;
    if (page.length < pageSize) return;
    from = page[page.length - 1]!.seq + 1;
  }
}

export async function readStoreRecords(store: LedgerStore, pageSize = 5000): Promise<StoreRecords> {
  const all: StoreRecords = { records: [], mismatched: [], checkpoints: 0 };
  for await (const page of storePages(store, pageSize)) {
    all.records.push(...page.records);
    all.mismatched.push(...page.mismatched);
    all.checkpoints += page.checkpoints;
  }
  return all;
}

/** Records read and scanned at a time by `verifyStore`. */
const VERIFY_PAGE = 1000;

/**
 * Verifies a store directly (no bundle): chain, tree, embedded and given checkpoints. Streams: a
 * page of records at a time is scanned and let go (memory stays flat however long the ledger), and
 * the event loop gets a turn between pages, so a process that verifies in the background (the web
 * view's audit page) keeps answering meanwhile.
 */
export async function verifyStore(
  store: LedgerStore,
  opts: VerifyOptions & { checkpoints?: readonly string[] } = {},
): Promise<VerifyReport> {
  const scanner = new RecordScanner();
  const mismatched: number[] = [];
  for await (const page of storePages(store, VERIFY_PAGE)) {
    mismatched.push(...page.mismatched);
    scanInto(scanner, page.records);
    await new Promise((resolve) => setImmediate(resolve));
  }
  const report = classify(scanner.finish(), {
    checkpoints: opts.checkpoints ?? [],
    logKeys: opts.logKeys ?? [],
    witnessKeys: opts.witnessKeys ?? [],
    ...(opts.trusted === undefined ? {} : { trusted: opts.trusted }),
  });
  const first = mismatched[0];
  if (first === undefined) return report;
  if (
    report.first_bad_seq !== null &&
    report.first_bad_seq <= first &&
    report.code !== VerifyCode.TORN_TAIL
  ) {
    return report;
  }
  return {
    ...report,
    ok: false,
    code: VerifyCode.MODIFIED,
    first_bad_seq: first,
    message: `record ${first} as stored is not the canonical encoding of its content: its bytes were changed`,
  };
}

export interface ExportOptions {
  /** Signs a checkpoint over every exported record, so the whole export is covered. */
  signer?: NoteSigner;
  /** Log verifier key to embed when there is no signer. */
  logKey?: string;
  origin?: string;
  witnessKeys?: readonly string[];
  /** External checkpoint notes (e.g. the newest witnessed one). */
  checkpoints?: readonly string[];
}

export interface ExportSummary {
  records: number;
  /** Every checkpoint the bundle carries: `inside_ledger` + `alongside`. */
  checkpoints: number;
  /** `checkpoint` events among the records (the ones the gateway issued). */
  inside_ledger: number;
  /** Checkpoint lines after the records (given with --checkpoint, or signed at export). */
  alongside: number;
  /** Whether one of `alongside` was signed at export over every record. */
  signed_now: boolean;
  /** Seqs whose stored bytes are not canonical (the export carries the canonical rebuild). */
  mismatched: number[];
  /** Checkpoint notes dropped because they carried no signature from a listed key. */
  dropped_checkpoints: number;
}

/** Exports a store to a bundle file at `outPath`. */
export async function exportBundle(
  store: LedgerStore,
  outPath: string,
  opts: ExportOptions = {},
): Promise<ExportSummary> {
  const { records, mismatched, checkpoints: inside } = await readStoreRecords(store);
  const logKey = opts.signer ? verifierKeyOf(opts.signer) : (opts.logKey ?? null);
  const witnessKeys = [...(opts.witnessKeys ?? [])];
  const known = [logKey, ...witnessKeys].flatMap((k) => {
    if (k === null) return [];
    const v = parseVerifierKey(k);
    return v.ok ? [v.value] : [];
  });
  // Bundles are strict about signature lines: keep only those from keys the bundle lists.
  const given = opts.checkpoints ?? [];
  const checkpoints = given.flatMap((c) => {
    const kept = keepSignatures(c, known);
    return kept === null ? [] : [kept];
  });
  if (opts.signer) checkpoints.push(checkpointFor(records, opts.signer));
  await writeBundle(outPath, {
    origin: opts.signer?.name ?? opts.origin ?? null,
    logKey,
    witnessKeys,
    records,
    checkpoints,
  });
  return {
    records: records.length,
    checkpoints: inside + checkpoints.length,
    inside_ledger: inside,
    alongside: checkpoints.length,
    signed_now: opts.signer !== undefined,
    mismatched,
    dropped_checkpoints: given.length - (checkpoints.length - (opts.signer ? 1 : 0)),
  };
}
