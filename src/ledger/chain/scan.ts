// The verifier's hot loop over the stored record bytes: each record's chain hash (SHA-256 of the
// bytes) and RFC 9162 leaf hash, its prev_hash link, its seq, and the Merkle root at the sizes the
// checkpoints talk about. Fields are located in the canonical bytes without a JSON parse: top-level
// `prev_hash` and `seq` are adjacent near the end in canonical key order, and no JSON string can
// contain an unescaped `,"seq":`, so the last occurrence is the top-level one. A byte change that
// fools this shortcut still changes the record's hash, which the next link or the tree catches.
import { hash } from 'node:crypto';
import { MerkleLog } from './merkle-log.js';

export interface EmbeddedCheckpoint {
  /** Seq (position) of the `checkpoint` event that carries the note. */
  at: number;
  note: string;
  size: unknown;
  root_hash: unknown;
}

export interface ScanResult {
  n: number;
  /** seq read from record k (index k - 1); -1 when unreadable. */
  seqs: readonly number[];
  /** Positions (1-based, ascending) whose prev_hash does not equal the previous record's hash. */
  broken: readonly number[];
  /** Positions (1-based, ascending) whose seq/prev_hash cannot be read at all. */
  unreadable: readonly number[];
  /** Root (hex) of the first `size` records, or undefined when size > n. */
  rootAt(size: number): string | undefined;
  /** Whether the final record is complete (parses as a record). */
  lastParses: boolean;
  checkpoints: EmbeddedCheckpoint[];
}

const PREV = Buffer.from('"prev_hash":"');
const KIND_CHECKPOINT = Buffer.from('"kind":"checkpoint"');
const HEX = Buffer.from('0123456789abcdef');
/** The chain hash before record 1, as 32 latin1 characters (GENESIS_HASH is its hex form). */
const GENESIS_LATIN1 = '\0'.repeat(32);

const asBuffer = (u: Uint8Array): Buffer =>
  Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);

interface Pattern {
  bytes: Buffer;
  /** Backward Horspool shifts: the smallest k >= 1 with bytes[k] === c, else the length. */
  shift: Uint8Array;
}

function pattern(text: string): Pattern {
  const bytes = Buffer.from(text);
  const shift = new Uint8Array(256).fill(bytes.length);
  for (let k = bytes.length - 1; k >= 1; k--) shift[bytes[k]!] = k;
  return { bytes, shift };
}

const SEQ = pattern(',"seq":');
const OPID = pattern(',"operation_id":');

/**
 * Last occurrence of `pat` starting in `b[lo, from]` and ending by `end` (mirrored Horspool: the
 * fields sit a few dozen bytes from the end, and most bytes let the search skip a pattern length).
 */
function lastIndexOf(b: Buffer, pat: Pattern, from: number, lo: number, end: number): number {
  const p = pat.bytes;
  const len = p.length;
  const shift = pat.shift;
  for (let i = Math.min(from, end - len); i >= lo;) {
    let j = 0;
    while (j < len && b[i + j] === p[j]) j++;
    if (j === len) return i;
    i -= shift[b[i]!]!;
  }
  return -1;
}

const matchesAt = (b: Buffer, pat: Buffer, at: number, lo: number, end: number): boolean => {
  if (at < lo || at + pat.length > end) return false;
  for (let j = 0; j < pat.length; j++) if (b[at + j] !== pat[j]) return false;
  return true;
};

/** Whether the 64 hex digits at `b[at]` are exactly the lowercase hex of `h` (32 latin1 chars). */
function hexMatches(b: Buffer, at: number, h: string): boolean {
  for (let j = 0; j < 32; j++) {
    const c = h.charCodeAt(j);
    if (b[at + 2 * j] !== HEX[c >> 4] || b[at + 2 * j + 1] !== HEX[c & 15]) return false;
  }
  return true;
}

interface Fields {
  seq: number;
  /** Offset of the 64 hex digits of prev_hash, or -1 with `prev` set (slow path). */
  prevAt: number;
  prev: string | null;
  checkpoint: boolean;
}

/**
 * Locates seq and prev_hash in the canonical bytes `b[start, end)`:
 * `…,"operation_id":…,"prev_hash":"<64 hex>","seq":N,…` (canonical key order puts them next to
 * each other near the end). Anything else falls back to a JSON parse; null when the bytes are not
 * a record at all.
 */
function readFields(b: Buffer, start: number, end: number): Fields | null {
  const seqAt = lastIndexOf(b, SEQ, end - 1, start, end);
  const prevAt = seqAt - 65;
  if (
    seqAt > start &&
    b[seqAt - 1] === 0x22 &&
    matchesAt(b, PREV, prevAt - PREV.length, start, end)
  ) {
    let i = seqAt + SEQ.bytes.length;
    const first = i;
    let v = 0;
    while (i < end && b[i]! >= 0x30 && b[i]! <= 0x39 && i - first < 16) v = v * 10 + b[i++]! - 0x30;
    const digits = i - first;
    if (
      digits > 0 &&
      !(b[first] === 0x30 && digits > 1) &&
      i < end &&
      (b[i] === 0x2c || b[i] === 0x7d)
    ) {
      const op = lastIndexOf(b, OPID, prevAt - PREV.length, start, end);
      const checkpoint =
        op > start && matchesAt(b, KIND_CHECKPOINT, op - KIND_CHECKPOINT.length, start, end);
      return { seq: v, prevAt, prev: null, checkpoint };
    }
  }
  try {
    const r = JSON.parse(b.toString('utf8', start, end)) as Record<string, unknown> | null;
    if (
      r === null ||
      typeof r !== 'object' ||
      typeof r.seq !== 'number' ||
      typeof r.prev_hash !== 'string'
    ) {
      return null;
    }
    return { seq: r.seq, prevAt: -1, prev: r.prev_hash, checkpoint: r.kind === 'checkpoint' };
  } catch {
    return null;
  }
}

