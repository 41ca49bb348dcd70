// An append-only RFC 9162 tree that keeps every perfect subtree root (about 2n hashes, 64 bytes per
// leaf, in flat buffers): the root at any earlier size, and inclusion and consistency proofs, cost
// O(log² n) hashes instead of rehashing the leaves. The verifier streams records into it once and
// then answers for every checkpoint size; the log side uses it to prove consistency to a witness.
import { hash } from 'node:crypto';
import { emptyRoot, type Hash } from './merkle.js';

const scratch = Buffer.alloc(65);

function node(left: string, right: string): string {
  scratch[0] = 1;
  scratch.write(left, 1, 32, 'latin1');
  scratch.write(right, 33, 32, 'latin1');
  return hash('sha256', scratch, 'binary');
}

/** Hashes per block a level allocates for `push`: 128 KiB. */
const HASHES_PER_BLOCK = 4096;

/**
 * A growable array of 32-byte hashes in segments: blocks it allocates for `push`, and runs hashed
 * elsewhere that it keeps as they are (`adopt`). No per-hash objects for the GC to track, and
 * growing never copies. Hashes come and go as 32-character latin1 strings (what `crypto.hash`
 * returns cheapest); the hot paths copy bytes in JS loops, which cost less than a native call.
 */
class HashArray {
  readonly #segments: Uint8Array[] = [];
  /** Index of each segment's first hash. */
  readonly #starts: number[] = [];
  /** Unused hashes at the end of the last segment (only a block of our own has any). */
  #room = 0;
  length = 0;

  push(h: string): void {
    if (this.#room === 0) {
      this.#segments.push(new Uint8Array(32 * HASHES_PER_BLOCK));
      this.#starts.push(this.length);
      this.#room = HASHES_PER_BLOCK;
    }
    const b = this.#segments[this.#segments.length - 1]!;
    const at = 32 * (this.length - this.#starts[this.#starts.length - 1]!);
    for (let j = 0; j < 32; j++) b[at + j] = h.charCodeAt(j);
    this.length++;
    this.#room--;
  }

  /** Appends the hashes stored back to back in `run` (kept, not copied). */
  adopt(run: Uint8Array): void {
    if (run.length === 0) return;
    this.#segments.push(run);
    this.#starts.push(this.length);
    this.length += run.length / 32;
    this.#room = 0;
  }

  /** The segment holding hash `i`, and the hash's byte offset in it. */
  #locate(i: number): [Uint8Array, number] {
    const starts = this.#starts;
    let hi = starts.length - 1;
    if (starts[hi]! <= i) return [this.#segments[hi]!, 32 * (i - starts[hi]!)];
    let lo = 0;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= i) lo = mid;
      else hi = mid - 1;
    }
    return [this.#segments[lo]!, 32 * (i - starts[lo]!)];
  }

  get(i: number): string {
    const [b, at] = this.#locate(i);
    return Buffer.from(b.buffer, b.byteOffset + at, 32).toString('latin1');
  }

  /** H(0x01 || h[2i] || h[2i + 1]). */
  parentOf(i: number): string {
    const [l, la] = this.#locate(2 * i);
    const [r, ra] = this.#locate(2 * i + 1);
    scratch[0] = 1;
    for (let j = 0; j < 32; j++) {
      scratch[1 + j] = l[la + j]!;
      scratch[33 + j] = r[ra + j]!;
    }
    return hash('sha256', scratch, 'binary');
  }
}

export class MerkleLog {
  /**
   * levels[h][i] = root of the perfect subtree of 2^h leaves starting at leaf i * 2^h; level h
   * holds floor(size / 2^h) hashes, so the compact range of any size is read from the levels.
   */
  #levels: HashArray[] = [new HashArray()];

  get size(): number {
    return this.#levels[0]!.length;
  }

  push(leaf: Uint8Array): void {
    this.pushLatin1(Buffer.from(leaf.buffer, leaf.byteOffset, leaf.byteLength).toString('latin1'));
  }

