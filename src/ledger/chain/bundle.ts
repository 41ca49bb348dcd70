// Portable export bundle (JSONL, every line canonical JSON and '\n'-terminated):
//   1. header   {"format":"candor-ledger-bundle/v1","log_key":…,"origin":…,"witness_keys":[…]}
//   2. records  one per line: the stored record bytes verbatim (canonical JSON never contains a raw
//               newline), or {"record_b64":"…"} for bytes that could not stand on a line of their own
//   3. {"checkpoint":"<signed note, with any witness cosignature lines>"} lines
//   4. trailer  {"end":{"checkpoints":M,"records":N}}
// Raw record lines keep the bundle greppable and let verification hash the file's own bytes with no
// decoding step. Everything in the bundle is covered by something the verifier checks: records by
// the chain and the tree, checkpoints by signatures, the trailer by the counts. The header's keys
// are claims, never trust: a bundle cannot vouch for itself. Its log key is used only when the
// auditor anchors none (and the report says `claimed`); its witness keys never raise the witnessed
// size. Signature lines from keys nobody listed are ignored, as the signed-note spec requires, and
// reported. Streaming verification of a bundle file is in bundle-file.ts.
import { open, readFile } from 'node:fs/promises';
import { canonicalJson } from '../../core/canonical.js';
import { parseNote, formatSignatureLine, type NoteSigner } from './note.js';
import { signCheckpoint } from './checkpoint.js';
import { leafHash, TreeBuilder } from './merkle.js';
import { scanRecords, type ScanResult } from './scan.js';
import { classify, VerifyCode, type VerifyReport } from './verify.js';

export const BUNDLE_FORMAT = 'candor-ledger-bundle/v1';

export interface BundleHeader {
  format: typeof BUNDLE_FORMAT;
  origin: string | null;
  log_key: string | null;
  witness_keys: string[];
}

export interface BundleProblem {
  code: VerifyCode;
  first_bad_seq: number | null;
  message: string;
}

export interface Bundle {
  header: BundleHeader | null;
  records: Buffer[];
  checkpoints: string[];
  /** The first framing problem found while reading (damaged header, order, trailer, counts). */
  problem: BundleProblem | null;
}

const NL = 0x0a;
const RAW_PREFIX = Buffer.from('{"at":');
const P_CHECKPOINT = Buffer.from('{"checkpoint":');
const P_END = Buffer.from('{"end":');
const P_B64 = Buffer.from('{"record_b64":');

/** One record as a bundle line (without the newline). */
export function recordLine(bytes: Uint8Array): Buffer {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.indexOf(NL) < 0 && b.subarray(0, RAW_PREFIX.length).equals(RAW_PREFIX)) return b;
  return Buffer.from(canonicalJson({ record_b64: b.toString('base64') }));
}

export interface BundleParts {
  origin: string | null;
  logKey: string | null;
  witnessKeys?: readonly string[];
  records: readonly Uint8Array[];
  checkpoints?: readonly string[];
}

/** The bundle as chunks, ready to write (or concatenate). */
export function* bundleChunks(p: BundleParts): Generator<Buffer> {
  const header: BundleHeader = {
    format: BUNDLE_FORMAT,
    origin: p.origin,
    log_key: p.logKey,
    witness_keys: [...(p.witnessKeys ?? [])],
  };
  const nl = Buffer.from('\n');
  yield Buffer.from(`${canonicalJson(header)}\n`);
  for (const r of p.records) {
    yield recordLine(r);
    yield nl;
  }
  const cps = p.checkpoints ?? [];
  for (const c of cps) yield Buffer.from(`${canonicalJson({ checkpoint: c })}\n`);
  yield Buffer.from(
    `${canonicalJson({ end: { checkpoints: cps.length, records: p.records.length } })}\n`,
  );
}

export function encodeBundle(p: BundleParts): Buffer {
  return Buffer.concat([...bundleChunks(p)]);
}

export async function writeBundle(path: string, p: BundleParts): Promise<void> {
  const fh = await open(path, 'w');
  try {
    let batch: Buffer[] = [];
    let size = 0;
    for (const chunk of bundleChunks(p)) {
      batch.push(chunk);
      size += chunk.length;
      if (size >= 1 << 20) {
        await fh.write(Buffer.concat(batch));
        batch = [];
        size = 0;
      }
    }
    await fh.write(Buffer.concat(batch));
    await fh.sync();
  } finally {
    await fh.close();
  }
}

const startsWith = (line: Buffer, prefix: Buffer): boolean =>
  line.length >= prefix.length && line.subarray(0, prefix.length).equals(prefix);

/** Parses `text` as JSON and requires it to be in canonical form (so no byte can change unseen). */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

