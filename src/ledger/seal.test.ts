import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  clampX25519,
  decodeSealPrivateKey,
  decodeSealPublicKey,
  deriveSealKeyPair,
  encodeSealPrivateKey,
  encodeSealPublicKey,
  generateSealKeyPair,
  open,
  openPayload,
  seal,
  sealAad,
  sealPayload,
  setupBaseRecipient,
  setupBaseSender,
} from './seal.js';

interface Vectors {
  info: string;
  ikmE: string;
  pkEm: string;
  skEm: string;
  ikmR: string;
  pkRm: string;
  skRm: string;
  enc: string;
  shared_secret: string;
  key: string;
  base_nonce: string;
  exporter_secret: string;
  encryptions: { seq: number; pt: string; aad: string; nonce: string; ct: string }[];
  exports: { context: string; length: number; value: string }[];
}
const V = JSON.parse(
  readFileSync(new URL('./chain/vectors/rfc9180-a2-base.json', import.meta.url), 'utf8'),
) as Vectors;
const h = (s: string): Buffer => Buffer.from(s, 'hex');

describe('HPKE RFC 9180 A.2.1: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20Poly1305, base', () => {
  it('derives the published key pairs from ikmE and ikmR', () => {
    const e = deriveSealKeyPair(h(V.ikmE));
    const r = deriveSealKeyPair(h(V.ikmR));
    expect(e.privateKey.toString('hex')).toBe(V.skEm);
    expect(e.publicKey.toString('hex')).toBe(V.pkEm);
    expect(r.privateKey.toString('hex')).toBe(V.skRm);
    expect(r.publicKey.toString('hex')).toBe(V.pkRm);
  });

  it('reproduces enc, shared secret and key schedule with the injected ephemeral key', () => {
    const { enc, ctx } = setupBaseSender(h(V.pkRm), h(V.info), h(V.ikmE));
    expect(enc.toString('hex')).toBe(V.enc);
    expect(ctx.secrets.shared_secret.toString('hex')).toBe(V.shared_secret);
    expect(ctx.secrets.key.toString('hex')).toBe(V.key);
    expect(ctx.secrets.base_nonce.toString('hex')).toBe(V.base_nonce);
    expect(ctx.secrets.exporter_secret.toString('hex')).toBe(V.exporter_secret);
  });

  it('seals every published encryption at its sequence number, and the recipient opens them', () => {
    const { ctx } = setupBaseSender(h(V.pkRm), h(V.info), h(V.ikmE));
    const rctx = setupBaseRecipient(h(V.enc), h(V.skRm), h(V.info));
    if (!rctx.ok) throw new Error(rctx.failure);
    const want = new Map(V.encryptions.map((e) => [e.seq, e]));
    for (let seq = 0; seq <= 256; seq++) {
      const e = want.get(seq);
      const pt = e ? h(e.pt) : Buffer.from('filler');
      const aad = e ? h(e.aad) : Buffer.alloc(0);
      const ct = ctx.seal(aad, pt);
      if (e) expect(ct.toString('hex'), `seq ${seq}`).toBe(e.ct);
      const back = rctx.value.open(aad, ct);
      expect(back.ok && back.value.equals(pt)).toBe(true);
    }
  });

  it('exports the published secrets', () => {
    const { ctx } = setupBaseSender(h(V.pkRm), h(V.info), h(V.ikmE));
    for (const x of V.exports)
      expect(ctx.export(h(x.context), x.length).toString('hex')).toBe(x.value);
  });

  it('single-shot seal with an injected ephemeral key equals the first published ciphertext', () => {
    const e = V.encryptions[0]!;
    const s = seal(h(V.pkRm), h(e.pt), h(e.aad), { info: h(V.info), ikmE: h(V.ikmE) });
    expect(s.enc.toString('hex')).toBe(V.enc);
    expect(s.ciphertext.toString('hex')).toBe(e.ct);
    const o = open(h(V.skRm), s.enc, s.ciphertext, h(e.aad), { info: h(V.info) });
    expect(o.ok && o.value.toString('hex')).toBe(e.pt);
  });
});

