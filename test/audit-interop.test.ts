// Interop without trusting Candor's own verifier: checkpoints, Merkle proofs and sealed payloads
// from a real ledger are checked by a second implementation. HPKE: `hpke-js` from npm opens what
// Candor sealed (with the key file `audit keygen` would write) and seals what Candor opens. Signed
// notes (c2sp.org/signed-note, tlog-checkpoint, tlog-cosignature) and RFC 9162 trees and proofs: the
// checks below are written from the specs in this file, using only node:crypto primitives; nothing
// here imports Candor's note, checkpoint or Merkle verification code.
import { createHash, createPublicKey, verify as edVerify } from 'node:crypto';
import { AeadId, CipherSuite, KdfId, KemId } from 'hpke-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCheckpointer } from '../src/ledger/chain/checkpointer.js';
import { readStoreRecords } from '../src/ledger/chain/export.js';
import { MerkleLog } from '../src/ledger/chain/merkle-log.js';
import {
  generateKey,
  parseSignerKey,
  parseVerifierKey,
  SigType,
} from '../src/ledger/chain/note.js';
import {
  memoryWitnessState,
  startWitness,
  type RunningWitness,
} from '../src/ledger/chain/witness.js';
import { opened } from '../src/ledger/contract.case.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import {
  decodeSealPrivateKey,
  encodeSealPrivateKey,
  generateSealKeyPair,
  open as candorOpen,
  sealAad,
  sealPayload,
  SEAL_INFO,
} from '../src/ledger/seal.js';

// ---- written from the specs ------------------------------------------------------------------

const sha256 = (...parts: Uint8Array[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};
const node = (l: Uint8Array, r: Uint8Array): Buffer => sha256(Uint8Array.of(1), l, r);

/** RFC 9162 §2.1.1 MTH over leaf hashes. */
function mth(leaves: readonly Buffer[]): Buffer {
  if (leaves.length === 0) return sha256();
  if (leaves.length === 1) return leaves[0]!;
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return node(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

/** RFC 9162 §2.1.3.2 inclusion proof verification. */
function verifyInclusion(
  index: number,
  size: number,
  leaf: Buffer,
  proof: readonly Buffer[],
  root: Buffer,
): boolean {
  if (index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = node(p, r);
      if (fn % 2 === 0) while (fn % 2 === 0 && fn !== 0) [fn, sn] = [fn >>> 1, sn >>> 1];
    } else r = node(r, p);
    [fn, sn] = [fn >>> 1, sn >>> 1];
  }
  return sn === 0 && r.equals(root);
}

/** RFC 9162 §2.1.4.2 consistency proof verification (0 < first < second). */
function verifyConsistency(
  first: number,
  second: number,
  firstRoot: Buffer,
  secondRoot: Buffer,
  proof: readonly Buffer[],
): boolean {
  if (first === second) return proof.length === 0 && firstRoot.equals(secondRoot);
  if (proof.length === 0) return false;
  const path = (first & (first - 1)) === 0 ? [firstRoot, ...proof] : [...proof];
  let fn = first - 1;
  let sn = second - 1;
  while (fn % 2 === 1) [fn, sn] = [fn >>> 1, sn >>> 1];
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = node(c, fr);
      sr = node(c, sr);
      if (fn % 2 === 0) while (fn % 2 === 0 && fn !== 0) [fn, sn] = [fn >>> 1, sn >>> 1];
    } else sr = node(sr, c);
    [fn, sn] = [fn >>> 1, sn >>> 1];
  }
  return fr.equals(firstRoot) && sr.equals(secondRoot) && sn === 0;
}

interface SpecKey {
  name: string;
  id: Buffer;
  type: number;
  pub: Buffer;
}

/** c2sp.org/signed-note verifier key: `<name>+<hex id>+<base64(type || key)>`; the id is recomputed. */
function specKey(vkey: string): SpecKey {
  const [name, idHex] = vkey.split('+', 2) as [string, string];
  const raw = Buffer.from(vkey.slice(name.length + idHex.length + 2), 'base64');
  const type = raw[0]!;
  const pub = raw.subarray(1);
  const id = sha256(Buffer.from(`${name}\n`), Uint8Array.of(type), pub).subarray(0, 4);
  expect(id.toString('hex')).toBe(idHex);
  return { name, id, type, pub };
}

const edKey = (pub: Buffer) =>
  createPublicKey({
    key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), pub]),
    format: 'der',
    type: 'spki',
  });