function canonical(line: Buffer): unknown {
  try {
    // Fatal decoding: a byte that is not UTF-8 is damage, never silently read as U+FFFD.
    const text = UTF8.decode(line);
    const v: unknown = JSON.parse(text);
    return canonicalJson(v) === text ? v : undefined;
  } catch {
    return undefined;
  }
}

function parseHeader(line: Buffer | undefined): BundleHeader | null {
  if (!line) return null;
  const h = canonical(line) as Record<string, unknown> | undefined;
  if (!h || typeof h !== 'object' || Array.isArray(h)) return null;
  const keys = Object.keys(h).sort().join(',');
  const strOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';
  if (
    keys !== 'format,log_key,origin,witness_keys' ||
    h.format !== BUNDLE_FORMAT ||
    !strOrNull(h.origin) ||
    !strOrNull(h.log_key) ||
    !Array.isArray(h.witness_keys) ||
    !h.witness_keys.every((k) => typeof k === 'string')
  ) {
    return null;
  }
  return h as unknown as BundleHeader;
}

/**
 * The bundle grammar as a line-by-line state machine, so a whole file (`parseBundle`) and a stream
 * of chunks (`verifyBundleFile`) share one set of rules. Record bytes go to `onRecord` as they are
 * read; framing damage is recorded in `problem`, never thrown.
 */
export class BundleReader {
  header: BundleHeader | null = null;
  readonly checkpoints: string[] = [];
  records = 0;
  problem: BundleProblem | null = null;
  #line = 0;
  #stage: 'records' | 'checkpoints' | 'end' = 'records';
  #declared: { checkpoints: number; records: number } | null = null;

  /** `onRecord` receives the record bytes as `buf[start, end)`, valid only during the call. */
  constructor(private readonly onRecord: (buf: Buffer, start: number, end: number) => void) {}

  #note(p: BundleProblem): void {
    this.problem ??= p;
  }

  #framing(message: string): void {
    this.#note({ code: VerifyCode.BAD_CHECKPOINT, first_bad_seq: null, message });
  }

  /** One line, `buf[start, end)` without its newline. */
  line(buf: Buffer, start = 0, end = buf.length): void {
    const i = ++this.#line;
    // Fast path: a raw record line starts with `{"at"` (canonical key order).
    if (
      this.#stage === 'records' &&
      i > 1 &&
      buf[start] === 0x7b &&
      buf[start + 1] === 0x22 &&
      buf[start + 2] === 0x61 &&
      buf[start + 3] === 0x74 &&
      buf[start + 4] === 0x22
    ) {
      this.records++;
      this.onRecord(buf, start, end);
      return;
    }
    const line = buf.subarray(start, end);
    if (i === 1) {
      this.header = parseHeader(line);
      if (!this.header) this.#framing('the bundle header is missing or damaged');
    } else if (this.#stage === 'end') {
      this.#framing(`unexpected line ${i} after the bundle trailer`);
    } else if (startsWith(line, P_END)) {
      const e = canonical(line) as
        { end?: { checkpoints?: unknown; records?: unknown } } | undefined;
      const c = e?.end?.checkpoints;
      const r = e?.end?.records;
      if (
        typeof c !== 'number' ||
        typeof r !== 'number' ||
        Object.keys(e!).length !== 1 ||
        Object.keys(e!.end!).length !== 2
      ) {
        this.#framing(`the bundle trailer (line ${i}) is damaged`);
      } else {
        this.#declared = { checkpoints: c, records: r };
      }
      this.#stage = 'end';
    } else if (startsWith(line, P_CHECKPOINT)) {
      const c = canonical(line) as { checkpoint?: unknown } | undefined;
      if (typeof c?.checkpoint !== 'string' || Object.keys(c).length !== 1)
        this.#framing(`checkpoint line ${i} is damaged`);
      else this.checkpoints.push(c.checkpoint);
      this.#stage = 'checkpoints';
    } else if (this.#stage === 'checkpoints') {
      this.#framing(`line ${i} is neither a checkpoint nor the trailer`);
    } else {
      this.records++;
      const bytes = decodeRecordLine(line);
      this.onRecord(bytes, 0, bytes.length);
    }
  }

  /** Call once after the last line; `unterminated` when the data did not end with a newline. */
  end(unterminated: boolean): void {
    if (this.#line === 0) this.#framing('the bundle is empty');
    if (unterminated) this.#framing('the bundle does not end with a newline');
    const d = this.#declared;
    const n = this.records;
    if (!d) {
      this.#note({
        code: VerifyCode.TRUNCATED,
        first_bad_seq: n + 1,
        message: 'the bundle has no trailer: it was cut short',
      });
    } else if (d.records > n) {
      this.#note({
        code: VerifyCode.TRUNCATED,
        first_bad_seq: n + 1,
        message: `the bundle declares ${d.records} records but holds ${n}`,
      });
    } else if (d.records < n) {
      this.#note({
        code: VerifyCode.INSERTED,
        first_bad_seq: d.records + 1,
        message: `the bundle declares ${d.records} records but holds ${n}`,
      });
    } else if (d.checkpoints !== this.checkpoints.length) {
      this.#framing(
        `the bundle declares ${d.checkpoints} checkpoints but holds ${this.checkpoints.length}`,
      );
    }
  }
}

