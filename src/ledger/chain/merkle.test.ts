import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  TreeBuilder,
  consistencyProof,
  emptyRoot,
  inclusionProof,
  leafHash,
  rootOf,
  verifyConsistency,
  verifyInclusion,
} from './merkle.js';
import { hash } from 'node:crypto';
import { hashChunk, treeOutputBytes } from './chunk-hash.js';
import { MerkleLog } from './merkle-log.js';

interface Vectors {
  leaves_hex: string[];
  roots_by_size_hex: string[];
  empty_root_hex: string;
  inclusion: { leaf_index: number; size: number; proof: string[] }[];
  consistency: { size1: number; size2: number; proof: string[] }[];
}

const V = JSON.parse(
  readFileSync(new URL('./vectors/rfc9162-merkle.json', import.meta.url), 'utf8'),
) as Vectors;
const hex = (s: string): Buffer => Buffer.from(s, 'hex');
const leaves = V.leaves_hex.map((l) => leafHash(hex(l)));
const rootAt = (size: number): Buffer => hex(V.roots_by_size_hex[size - 1]!);

describe('RFC 9162 Merkle tree (transparency-dev reference vectors)', () => {
  it('hashes the empty tree to SHA-256("")', () => {
    expect(emptyRoot().toString('hex')).toBe(V.empty_root_hex);
    expect(new TreeBuilder().root().toString('hex')).toBe(V.empty_root_hex);
  });

  it('computes the published root for every size 1..8', () => {
    for (let size = 1; size <= 8; size++) {
      expect(rootOf(leaves.slice(0, size)).toString('hex'), `size ${size}`).toBe(
        V.roots_by_size_hex[size - 1],
      );
    }
  });

  it('generates and verifies the published inclusion proofs', () => {
    for (const v of V.inclusion) {
      const proof = v.proof.map(hex);
      expect(inclusionProof(leaves, v.leaf_index, v.size).map((h) => h.toString('hex'))).toEqual(
        v.proof,
      );
      expect(
        verifyInclusion(v.leaf_index, v.size, leaves[v.leaf_index]!, proof, rootAt(v.size)),
      ).toBe(true);
    }
  });

  it('rejects corrupted inclusion proofs (the reference probe set)', () => {
    for (const v of V.inclusion.filter((x) => x.proof.length > 0)) {
      const proof = v.proof.map(hex);
      const root = rootAt(v.size);
      const leaf = leaves[v.leaf_index]!;
      const probes: [number, number, Buffer, Buffer[], Buffer][] = [
        [v.leaf_index - 1, v.size, leaf, proof, root],
        [v.leaf_index + 1, v.size, leaf, proof, root],
        [v.leaf_index ^ 2, v.size, leaf, proof, root],
        [v.leaf_index, v.size * 2, leaf, proof, root],
        [v.leaf_index, Math.floor(v.size / 2), leaf, proof, root],
        [v.leaf_index, v.size, Buffer.from('WrongLeaf'), proof, root],
        [v.leaf_index, v.size, leaf, proof, emptyRoot()],
        [v.leaf_index, v.size, leaf, [...proof, Buffer.alloc(0)], root],
        [v.leaf_index, v.size, leaf, [...proof, root], root],
        [v.leaf_index, v.size, leaf, [root, ...proof], root],
        [v.leaf_index, v.size, leaf, proof.slice(0, -1), root],
      ];
      for (let i = 0; i < proof.length; i++) {
        const bad = proof.map((p) => Buffer.from(p));
        bad[i]![0]! ^= 8;
        probes.push([v.leaf_index, v.size, leaf, bad, root]);
      }
      for (const [i, n, l, p, r] of probes) expect(verifyInclusion(i, n, l, p, r)).toBe(false);
    }
  });

  it('generates and verifies the published consistency proofs', () => {
    for (const v of V.consistency) {
      expect(consistencyProof(leaves, v.size1, v.size2).map((h) => h.toString('hex'))).toEqual(
        v.proof,
      );
      expect(
        verifyConsistency(v.size1, v.size2, rootAt(v.size1), rootAt(v.size2), v.proof.map(hex)),
      ).toBe(true);
    }
  });

  it('rejects corrupted consistency proofs (the reference probe set)', () => {
    for (const v of V.consistency.filter((x) => x.proof.length > 0)) {
      const proof = v.proof.map(hex);
      const r1 = rootAt(v.size1);
      const r2 = rootAt(v.size2);
      const probes: [number, number, Buffer, Buffer, Buffer[]][] = [
        [v.size1 - 1, v.size2, r1, r2, proof],
        [v.size1 + 1, v.size2, r1, r2, proof],
        [v.size1 ^ 2, v.size2, r1, r2, proof],
        [v.size1, v.size2 * 2, r1, r2, proof],
        [v.size1, Math.floor(v.size2 / 2), r1, r2, proof],
        [v.size1, v.size2, Buffer.from('WrongRoot'), r2, proof],
        [v.size1, v.size2, r1, Buffer.from('WrongRoot'), proof],
        [v.size1, v.size2, r2, r1, proof],
        [v.size1, v.size2, r1, r2, []],
        [v.size1, v.size2, r1, r2, [...proof, Buffer.alloc(0)]],
        [v.size1, v.size2, r1, r2, [...proof, r1]],
        [v.size1, v.size2, r1, r2, [...proof, r2]],
        [v.size1, v.size2, r1, r2, [Buffer.alloc(0), ...proof]],
        [v.size1, v.size2, r1, r2, [r1, ...proof]],
        [v.size1, v.size2, r1, r2, [r2, ...proof]],
        [v.size1, v.size2, r1, r2, [proof[0]!, ...proof]],
        [v.size1, v.size2, r1, r2, proof.slice(0, -1)],
      ];
      for (let i = 0; i < proof.length; i++) {
        const bad = proof.map((p) => Buffer.from(p));
        bad[i]![0]! ^= 16;
        probes.push([v.size1, v.size2, r1, r2, bad]);
      }
      for (const [a, b, x, y, p] of probes) expect(verifyConsistency(a, b, x, y, p)).toBe(false);
    }
  });

  it('treats trivial consistency exactly as the reference does', () => {
    const e = emptyRoot();
    const r1 = Buffer.from("don't care 1");
    const r2 = Buffer.from("don't care 2");
    expect(verifyConsistency(0, 0, r1, r2, [])).toBe(false);
    expect(verifyConsistency(1, 1, r1, r2, [])).toBe(false);
    expect(verifyConsistency(0, 0, r1, r1, [])).toBe(true);
    expect(verifyConsistency(0, 1, r1, r2, [])).toBe(true);
    expect(verifyConsistency(1, 0, r1, r2, [])).toBe(false);
    expect(verifyConsistency(2, 1, r1, r2, [])).toBe(false);
    expect(verifyConsistency(1, 2, r1, r2, [])).toBe(false);
    expect(verifyConsistency(0, 1, e, e, [e])).toBe(false);
    expect(verifyConsistency(1, 1, e, e, [e])).toBe(false);
  });

  it('agrees with itself on every pair of sizes of a 40-leaf tree', () => {
    const many = Array.from({ length: 40 }, (_, i) => leafHash(Buffer.from(`entry ${i}`)));
    const roots = [emptyRoot(), ...many.map((_, i) => rootOf(many.slice(0, i + 1)))];
    for (let n = 1; n <= 40; n++) {
      for (let m = 0; m <= n; m++) {
        const p = consistencyProof(many, m, n);
        expect(verifyConsistency(m, n, roots[m]!, roots[n]!, p), `${m}->${n}`).toBe(true);
      }
      for (let i = 0; i < n; i++) {
        expect(verifyInclusion(i, n, many[i]!, inclusionProof(many, i, n), roots[n]!)).toBe(true);
      }
    }
  });

  it('MerkleLog: every past root and proof matches the reference vectors and the recursion', () => {
    const log = new MerkleLog();
    for (const l of leaves) log.push(l);
    for (let size = 1; size <= 8; size++)
      expect(log.root(size).toString('hex')).toBe(V.roots_by_size_hex[size - 1]);
    for (const v of V.inclusion) {
      expect(log.inclusionProof(v.leaf_index, v.size).map((h) => h.toString('hex'))).toEqual(
        v.proof,
      );
    }
    for (const v of V.consistency) {
      expect(log.consistencyProof(v.size1, v.size2).map((h) => h.toString('hex'))).toEqual(v.proof);
    }
    const many = Array.from({ length: 70 }, (_, i) => leafHash(Buffer.from(`entry ${i}`)));
    const big = new MerkleLog();
    for (let n = 1; n <= many.length; n++) {
      big.push(many[n - 1]!);
      expect(big.root().equals(rootOf(many.slice(0, n)))).toBe(true);
    }
    for (let n = 1; n <= 70; n += 3) {
      expect(big.root(n).equals(rootOf(many.slice(0, n))), `root ${n}`).toBe(true);
      for (let m = 0; m <= n; m += 2)
        expect(big.consistencyProof(m, n)).toEqual(consistencyProof(many, m, n));
      for (let i = 0; i < n; i += 5)
        expect(big.inclusionProof(i, n)).toEqual(inclusionProof(many, i, n));
    }
  });

  it('hashChunk + MerkleLog.extend: chunks of any size and offset give the same tree as push', () => {
    const entries = Array.from({ length: 300 }, (_, i) =>
      Buffer.from(`entry ${i} ${'x'.repeat(i % 7)}`),
    );
    const byPush = new MerkleLog();
    for (const e of entries) byPush.push(leafHash(e));
    // Chunk sizes 1..37 in a fixed cycle: every alignment of a chunk against the levels occurs.
    const byChunks = new MerkleLog();
    for (let first = 0, k = 0; first < entries.length; k++) {
      const n = Math.min(1 + ((k * 11) % 37), entries.length - first);
      const data = Buffer.concat(
        entries.slice(first, first + n).flatMap((e) => [Buffer.of(0x0a), e]),
      );
      const ranges = new Int32Array(2 * n);
      for (let i = 0, at = 0; i < n; i++) {
        ranges[2 * i] = at + 1;
        ranges[2 * i + 1] = at + 1 + entries[first + i]!.length;
        at += 1 + entries[first + i]!.length;
      }
      const before = Buffer.from(data);
      const chains = new Uint8Array(32 * n);
      const tree = new Uint8Array(treeOutputBytes(first, n));
      hashChunk(hash, data, ranges, n, first, chains, tree);
      expect(data.equals(before), 'borrowed bytes are restored').toBe(true);
      for (let i = 0; i < n; i++) {
        expect(Buffer.from(chains.subarray(32 * i, 32 * i + 32))).toEqual(
          hash('sha256', entries[first + i]!, 'buffer'),
        );
      }
      byChunks.extend(n, tree);
      expect(byChunks.size).toBe(first + n);
      expect(byChunks.root().equals(byPush.root(first + n)), `root after ${first + n}`).toBe(true);
      first += n;
    }
    for (let size = 1; size <= entries.length; size += 7) {
      expect(byChunks.root(size).equals(byPush.root(size))).toBe(true);
      expect(byChunks.inclusionProof(size - 1, size)).toEqual(
        byPush.inclusionProof(size - 1, size),
      );
      expect(byChunks.consistencyProof(size, 300)).toEqual(byPush.consistencyProof(size, 300));
    }
    // A log grown by chunks keeps growing by push.
    byChunks.push(leafHash(Buffer.from('one more')));
    byPush.push(leafHash(Buffer.from('one more')));
    expect(byChunks.root().equals(byPush.root())).toBe(true);
  });
});