  /**
   * Appends a leaf hash given as a 32-character latin1 string. Each level that now holds an even
   * number of hashes completes a perfect subtree one level up (binary addition's carries).
   */
  pushLatin1(leaf: string): void {
    const levels = this.#levels;
    levels[0]!.push(leaf);
    for (let h = 0; (levels[h]!.length & 1) === 0; h++) {
      (levels[h + 1] ??= new HashArray()).push(levels[h]!.parentOf(levels[h]!.length / 2 - 1));
    }
  }

  /**
   * Appends `n` leaves hashed elsewhere: `tree` is `hashChunk`'s tree output for them (layout:
   * `treeOutputBytes`), kept as it is. The entries that straddle the earlier leaves (at most one
   * per level) are hashed here, into the places left for them.
   */
  extend(n: number, tree: Uint8Array): void {
    const levels = this.#levels;
    const first = this.size;
    const end = first + n;
    let at = 0;
    for (let h = 0, w = 1; w <= end; h++, w *= 2) {
      const level = (levels[h] ??= new HashArray());
      const s = Math.floor(first / w);
      const straddles = s * w < first && (s + 1) * w <= end;
      const count = Math.max(0, Math.floor(end / w) - Math.ceil(first / w));
      const from = at + 1;
      if (straddles) {
        const p = levels[h - 1]!.parentOf(s);
        for (let j = 0; j < 32; j++) tree[from + j] = p.charCodeAt(j);
      }
      at = from + (straddles ? 32 : 0) + 32 * count;
      level.adopt(tree.subarray(from, at));
    }
  }

  /** MTH(D[start:end]) by the RFC 9162 recursion, reading stored perfect subtrees. */
  #range(start: number, end: number): string {
    const n = end - start;
    if ((n & (n - 1)) === 0 && start % n === 0) {
      const level = Math.log2(n);
      return this.#levels[level]!.get(start / n);
    }
    let k = 1;
    while (k * 2 < n) k *= 2;
    return node(this.#range(start, start + k), this.#range(start + k, end));
  }

  /** Root at `size` (default: the current size). */
  root(size = this.size): Hash {
    if (!(size >= 0 && size <= this.size))
      throw new RangeError(`root: size ${size} exceeds ${this.size}`);
    if (size === 0) return emptyRoot();
    return Buffer.from(this.#range(0, size), 'latin1');
  }

  leaf(index: number): Hash {
    return Buffer.from(this.#levels[0]!.get(index), 'latin1');
  }

  /** RFC 9162 §2.1.3.1 inclusion proof of leaf `index` in the tree of size `size`. */
  inclusionProof(index: number, size = this.size): Hash[] {
    if (!(index >= 0 && index < size && size <= this.size))
      throw new RangeError('inclusionProof: bad index or size');
    const out: string[] = [];
    const path = (m: number, start: number, n: number): void => {
      if (n === 1) return;
      let k = 1;
      while (k * 2 < n) k *= 2;
      if (m < k) {
        path(m, start, k);
        out.push(this.#range(start + k, start + n));
      } else {
        path(m - k, start + k, n - k);
        out.push(this.#range(start, start + k));
      }
    };
    path(index, 0, size);
    return out.map((h) => Buffer.from(h, 'latin1'));
  }

  /** RFC 9162 §2.1.4.1 consistency proof from `size1` to `size2`. */
  consistencyProof(size1: number, size2 = this.size): Hash[] {
    if (!(size1 >= 0 && size1 <= size2 && size2 <= this.size))
      throw new RangeError('consistencyProof: bad sizes');
    if (size1 === 0 || size1 === size2) return [];
    const out: string[] = [];
    const sub = (m: number, start: number, n: number, whole: boolean): void => {
      if (m === n) {
        if (!whole) out.push(this.#range(start, start + n));
        return;
      }
      let k = 1;
      while (k * 2 < n) k *= 2;
      if (m <= k) {
        sub(m, start, k, whole);
        out.push(this.#range(start + k, start + n));
      } else {
        sub(m - k, start + k, n - k, false);
        out.push(this.#range(start, start + k));
      }
    };
    sub(size1, 0, size2, true);
    return out.map((h) => Buffer.from(h, 'latin1'));
  }
}
