// The hashing half of verification, one chunk of records at a time, on whichever thread is free.
// A record's three SHA-256 digests need nothing from other chunks: its chain hash H(bytes) does
// not need the previous record's hash (the stored prev_hash is compared with it afterwards, in
// order, by `RecordScanner.pushChunk`), its RFC 9162 leaf hash is H(0x00 || bytes), and every
// perfect subtree whose leaves all lie in the chunk hashes from those leaves alone. Only the few
// subtrees that straddle two chunks (at most one per level) are left to the combining thread.
//
// The tree part of the output is kept by the tree as it is (no copy); the thread that hashes a chunk
// is the first to touch that memory, which is where fresh pages cost their page faults.
//
// `hashChunk` is also the hashing thread's code (`hash-worker.ts` evaluates its source text), so it
// must stay self-contained: no imports, no module constants, `hash` passed in.

/** `crypto.hash` with latin1 output: the cheapest result form (no Buffer per digest). */
export type HashLatin1 = (algorithm: 'sha256', data: Uint8Array, encoding: 'binary') => string;

/**
 * Bytes of `hashChunk`'s tree output for `n` leaves from index `first` (0-based). For each level
 * h = 0, 1, … with 2^h <= first + n: one spare byte; then, when the level's entry
 * floor(first / 2^h) begins before `first` and ends within the chunk, a 32-byte place for it (the
 * combining thread hashes it, `MerkleLog.extend`); then the roots of the perfect subtrees of 2^h
 * leaves lying wholly inside the chunk, indices ceil(first / 2^h) to floor((first + n) / 2^h) - 1
 * (level 0: the leaf hashes). About 64 bytes per record.
 */
export function treeOutputBytes(first: number, n: number): number {
  let bytes = 0;
  const end = first + n;
  for (let w = 1; w <= end; w *= 2) {
    const s = Math.floor(first / w);
    const straddles = s * w < first && (s + 1) * w <= end;
    bytes +=
      1 + (straddles ? 32 : 0) + 32 * Math.max(0, Math.floor(end / w) - Math.ceil(first / w));
  }
  return bytes;
}

/**
 * Hashes the `n` records at `data[ranges[2i], ranges[2i + 1])`: their chain hashes into
 * `chains[32i, 32i + 32)`, their leaf and inside-subtree hashes into `tree` (layout:
 * `treeOutputBytes`). The byte before each record is borrowed for the leaf hash's 0x00 prefix and
 * restored, so each record needs `ranges[2i] >= 1`; no other thread may read those bytes meanwhile.
 */
export function hashChunk(
  hash: HashLatin1,
  data: Uint8Array,
  ranges: Int32Array,
  n: number,
  first: number,
  chains: Uint8Array,
  tree: Uint8Array,
): void {
  const end = first + n;
  // Level 0: no leaf straddles, so the leaf hashes start after the spare byte.
  for (let i = 0; i < n; i++) {
    const s = ranges[2 * i]!;
    const e = ranges[2 * i + 1]!;
    const chain = hash('sha256', data.subarray(s, e), 'binary');
    const saved = data[s - 1]!;
    data[s - 1] = 0;
    const leaf = hash('sha256', data.subarray(s - 1, e), 'binary');
    data[s - 1] = saved;
    const c = 32 * i;
    const l = 1 + 32 * i;
    for (let j = 0; j < 32; j++) {
      chains[c + j] = chain.charCodeAt(j);
      tree[l + j] = leaf.charCodeAt(j);
    }
  }
  // Level h entry j is H(0x01 || entries 2j, 2j + 1 of level h - 1): two adjacent 32-byte runs,
  // whose preceding byte is borrowed for the 0x01 (and restored).
  let lo = first;
  let run = 1;
  let next = 1 + 32 * n;
  for (let w = 2; w <= end; w *= 2) {
    const s = Math.floor(first / w);
    const straddles = s * w < first && (s + 1) * w <= end;
    const up = Math.ceil(first / w);
    const count = Math.floor(end / w) - up;
    const at = next + 1 + (straddles ? 32 : 0);
    for (let j = 0; j < count; j++) {
      const p = run + 32 * (2 * (up + j) - lo);
      const saved = tree[p - 1]!;
      tree[p - 1] = 1;
      const node = hash('sha256', tree.subarray(p - 1, p + 64), 'binary');
      tree[p - 1] = saved;
      const o = at + 32 * j;
      for (let k = 0; k < 32; k++) tree[o + k] = node.charCodeAt(k);
    }
    lo = up;
    run = at;
    next = at + 32 * Math.max(0, count);
  }
}