/**
 * Opens a signed note per the spec: text, blank line, `— name base64(id || sig)` lines; unknown
 * keys ignored, known keys must verify. Type 0x01 signs the text; type 0x04 (tlog-cosignature)
 * signs "cosignature/v1\ntime <t>\n" || text with an 8-byte big-endian timestamp before the sig.
 */
function specOpen(
  note: string,
  keys: readonly SpecKey[],
): { text: string; verified: string[]; ignored: string[] } {
  const split = note.lastIndexOf('\n\n');
  const text = note.slice(0, split + 1);
  const verified: string[] = [];
  const ignored: string[] = [];
  for (const line of note.slice(split + 2, -1).split('\n')) {
    const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/u.exec(line);
    if (!m) throw new Error(`malformed signature line ${JSON.stringify(line)}`);
    const blob = Buffer.from(m[2]!, 'base64');
    const k = keys.find((x) => x.name === m[1] && x.id.equals(blob.subarray(0, 4)));
    if (!k) {
      ignored.push(m[1]!);
      continue;
    }
    const sig = blob.subarray(4);
    const ok =
      k.type === 0x01
        ? edVerify(null, Buffer.from(text), edKey(k.pub), sig)
        : edVerify(
            null,
            Buffer.from(`cosignature/v1\ntime ${sig.readBigUInt64BE(0)}\n${text}`),
            edKey(k.pub),
            sig.subarray(8),
          );
    if (!ok) throw new Error(`bad signature from ${k.name}`);
    verified.push(k.name);
  }
  return { text, verified, ignored };
}

// ---- the ledger under test --------------------------------------------------------------------

const ORIGIN = 'candor.test/interop-log';
const LOG = generateKey(ORIGIN);
const WIT = generateKey('witness.test/interop', SigType.cosignature_v1);
let witness: RunningWitness;
let records: Buffer[] = [];
let notes: { seq: number; note: string }[] = [];

beforeAll(async () => {
  const ws = parseSignerKey(WIT.signerKey);
  const lv = parseVerifierKey(LOG.verifierKey);
  const wv = parseVerifierKey(WIT.verifierKey);
  const ls = parseSignerKey(LOG.signerKey);
  if (!ws.ok || !lv.ok || !wv.ok || !ls.ok) throw new Error('bad test keys');
  witness = await startWitness({ signer: ws.value, logs: [lv.value], state: memoryWitnessState() });
  const ledger = openMemoryLedger();
  const cp = createCheckpointer({
    ledger,
    signer: ls.value,
    origin: ORIGIN,
    witness: { url: witness.url, key: wv.value },
  });
  for (let round = 1; round <= 7; round++) {
    await ledger.append(Array.from({ length: round * 3 }, (_, i) => opened(`op_${round}_${i}`)));
    await cp.checkpoint();
  }
  records = (await readStoreRecords(ledger)).records;
  notes = (await ledger.read())
    .filter((e) => e.kind === 'checkpoint')
    .map((e) => ({ seq: e.seq, note: (e.data as { note: string }).note }));
});
afterAll(() => witness.close());