describe('write-blind payload sealing', () => {
  const auditor = generateSealKeyPair();

  it('opens only with the auditor key and only in the record it is bound to', () => {
    const p = sealPayload(auditor.publicKey, '{"status":502,"body":"secret"}', 12);
    expect(p.bind).toBe('seq=12');
    expect(sealAad(12).toString()).toBe('candor-seal-v1|seq=12');
    const ok = openPayload(auditor.privateKey, p, 12);
    expect(ok.ok && ok.value.toString()).toBe('{"status":502,"body":"secret"}');
    expect(openPayload(auditor.privateKey, p, 13)).toMatchObject({ ok: false });
    // Rebinding the label without the key does not help: the AAD authenticates the seq.
    expect(openPayload(auditor.privateKey, { ...p, bind: 'seq=13' }, 13)).toMatchObject({
      ok: false,
    });
    expect(openPayload(generateSealKeyPair().privateKey, p, 12)).toMatchObject({ ok: false });
  });

  it('uses a fresh ephemeral key per payload and detects ciphertext changes', () => {
    const a = sealPayload(auditor.publicKey, 'same', 1);
    const b = sealPayload(auditor.publicKey, 'same', 1);
    expect(a.enc).not.toBe(b.enc);
    const ct = Buffer.from(a.ct, 'base64');
    ct[0]! ^= 1;
    expect(openPayload(auditor.privateKey, { ...a, ct: ct.toString('base64') }, 1)).toMatchObject({
      ok: false,
    });
  });

  it('encodes keys as prefixed base64url and rejects mangled ones', () => {
    const pk = encodeSealPublicKey(auditor.publicKey);
    const sk = encodeSealPrivateKey(auditor.privateKey);
    expect(decodeSealPublicKey(pk)).toEqual({ ok: true, value: auditor.publicKey });
    expect(decodeSealPrivateKey(`${sk}\n`)).toEqual({
      ok: true,
      value: clampX25519(auditor.privateKey),
    });
    expect(decodeSealPrivateKey(pk).ok).toBe(false);
    expect(decodeSealPublicKey(pk.slice(0, -2)).ok).toBe(false);
  });

  it('stores X25519 private keys clamped (RFC 9180 §7.1.2); the clamped key opens the same payloads', () => {
    // A derived key is not clamped (the RFC's own vectors are not): find one that is not.
    let kp = deriveSealKeyPair(Buffer.alloc(32, 1));
    for (let i = 2; (kp.privateKey[0]! & 7) === 0 && (kp.privateKey[31]! & 0xc0) === 0x40; i++)
      kp = deriveSealKeyPair(Buffer.alloc(32, i));
    const stored = Buffer.from(
      encodeSealPrivateKey(kp.privateKey).slice('candor-seal-sk-v1:'.length),
      'base64url',
    );
    expect(stored.equals(kp.privateKey)).toBe(false);
    expect(stored[0]! & 7).toBe(0);
    expect(stored[31]! & 0xc0).toBe(0x40);
    expect(stored.subarray(1, 31).equals(kp.privateKey.subarray(1, 31))).toBe(true);
    // A key stored unclamped by an older version is clamped on reading.
    const legacy = `candor-seal-sk-v1:${kp.privateKey.toString('base64url')}`;
    expect(decodeSealPrivateKey(legacy)).toEqual({ ok: true, value: stored });
    const p = sealPayload(kp.publicKey, 'clamped', 3);
    expect(openPayload(stored, p, 3)).toEqual({ ok: true, value: Buffer.from('clamped') });
  });

  it('rejects a low-order (all-zero) encapsulated key', () => {
    expect(setupBaseRecipient(Buffer.alloc(32), auditor.privateKey, Buffer.alloc(0))).toMatchObject(
      { ok: false },
    );
  });
});