function fullyParses(b: Buffer): boolean {
  try {
    const r = JSON.parse(b.toString('utf8')) as Record<string, unknown> | null;
    return (
      r !== null &&
      typeof r === 'object' &&
      typeof r.seq === 'number' &&
      typeof r.prev_hash === 'string' &&
      typeof r.kind === 'string'
    );
  } catch {
    return false;
  }
}

function embedded(b: Buffer, at: number): EmbeddedCheckpoint | null {
  try {
    const r = JSON.parse(b.toString('utf8')) as { kind?: unknown; data?: Record<string, unknown> };
    if (r.kind === 'checkpoint' && r.data && typeof r.data.note === 'string') {
      return { at, note: r.data.note, size: r.data.size, root_hash: r.data.root_hash };
    }
  } catch {
    // A damaged checkpoint event is a damaged record: the chain check reports it.
  }
  return null;
}

/**
 * Streams records in log order. Per record: one chain hash, one leaf hash (unless the leaf hashes
 * are computed elsewhere: `{ leaves: false }`, then `finish` takes the tree), a backward search
 * for seq and prev_hash, and a byte comparison of prev_hash with the previous chain hash. Nothing
 * is parsed as JSON on the fast path and no record is copied: the leaf hash needs `0x00 || bytes`,
 * so a caller whose buffer has a spare byte before the record (`prefixWritable`) lets the scanner
 * write the 0x00 there; otherwise the record is copied behind a 0x00 in a scratch buffer.
 */
export class RecordScanner {
  readonly #tree: MerkleLog | null;
  readonly #seqs: number[] = [];
  readonly #broken: number[] = [];
  readonly #unreadable: number[] = [];
  readonly #checkpoints: EmbeddedCheckpoint[] = [];
  #scratch = Buffer.allocUnsafe(64 * 1024);
  /** Chain hash of the previous record, 32 latin1 characters. */
  #prevHash = GENESIS_LATIN1;
  /** The final record so far: a view into the caller's buffer until `settle` copies it. */
  #last: Buffer | null = null;
  #lastStart = 0;
  #lastEnd = 0;
  #lastOwned = false;

  constructor(opts: { leaves?: boolean } = {}) {
    this.#tree = opts.leaves === false ? null : new MerkleLog();
  }

  get size(): number {
    return this.#seqs.length;
  }

  push(bytes: Uint8Array): void {
    this.pushRange(asBuffer(bytes), 0, bytes.length);
  }

  /**
   * Scans the record held in `src[start, end)`. With `prefixWritable`, `src[start - 1]` may be
   * overwritten (it is restored). The bytes must stay unchanged until the next `pushRange` or
   * `settle`.
   */
  pushRange(src: Buffer, start: number, end: number, prefixWritable = false): void {
    const k = this.#seqs.length + 1;
    if (this.#tree) {
      if (prefixWritable && start > 0) {
        const saved = src[start - 1]!;
        src[start - 1] = 0;
        this.#tree.pushLatin1(hash('sha256', src.subarray(start - 1, end), 'binary'));
        src[start - 1] = saved;
      } else {
        const len = end - start;
        if (len + 1 > this.#scratch.length) this.#scratch = Buffer.allocUnsafe(2 * (len + 1));
        this.#scratch[0] = 0;
        src.copy(this.#scratch, 1, start, end);
        this.#tree.pushLatin1(hash('sha256', this.#scratch.subarray(0, len + 1), 'binary'));
      }
    }
    const f = readFields(src, start, end);
    this.#seqs.push(f ? f.seq : -1);
    if (!f) {
      this.#unreadable.push(k);
      this.#broken.push(k);
    } else if (
      f.prevAt >= 0
        ? !hexMatches(src, f.prevAt, this.#prevHash)
        : f.prev !== Buffer.from(this.#prevHash, 'latin1').toString('hex')
    ) {
      this.#broken.push(k);
    }
    this.#prevHash = hash('sha256', src.subarray(start, end), 'binary');
    if (f?.checkpoint) {
      const c = embedded(src.subarray(start, end), k);
      if (c) this.#checkpoints.push(c);
    }
    this.#last = src;
    this.#lastStart = start;
    this.#lastEnd = end;
    this.#lastOwned = false;
  }

  /** Copies the final record out of the caller's buffer (call before reusing that buffer). */
  settle(): void {
    if (!this.#last || this.#lastOwned) return;
    this.#last = Buffer.from(this.#last.subarray(this.#lastStart, this.#lastEnd));
    this.#lastStart = 0;
    this.#lastEnd = this.#last.length;
    this.#lastOwned = true;
  }

  /** The result; `tree` holds the leaves when they were hashed elsewhere (`{ leaves: false }`). */
  finish(tree?: MerkleLog): ScanResult {
    const t = tree ?? this.#tree;
    if (!t || t.size !== this.#seqs.length) {
      throw new RangeError(
        `RecordScanner.finish: a tree of ${this.#seqs.length} leaves is needed, got ${t?.size ?? 'none'}`,
      );
    }
    const n = t.size;
    const last = this.#last?.subarray(this.#lastStart, this.#lastEnd);
    return {
      n,
      seqs: this.#seqs,
      broken: this.#broken,
      unreadable: this.#unreadable,
      rootAt: (size) => (size >= 0 && size <= n ? t.root(size).toString('hex') : undefined),
      lastParses: last === undefined || fullyParses(last),
      checkpoints: this.#checkpoints,
    };
  }
}

export function scanRecords(records: readonly Uint8Array[]): ScanResult {
  const s = new RecordScanner();
  for (const r of records) s.push(r);
  return s.finish();
}