describe('interop: a second implementation checks what Candor wrote', () => {
  it('every checkpoint opens under the spec (log signature + witness cosignature) and its root is the RFC 9162 root', () => {
    const keys = [specKey(LOG.verifierKey), specKey(WIT.verifierKey)];
    const leaves = records.map((r) => sha256(Uint8Array.of(0), r));
    expect(notes).toHaveLength(7);
    for (const { seq, note } of notes) {
      const o = specOpen(note, keys);
      expect(o.verified).toEqual([ORIGIN, 'witness.test/interop']);
      const [origin, size, root, ...rest] = o.text.slice(0, -1).split('\n');
      expect([origin, rest]).toEqual([ORIGIN, []]);
      expect(Number(size)).toBe(seq - 1);
      expect(Buffer.from(root!, 'base64').equals(mth(leaves.slice(0, seq - 1)))).toBe(true);
    }
    // Teeth: one changed record byte changes the root the spec computes.
    const bent = Buffer.from(records[3]!);
    bent[10]! ^= 1;
    const bentLeaves = leaves.map((l, i) => (i === 3 ? sha256(Uint8Array.of(0), bent) : l));
    const last = notes.at(-1)!;
    const lastRoot = Buffer.from(specOpen(last.note, keys).text.split('\n')[2]!, 'base64');
    expect(mth(bentLeaves.slice(0, last.seq - 1)).equals(lastRoot)).toBe(false);
    // An unknown signer is ignored by the spec verifier as well.
    expect(specOpen(notes[0]!.note, [keys[0]!])).toMatchObject({
      ignored: ['witness.test/interop'],
    });
  });

  it("Candor's inclusion and consistency proofs verify under RFC 9162 §2.1.3.2 / §2.1.4.2", () => {
    const leaves = records.map((r) => sha256(Uint8Array.of(0), r));
    const log = new MerkleLog();
    for (const l of leaves) log.push(l);
    const sizes = [
      1,
      2,
      3,
      4,
      5,
      7,
      8,
      9,
      16,
      17,
      31,
      32,
      33,
      ...notes.map((n) => n.seq - 1),
      leaves.length,
    ];
    let checked = 0;
    for (const size of sizes) {
      const root = mth(leaves.slice(0, size));
      for (let i = 0; i < size; i += Math.max(1, Math.floor(size / 9))) {
        expect(
          verifyInclusion(i, size, leaves[i]!, log.inclusionProof(i, size), root),
          `incl ${i}/${size}`,
        ).toBe(true);
        checked++;
      }
      for (const first of sizes.filter((s) => s > 0 && s < size)) {
        const proof = log.consistencyProof(first, size);
        expect(
          verifyConsistency(first, size, mth(leaves.slice(0, first)), root, proof),
          `cons ${first}->${size}`,
        ).toBe(true);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(300);
    // Teeth: a flipped proof hash fails both checks.
    const p = log.inclusionProof(5, 40);
    p[1] = Buffer.from(p[1]!).fill(7);
    expect(verifyInclusion(5, 40, leaves[5]!, p, mth(leaves.slice(0, 40)))).toBe(false);
    const c = log.consistencyProof(13, 40);
    c[0] = Buffer.from(c[0]!).fill(7);
    expect(verifyConsistency(13, 40, mth(leaves.slice(0, 13)), mth(leaves.slice(0, 40)), c)).toBe(
      false,
    );
  });
});

describe('interop: HPKE with hpke-js (RFC 9180, X25519 / HKDF-SHA256 / ChaCha20-Poly1305)', () => {
  const suite = new CipherSuite({
    kem: KemId.DhkemX25519HkdfSha256,
    kdf: KdfId.HkdfSha256,
    aead: AeadId.Chacha20Poly1305,
  });

  it('hpke-js opens payloads Candor sealed, with the private key as Candor stores it (clamped)', async () => {
    const auditor = generateSealKeyPair();
    const stored = encodeSealPrivateKey(auditor.privateKey);
    const sk = decodeSealPrivateKey(stored);
    if (!sk.ok) throw new Error(sk.failure);
    const recipientKey = await suite.kem.deserializePrivateKey(sk.value);
    for (let seq = 1; seq <= 12; seq++) {
      const text = `diagnostics of record ${seq}: ${'x'.repeat(seq * 7)}`;
      const p = sealPayload(auditor.publicKey, text, seq);
      const pt = await suite.open(
        { recipientKey, enc: Buffer.from(p.enc, 'base64'), info: SEAL_INFO },
        Buffer.from(p.ct, 'base64'),
        sealAad(seq),
      );
      expect(Buffer.from(pt).toString('utf8')).toBe(text);
      // Bound to its record: the other library refuses it under another seq's AAD too.
      await expect(
        suite.open(
          { recipientKey, enc: Buffer.from(p.enc, 'base64'), info: SEAL_INFO },
          Buffer.from(p.ct, 'base64'),
          sealAad(seq + 1),
        ),
      ).rejects.toThrow();
    }
  });

  it('Candor opens what hpke-js sealed to its public key', async () => {
    const auditor = generateSealKeyPair();
    const recipientPublicKey = await suite.kem.deserializePublicKey(auditor.publicKey);
    for (let seq = 1; seq <= 6; seq++) {
      const { enc, ct } = await suite.seal(
        { recipientPublicKey, info: SEAL_INFO },
        Buffer.from(`from hpke-js ${seq}`),
        sealAad(seq),
      );
      const opened = candorOpen(
        auditor.privateKey,
        Buffer.from(enc),
        Buffer.from(ct),
        sealAad(seq),
      );
      expect(opened).toEqual({ ok: true, value: Buffer.from(`from hpke-js ${seq}`) });
    }
  });
});
