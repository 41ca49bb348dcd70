// RFC 9162 §2.1 Merkle Tree Hash over SHA-256: leaf = H(0x00 || entry), node = H(0x01 || l || r),
// the empty tree hashes to H(""). Roots are built incrementally with a compact range (one subtree
// root per set bit of the size), so hashing a log of n records costs n leaf hashes plus n - 1 node
// hashes and O(log n) memory. Proof generation recomputes subtrees from the leaf hashes (O(n)); it
// runs on the log side, not in the verifier's hot loop.
import { hash } from 'node:crypto';

export type Hash = Buffer;

const EMPTY_ROOT: Hash = hash('sha256', new Uint8Array(0), 'buffer');

/** The RFC 9162 hash of the empty tree: SHA-256 of the empty string. */
export function emptyRoot(): Hash {
  return Buffer.from(EMPTY_ROOT);
}

/** Leaf hash of one entry: H(0x00 || bytes). */
export function leafHash(bytes: Uint8Array): Hash {
  const buf = Buffer.allocUnsafe(bytes.length + 1);
  buf[0] = 0;
  buf.set(bytes, 1);
  return hash('sha256', buf, 'buffer');
}

const nodeScratch = Buffer.alloc(65, 1);

/** Interior node hash: H(0x01 || left || right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Hash {
  nodeScratch[0] = 1;
  nodeScratch.set(left, 1);
  nodeScratch.set(right, 33);
  return hash('sha256', nodeScratch, 'buffer');
}

// The builder keeps hashes as 32-character latin1 strings: a string result from crypto.hash costs
// far less than a fresh Buffer, which matters when verification hashes a million nodes.
function nodeHashLatin1(left: string, right: string): string {
  nodeScratch[0] = 1;
  nodeScratch.write(left, 1, 32, 'latin1');
  nodeScratch.write(right, 33, 32, 'latin1');
  return hash('sha256', nodeScratch, 'binary');
}

/**
 * A compact range [0, size): the roots of the perfect subtrees that make up the tree, largest
 * first. `push` merges equal-sized neighbours exactly like binary addition carries.
 */
export class TreeBuilder {
  #stack: string[] = [];
  #size = 0;

  get size(): number {
    return this.#size;
  }

  push(leaf: Uint8Array): void {
    this.pushLatin1(Buffer.from(leaf.buffer, leaf.byteOffset, leaf.byteLength).toString('latin1'));
  }

  /** Pushes a leaf hash given as a 32-character latin1 string. */
  pushLatin1(leaf: string): void {
    let h = leaf;
    let n = this.#size;
    // Each trailing 1-bit of the old size is a complete subtree of equal height: merge into it.
    while (n & 1) {
      h = nodeHashLatin1(this.#stack.pop()!, h);
      n = Math.floor(n / 2);
    }
    this.#stack.push(h);
    this.#size++;
  }

  /** RFC 9162 MTH of the leaves pushed so far (the subtree roots folded right to left). */
  root(): Hash {
    if (this.#stack.length === 0) return emptyRoot();
    let acc = this.#stack[this.#stack.length - 1]!;
    for (let i = this.#stack.length - 2; i >= 0; i--) acc = nodeHashLatin1(this.#stack[i]!, acc);
    return Buffer.from(acc, 'latin1');
  }
}

/** MTH over already-hashed leaves. */
export function rootOf(leaves: readonly Hash[]): Hash {
  const t = new TreeBuilder();
  for (const l of leaves) t.push(l);
  return t.root();
}

/** Largest power of two strictly smaller than n (n >= 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function subtreeRoot(leaves: readonly Hash[], start: number, end: number): Hash {
  const t = new TreeBuilder();
  for (let i = start; i < end; i++) t.push(leaves[i]!);
  return t.root();
}

/** RFC 9162 §2.1.3.1 PATH(m, D[n]): the inclusion proof of leaf `index` in the first `size` leaves. */
export function inclusionProof(leaves: readonly Hash[], index: number, size: number): Hash[] {
  if (!(index >= 0 && index < size && size <= leaves.length)) {
    throw new RangeError(`inclusionProof: index ${index} not in tree of size ${size}`);
  }
  const path = (m: number, start: number, n: number): Hash[] => {
    if (n === 1) return [];
    const k = splitPoint(n);
    return m < k
      ? [...path(m, start, k), subtreeRoot(leaves, start + k, start + n)]
      : [...path(m - k, start + k, n - k), subtreeRoot(leaves, start, start + k)];
  };
  return path(index, 0, size);
}

/** RFC 9162 §2.1.4.1 PROOF(m, D[n]): the consistency proof from size `m` to size `n`. */
export function consistencyProof(leaves: readonly Hash[], m: number, n: number): Hash[] {
  if (!(m >= 0 && m <= n && n <= leaves.length)) {
    throw new RangeError(`consistencyProof: bad sizes ${m} -> ${n}`);
  }
  if (m === 0 || m === n) return [];
  const sub = (mm: number, start: number, nn: number, whole: boolean): Hash[] => {
    if (mm === nn) return whole ? [] : [subtreeRoot(leaves, start, start + nn)];
    const k = splitPoint(nn);
    return mm <= k
      ? [...sub(mm, start, k, whole), subtreeRoot(leaves, start + k, start + nn)]
      : [...sub(mm - k, start + k, nn - k, false), subtreeRoot(leaves, start, start + k)];
  };
  return sub(m, 0, n, true);
}

const equal = (a: Uint8Array, b: Uint8Array): boolean => Buffer.compare(a, b) === 0;
const isHash = (h: Uint8Array): boolean => h.length === 32;

/** The root implied by an inclusion proof (RFC 9162 §2.1.3.2), or null when the proof is malformed. */
export function rootFromInclusionProof(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
): Hash | null {
  if (!(Number.isSafeInteger(index) && Number.isSafeInteger(size) && index >= 0 && index < size)) {
    return null;
  }
  if (!isHash(leaf) || !proof.every(isHash)) return null;
  let fn = index;
  let sn = size - 1;
  let r: Hash = Buffer.from(leaf);
  for (const p of proof) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : null;
}

export function verifyInclusion(
  index: number,
  size: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): boolean {
  const got = rootFromInclusionProof(index, size, leaf, proof);
  return got !== null && isHash(root) && equal(got, root);
}

/** RFC 9162 §2.1.4.2: does `proof` show the tree of size `size2` extends the tree of size `size1`? */
export function verifyConsistency(
  size1: number,
  size2: number,
  root1: Uint8Array,
  root2: Uint8Array,
  proof: readonly Uint8Array[],
): boolean {
  if (!(Number.isSafeInteger(size1) && Number.isSafeInteger(size2))) return false;
  if (size1 < 0 || size2 < size1) return false;
  if (!proof.every(isHash)) return false;
  if (size1 === size2) return proof.length === 0 && equal(root1, root2);
  // Every tree is consistent with the empty tree; the proof must then be empty.
  if (size1 === 0) return proof.length === 0;
  if (proof.length === 0 || !isHash(root1) || !isHash(root2)) return false;

  let path = [...proof];
  // If size1 is an exact power of two, the old root is itself a node of the new tree.
  if ((size1 & (size1 - 1)) === 0) path = [Buffer.from(root1), ...path];
  let fn = size1 - 1;
  let sn = size2 - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr: Hash = Buffer.from(path[0]!);
  let sr: Hash = Buffer.from(path[0]!);
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return equal(fr, root1) && equal(sr, root2) && sn === 0;
}
