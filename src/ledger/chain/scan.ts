// The verifier's judging loop over the stored record bytes, given their hashes (`hashChunk`, on
// any thread): each record's prev_hash link, its seq, and the Merkle root at the sizes the
// checkpoints talk about. Fields are located in the canonical bytes without a JSON parse: top-level
// `prev_hash` and `seq` are adjacent near the end in canonical key order, and no JSON string can
// contain an unescaped `,"seq":`, so the last occurrence is the top-level one. A byte change that
// fools this shortcut still changes the record's hash, which the next link or the tree catches.
import { hash } from 'node:crypto';
import { hashChunk, treeOutputBytes } from './chunk-hash.js';
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

/** Whether the 64 hex digits at `b[at]` are exactly the lowercase hex of `h[hAt, hAt + 32)`. */
function hexMatches(b: Buffer, at: number, h: Uint8Array, hAt: number): boolean {
  for (let j = 0; j < 32; j++) {
    const c = h[hAt + j]!;
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
 * Judges records in log order, a chunk at a time, from their hashes (`hashChunk`, run on any
 * thread). Per record: a backward search for seq and prev_hash and a byte comparison of prev_hash
 * with the previous record's chain hash; nothing is parsed as JSON on the fast path and no record
 * is copied. The tree takes the chunk's leaf and subtree hashes as they are.
 */
export class RecordScanner {
  readonly #tree = new MerkleLog();
  readonly #seqs: number[] = [];
  readonly #broken: number[] = [];
  readonly #unreadable: number[] = [];
  readonly #checkpoints: EmbeddedCheckpoint[] = [];
  /** Chain hash of the previous record (all zeros before record 1: GENESIS_HASH). */
  readonly #prevHash = new Uint8Array(32);
  /** The final record so far (a copy). */
  #last: Buffer | null = null;

  get size(): number {
    return this.#seqs.length;
  }

  /**
   * The next `n` records, at `data[ranges[2i], ranges[2i + 1])`, with the hashes `hashChunk` wrote
   * for them. `data`, `ranges` and `chains` may be reused once this returns; `tree` is kept.
   */
  pushChunk(
    data: Buffer,
    ranges: Int32Array,
    n: number,
    chains: Uint8Array,
    tree: Uint8Array,
  ): void {
    if (n === 0) return;
    let prev: Uint8Array = this.#prevHash;
    let prevAt = 0;
    for (let i = 0; i < n; i++) {
      const start = ranges[2 * i]!;
      const end = ranges[2 * i + 1]!;
      const k = this.#seqs.length + 1;
      const f = readFields(data, start, end);
      this.#seqs.push(f ? f.seq : -1);
      if (!f) {
        this.#unreadable.push(k);
        this.#broken.push(k);
      } else if (
        f.prevAt >= 0
          ? !hexMatches(data, f.prevAt, prev, prevAt)
          : f.prev !== Buffer.from(prev.subarray(prevAt, prevAt + 32)).toString('hex')
      ) {
        this.#broken.push(k);
      }
      if (f?.checkpoint) {
        const c = embedded(data.subarray(start, end), k);
        if (c) this.#checkpoints.push(c);
      }
      prev = chains;
      prevAt = 32 * i;
    }
    this.#prevHash.set(chains.subarray(32 * (n - 1), 32 * n));
    this.#last = Buffer.from(data.subarray(ranges[2 * (n - 1)], ranges[2 * n - 1]));
    this.#tree.extend(n, tree);
  }

  finish(): ScanResult {
    const t = this.#tree;
    const n = t.size;
    const last = this.#last ?? undefined;
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

/** Records in memory are hashed in batches of about this many bytes (copied behind a spare byte). */
const BATCH_BYTES = 1 << 20;

export function scanRecords(records: readonly Uint8Array[]): ScanResult {
  const s = new RecordScanner();
  scanInto(s, records);
  return s.finish();
}

/** Pushes `records` (the next ones of the ledger, in order) into `s`, hashed in batches. */
export function scanInto(s: RecordScanner, records: readonly Uint8Array[]): void {
  let buf = Buffer.allocUnsafe(BATCH_BYTES);
  let ranges = new Int32Array(256);
  let chains = new Uint8Array(0);
  for (let from = 0; from < records.length;) {
    let n = 0;
    let at = 0;
    for (let i = from; i < records.length; i++) {
      const len = records[i]!.length;
      if (n > 0 && at + len + 1 > buf.length) break;
      if (at + len + 1 > buf.length) buf = Buffer.allocUnsafe(len + 1);
      if (2 * n + 2 > ranges.length) {
        const bigger = new Int32Array(2 * ranges.length);
        bigger.set(ranges);
        ranges = bigger;
      }
      buf.set(records[i]!, at + 1);
      ranges[2 * n] = at + 1;
      ranges[2 * n + 1] = at + 1 + len;
      at += len + 1;
      n++;
    }
    if (chains.length < 32 * n) chains = new Uint8Array(32 * n);
    const tree = new Uint8Array(treeOutputBytes(s.size, n));
    hashChunk(hash, buf, ranges, n, s.size, chains, tree);
    s.pushChunk(buf, ranges, n, chains, tree);
    from += n;
  }
}
