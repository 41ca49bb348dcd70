// The verifier's hot loop over the stored record bytes: each record's chain hash (SHA-256 of the
// bytes) and RFC 9162 leaf hash, its prev_hash link, its seq, and the Merkle root at the sizes the
// checkpoints talk about. Fields are located in the canonical bytes without a JSON parse: top-level
// `prev_hash` and `seq` are adjacent near the end in canonical key order, and no JSON string can
// contain an unescaped `,"seq":`, so the last occurrence is the top-level one. A byte change that
// fools this shortcut still changes the record's hash, which the next link or the tree catches.
import { hash } from 'node:crypto';
import { GENESIS_HASH } from '../events.js';
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
const SEQ = Buffer.from(',"seq":');
const OPID = Buffer.from(',"operation_id":');
const KIND_CHECKPOINT = Buffer.from('"kind":"checkpoint"');

const asBuffer = (u: Uint8Array): Buffer =>
  Buffer.isBuffer(u) ? u : Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** Backward search in JS: the fields sit a few dozen bytes from the end, so this stops early. */
function lastIndexOf(b: Buffer, pat: Buffer, from: number): number {
  const p0 = pat[0];
  const len = pat.length;
  for (let i = Math.min(from, b.length - len); i >= 0; i--) {
    if (b[i] !== p0) continue;
    let j = 1;
    while (j < len && b[i + j] === pat[j]) j++;
    if (j === len) return i;
  }
  return -1;
}

const matchesAt = (b: Buffer, pat: Buffer, at: number): boolean => {
  if (at < 0 || at + pat.length > b.length) return false;
  for (let j = 0; j < pat.length; j++) if (b[at + j] !== pat[j]) return false;
  return true;
};

interface Fields {
  seq: number;
  /** Offset of the 64 hex digits of prev_hash, or -1 with `prev` set (slow path). */
  prevAt: number;
  prev: string | null;
  checkpoint: boolean;
}

/**
 * Locates seq and prev_hash in canonical bytes: `…,"operation_id":…,"prev_hash":"<64 hex>","seq":N,…`
 * (canonical key order puts them next to each other near the end). Anything else falls back to a
 * JSON parse; null when the bytes are not a record at all.
 */
function readFields(b: Buffer): Fields | null {
  const seqAt = lastIndexOf(b, SEQ, b.length - 1);
  const prevAt = seqAt - 65;
  if (seqAt > 0 && b[seqAt - 1] === 0x22 && matchesAt(b, PREV, prevAt - PREV.length)) {
    let i = seqAt + SEQ.length;
    const start = i;
    let v = 0;
    while (i < b.length && b[i]! >= 0x30 && b[i]! <= 0x39 && i - start < 16)
      v = v * 10 + b[i++]! - 0x30;
    const digits = i - start;
    if (digits > 0 && !(b[start] === 0x30 && digits > 1) && (b[i] === 0x2c || b[i] === 0x7d)) {
      const op = lastIndexOf(b, OPID, prevAt - PREV.length);
      const checkpoint = op > 0 && matchesAt(b, KIND_CHECKPOINT, op - KIND_CHECKPOINT.length);
      return { seq: v, prevAt, prev: null, checkpoint };
    }
  }
  try {
    const r = JSON.parse(b.toString('utf8')) as Record<string, unknown> | null;
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
 * Streams records in log order. Each record is copied once into a scratch buffer behind a 0x00
 * byte, so the leaf hash and the chain hash read the same memory through cached views: the hot
 * loop creates no per-record Buffer objects, and nothing the caller passes in is kept (a reader can
 * reuse one buffer for a whole file).
 */
export class RecordScanner {
  readonly #tree = new MerkleLog();
  readonly #seqs: number[] = [];
  readonly #broken: number[] = [];
  readonly #unreadable: number[] = [];
  readonly #checkpoints: EmbeddedCheckpoint[] = [];
  #scratch = Buffer.allocUnsafe(64 * 1024);
  #leafViews = new Map<number, Buffer>();
  #bodyViews = new Map<number, Buffer>();
  #lastLength = -1;
  #prevHash = GENESIS_HASH;

  push(bytes: Uint8Array): void {
    this.pushRange(asBuffer(bytes), 0, bytes.length);
  }

  #views(len: number): [Buffer, Buffer] {
    let leaf = this.#leafViews.get(len);
    let body = this.#bodyViews.get(len);
    if (!leaf || !body) {
      leaf = this.#scratch.subarray(0, len + 1);
      body = this.#scratch.subarray(1, len + 1);
      if (this.#leafViews.size < 4096) {
        this.#leafViews.set(len, leaf);
        this.#bodyViews.set(len, body);
      }
    }
    return [leaf, body];
  }

  /** Scans the record held in `src[start, end)`. */
  pushRange(src: Buffer, start: number, end: number): void {
    const len = end - start;
    if (len + 1 > this.#scratch.length) {
      this.#scratch = Buffer.allocUnsafe(2 * (len + 1));
      this.#leafViews.clear();
      this.#bodyViews.clear();
    }
    this.#scratch[0] = 0;
    src.copy(this.#scratch, 1, start, end);
    const [leaf, b] = this.#views(len);
    const k = this.#seqs.length + 1;
    this.#tree.pushLatin1(hash('sha256', leaf, 'binary'));
    const f = readFields(b);
    this.#seqs.push(f ? f.seq : -1);
    if (!f) this.#unreadable.push(k);
    const prev = !f ? null : f.prevAt >= 0 ? b.toString('latin1', f.prevAt, f.prevAt + 64) : f.prev;
    if (prev !== this.#prevHash) this.#broken.push(k);
    this.#prevHash = hash('sha256', b, 'hex');
    if (f?.checkpoint) {
      const c = embedded(b, k);
      if (c) this.#checkpoints.push(c);
    }
    this.#lastLength = len;
  }

  finish(): ScanResult {
    const tree = this.#tree;
    const n = tree.size;
    const last =
      this.#lastLength >= 0 ? this.#scratch.subarray(1, this.#lastLength + 1) : undefined;
    return {
      n,
      seqs: this.#seqs,
      broken: this.#broken,
      unreadable: this.#unreadable,
      rootAt: (size) => (size >= 0 && size <= n ? tree.root(size).toString('hex') : undefined),
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
