import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  SigType,
  generateKey,
  openNote,
  parseNote,
  parseSignerKey,
  parseVerifierKey,
  signNote,
  verifierKeyOf,
} from './note.js';

interface Vectors {
  peter: { verifier_key: string; signer_key: string; key_id_hex: string };
  enoch: { verifier_key: string };
  text: string;
  peter_sig_line: string;
  enoch_sig_line: string;
  c2sp_example: string;
}
const V = JSON.parse(
  readFileSync(new URL('./vectors/signed-note.json', import.meta.url), 'utf8'),
) as Vectors;

const ok = <T>(r: { ok: boolean; value?: T; failure?: string }): T => {
  if (!r.ok) throw new Error(r.failure);
  return r.value!;
};

describe('C2SP signed note (golang.org/x/mod/sumdb/note example keys)', () => {
  it('parses the PeterNeumann verifier and signer keys and agrees on the key id', () => {
    const v = ok(parseVerifierKey(V.peter.verifier_key));
    const s = ok(parseSignerKey(V.peter.signer_key));
    expect(v.name).toBe('PeterNeumann');
    expect(v.keyId.toString(16)).toBe(V.peter.key_id_hex);
    expect(s.keyId).toBe(v.keyId);
    expect(verifierKeyOf(s)).toBe(V.peter.verifier_key);
  });

  it('signs the example text to exactly the published note', () => {
    const s = ok(parseSignerKey(V.peter.signer_key));
    expect(ok(signNote(V.text, [s]))).toBe(`${V.text}\n${V.peter_sig_line}`);
  });

  it('opens the published two-signature note: one verified, one unknown', () => {
    const msg = `${V.text}\n${V.peter_sig_line}${V.enoch_sig_line}`;
    const peter = ok(parseVerifierKey(V.peter.verifier_key));
    const enoch = ok(parseVerifierKey(V.enoch.verifier_key));
    const one = ok(openNote(msg, [peter]));
    expect(one.text).toBe(V.text);
    expect(one.verified.map((s) => s.name)).toEqual(['PeterNeumann']);
    expect(one.unknown.map((s) => s.name)).toEqual(['EnochRoot']);
    const both = ok(openNote(msg, [peter, enoch]));
    expect(both.verified.map((s) => s.name)).toEqual(['PeterNeumann', 'EnochRoot']);
    expect(openNote(msg, [])).toEqual({ ok: false, failure: 'note has no verifiable signatures' });
  });

  it('rejects every substring and every single-byte change of the verifier key', () => {
    const k = V.peter.verifier_key;
    for (let i = 0; i <= k.length; i++) {
      for (let j = i + 1; j <= k.length; j++) {
        if (i === 0 && j === k.length) continue;
        expect(parseVerifierKey(k.slice(i, j)).ok, k.slice(i, j)).toBe(false);
      }
    }
    for (let i = 0; i < k.length; i++) {
      const mangled = k.slice(0, i) + String.fromCharCode(k.charCodeAt(i) + 1) + k.slice(i + 1);
      expect(parseVerifierKey(mangled).ok, mangled).toBe(false);
    }
  });

  it('rejects a tampered signature, malformed notes and a signature under a wrong name', () => {
    const peter = ok(parseVerifierKey(V.peter.verifier_key));
    const sig = V.peter_sig_line;
    const bad = `${V.text}\n${sig.slice(0, 60)}ABCD${sig.slice(60)}`;
    expect(openNote(bad, [peter]).failure).toBe('invalid signature for key PeterNeumann+c74f20a3');
    for (const m of [
      V.text,
      `${V.text}\n`,
      `${V.text}\n${sig.slice(0, -1)}`,
      `\u0001${V.text}\n${sig}`,
      `${V.text}\n${sig}Unexpected line.\n`,
      `${V.text}\n\u2014 Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`,
    ]) {
      expect(openNote(m, [peter]).ok, JSON.stringify(m)).toBe(false);
    }
    const renamed = `${V.text}\n${sig.replace('PeterNeumann', 'CarmenSandiego')}`;
    expect(openNote(renamed, [peter]).ok).toBe(false);
  });

  it('parses the C2SP spec example note', () => {
    const n = ok(parseNote(V.c2sp_example));
    expect(n.text.split('\n')[0]).toBe('Ognuno sta solo sul cuor della terra');
    expect(n.sigs.map((s) => s.name)).toEqual(['quasimodo.example/salvatore']);
  });

  it('round-trips a timestamped cosignature (type 0x04) bound to its time', () => {
    const seed = Buffer.alloc(32, 7);
    const keys = generateKey('witness.example/w1', SigType.cosignature_v1, seed);
    const signer = ok(parseSignerKey(keys.signerKey, () => 1_700_000_000_123));
    const verifier = ok(parseVerifierKey(keys.verifierKey));
    expect(verifier.type).toBe(SigType.cosignature_v1);
    const text = 'example.com/log\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n';
    const note = ok(signNote(text, [signer]));
    const opened = ok(openNote(note, [verifier]));
    expect(opened.verified[0]!.sig.readBigUInt64BE(0)).toBe(1_700_000_000n);
    // Changing the timestamp bytes breaks the signature: the time is part of the statement.
    const raw = Buffer.from(note.split(' ').at(-1)!.trim(), 'base64');
    raw[11]! ^= 1;
    const forged = note.replace(/ \S+\n$/, ` ${raw.toString('base64')}\n`);
    expect(openNote(forged, [verifier]).ok).toBe(false);
  });

  it("key names follow the spec's Unicode space rule exactly as Go does (U+0085 no, U+FEFF yes)", () => {
    // Unicode White_Space = Go's unicode.IsSpace; JavaScript's \s differs on exactly these two.
    for (const space of ['\u0085', '\u00a0', '\u1680', '\u2000', '\u2028', '\u3000', '\t', ' '])
      expect(() => generateKey(`log${space}name`), JSON.stringify(space)).toThrow(
        /invalid key name/,
      );
    for (const fine of ['\ufeff', '\u200b', '\u180e', '\ufffd', '\u00e9']) {
      const k = generateKey(`log${fine}name`, SigType.ed25519, Buffer.alloc(32, 3));
      const v = ok(parseVerifierKey(k.verifierKey));
      expect(v.name).toBe(`log${fine}name`);
      const signed = ok(signNote('text\n', [ok(parseSignerKey(k.signerKey))]));
      expect(ok(openNote(signed, [v])).verified).toHaveLength(1);
    }
    expect(() => generateKey('a+b')).toThrow();
    expect(() => generateKey('')).toThrow();
  });

  it('accepts any valid UTF-8 text without control characters, U+FFFD included', () => {
    const s = ok(parseSignerKey(V.peter.signer_key));
    const v = ok(parseVerifierKey(V.peter.verifier_key));
    const text = 'replacement \ufffd, delete \u007f, C1 \u0085, emoji \u{1f600}\n';
    expect(ok(openNote(ok(signNote(text, [s])), [v])).text).toBe(text);
    for (const bad of ['tab\there\n', 'nul\u0000\n', 'lone \ud800 surrogate\n'])
      expect(signNote(bad, [s]).ok, JSON.stringify(bad)).toBe(false);
  });

  it('ignores a signature from an unknown key and dedupes the same key given twice', () => {
    const msg = `${V.text}\n${V.peter_sig_line}${V.enoch_sig_line}`;
    const peter = ok(parseVerifierKey(V.peter.verifier_key));
    const again = ok(parseVerifierKey(V.peter.verifier_key));
    expect(ok(openNote(msg, [peter, again])).unknown.map((x) => x.name)).toEqual(['EnochRoot']);
    // Two different keys under one name and key ID are ambiguous (forged here by swapping bytes).
    const impostor = { ...peter, publicKey: Buffer.alloc(32, 9) };
    expect(openNote(msg, [peter, impostor]).failure).toMatch(
      /^ambiguous key PeterNeumann\+c74f20a3/,
    );
  });
});