/** Splits an in-memory bundle into its parts. */
export function parseBundle(buf: Buffer): Bundle {
  const records: Buffer[] = [];
  const reader = new BundleReader((b, s, e) => records.push(b.subarray(s, e)));
  let from = 0;
  for (let at = buf.indexOf(NL); at >= 0; at = buf.indexOf(NL, from)) {
    reader.line(buf, from, at);
    from = at + 1;
  }
  if (from < buf.length) reader.line(buf, from, buf.length);
  reader.end(from < buf.length);
  return {
    header: reader.header,
    records,
    checkpoints: reader.checkpoints,
    problem: reader.problem,
  };
}

/** A `{"record_b64":…}` line decodes to its bytes; anything else is the record bytes verbatim. */
function decodeRecordLine(line: Buffer): Buffer {
  if (!startsWith(line, P_B64)) return line;
  const v = canonical(line) as { record_b64?: unknown } | undefined;
  if (typeof v?.record_b64 !== 'string' || Object.keys(v).length !== 1) return line;
  const b = Buffer.from(v.record_b64, 'base64');
  // Non-canonical base64 falls back to the raw line, whose hash cannot match the chain.
  return b.toString('base64') === v.record_b64 ? b : line;
}

export async function readBundle(path: string): Promise<Bundle> {
  return parseBundle(await readFile(path));
}

export interface VerifyOptions {
  /** Log verifier keys the auditor anchors; without one the bundle's own key is only `claimed`. */
  logKeys?: readonly string[];
  /** Witness keys the auditor trusts: the only ones that count as witnesses. */
  witnessKeys?: readonly string[];
  trusted?: string;
}

const RECORD_CODES: ReadonlySet<VerifyCode> = new Set([
  VerifyCode.MODIFIED,
  VerifyCode.DELETED,
  VerifyCode.INSERTED,
  VerifyCode.REORDERED,
]);

/**
 * Verifies a bundle. Damage to records is reported first (it pinpoints a seq), then damage to the
 * bundle framing, then checkpoint findings; a torn final record only when nothing else is wrong.
 */
export function verifyBundle(b: Bundle, opts: VerifyOptions = {}): VerifyReport {
  return judge(scanRecords(b.records), b, opts);
}

/** The verdict from a finished scan and the bundle's framing (shared with `verifyBundleFile`). */
export function judge(
  scan: ScanResult,
  b: Omit<Bundle, 'records'>,
  opts: VerifyOptions,
): VerifyReport {
  const report = classify(scan, {
    checkpoints: b.checkpoints,
    logKeys: opts.logKeys ?? [],
    claimedLogKeys: b.header?.log_key ? [b.header.log_key] : [],
    witnessKeys: opts.witnessKeys ?? [],
    claimedWitnessKeys: b.header?.witness_keys ?? [],
    ...(opts.trusted === undefined ? {} : { trusted: opts.trusted }),
    ...(b.header?.origin ? { origin: b.header.origin } : {}),
  });
  if (!b.problem || RECORD_CODES.has(report.code)) return report;
  return { ...report, ok: false, ...b.problem };
}

/** Keeps only the signature lines of `note` made by keys named in `keep` (name+id pairs). */
export function keepSignatures(
  note: string,
  keep: readonly { name: string; keyId: number }[],
): string | null {
  const n = parseNote(note);
  if (!n.ok) return null;
  const sigs = n.value.sigs.filter((s) =>
    keep.some((k) => k.name === s.name && k.keyId === s.keyId),
  );
  if (sigs.length === 0) return null;
  return `${n.value.text}\n${sigs.map(formatSignatureLine).join('')}`;
}

/** Signs a checkpoint over all `records` (the export-time checkpoint). */
export function checkpointFor(records: readonly Uint8Array[], signer: NoteSigner): string {
  const t = new TreeBuilder();
  for (const r of records) t.push(leafHash(r));
  const signed = signCheckpoint(
    { origin: signer.name, size: records.length, root: t.root(), extensions: [] },
    signer,
  );
  if (!signed.ok) throw new TypeError(signed.failure);
  return signed.value;
}
