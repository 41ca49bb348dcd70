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

/** Hashes per block of a level: 128 KiB blocks, an even count so a sibling pair never straddles. */
export const HASHES_PER_BLOCK = 4096;
const BLOCK_SHIFT = 12;

/**
 * A growable array of 32-byte hashes in fixed blocks (no per-hash objects for the GC to track,
 * and growing never copies). Hashes come and go as 32-character latin1 strings (what
 * `crypto.hash` returns cheapest); the hot paths copy bytes in JS loops, which cost less than a
 * native call per hash.
 */
class HashArray {
  readonly #blocks: Uint8Array[];
  length: number;

  constructor(blocks: Uint8Array[] = [], length = 0) {
    this.#blocks = blocks;
    this.length = length;
  }

  push(h: string): void {
    const i = this.length;
    let b = this.#blocks[i >> BLOCK_SHIFT];
    if (!b) this.#blocks.push((b = new Uint8Array(32 * HASHES_PER_BLOCK)));
    const at = (i & (HASHES_PER_BLOCK - 1)) * 32;
    for (let j = 0; j < 32; j++) b[at + j] = h.charCodeAt(j);
    this.length = i + 1;
  }

  get(i: number): string {
    const b = this.#blocks[i >> BLOCK_SHIFT]!;
    const at = (i & (HASHES_PER_BLOCK - 1)) * 32;
    return Buffer.from(b.buffer, b.byteOffset + at, 32).toString('latin1');
  }

  /** H(0x01 || h[length-2] || h[length-1]): the parent of the last two hashes (length is even). */
  parentOfLastPair(): string {
    const i = this.length - 2;
    const b = this.#blocks[i >> BLOCK_SHIFT]!;
    const from = (i & (HASHES_PER_BLOCK - 1)) * 32;
    scratch[0] = 1;
    for (let j = 0; j < 64; j++) scratch[1 + j] = b[from + j]!;
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

  /**
   * A log over levels hashed elsewhere (the verifier's hashing thread): `levels[h]` holds the
   * roots of the perfect subtrees of 2^h leaves, 32 bytes each, in order, in blocks of
   * `HASHES_PER_BLOCK`; level h must hold floor(size / 2^h) of them.
   */
  static fromLevels(levels: readonly { blocks: Uint8Array[]; length: number }[]): MerkleLog {
    const log = new MerkleLog();
    const size = levels[0]?.length ?? 0;
    for (let h = 0; h < levels.length || size >= 2 ** h; h++) {
      const l = levels[h];
      const want = Math.floor(size / 2 ** h);
      const fits =
        !l ||
        (l.blocks.length === Math.ceil(l.length / HASHES_PER_BLOCK) &&
          l.blocks.every((b) => b.length === 32 * HASHES_PER_BLOCK));
      if ((l?.length ?? 0) !== want || !fits) {
        throw new RangeError(`MerkleLog.fromLevels: level ${h} must hold ${want} hashes`);
      }
      if (want > 0 && l) log.#levels[h] = new HashArray([...l.blocks], l.length);
    }
    return log;
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
      (levels[h + 1] ??= new HashArray()).push(levels[h]!.parentOfLastPair());
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
