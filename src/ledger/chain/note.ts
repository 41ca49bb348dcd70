// C2SP signed-note (c2sp.org/signed-note) with Ed25519 (type 0x01) and the timestamped Ed25519
// witness cosignature (type 0x04, c2sp.org/tlog-cosignature). A note is text ending in "\n", a blank
// line, then lines `— <name> <base64(keyID(4) || signature)>`. Key IDs are the first four bytes of
// SHA-256(name || "\n" || type || public key). Verifier keys read `<name>+<hex keyID>+<base64(type ||
// public key)>`; signer keys `PRIVATE+KEY+<name>+<hex keyID>+<base64(type || seed)>`.
// Only node:crypto is used. Expected failures are returned, never thrown.
import { escapeUnsafe } from '../../core/quote.js';
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  randomBytes,
  sign as edSign,
  verify as edVerify,
  type KeyObject,
} from 'node:crypto';

export const SigType = { ed25519: 0x01, cosignature_v1: 0x04 } as const;
export type SigType = (typeof SigType)[keyof typeof SigType];

export type Result<T> =
  { ok: true; value: T; failure?: never } | { ok: false; failure: string; value?: never };
const fail = (failure: string): { ok: false; failure: string } => ({ ok: false, failure });

export interface NoteVerifier {
  name: string;
  keyId: number;
  type: SigType;
  publicKey: Buffer;
  /** Checks the signature bytes (after the 4-byte key ID) over the note text. */
  verify(text: string, sig: Uint8Array): boolean;
}

export interface NoteSigner {
  name: string;
  keyId: number;
  type: SigType;
  publicKey: Buffer;
  /** Signature bytes (without the key ID) over the note text. */
  sign(text: string): Buffer;
}

export interface NoteSignature {
  name: string;
  keyId: number;
  /** The signature bytes after the key ID. */
  sig: Buffer;
}

export interface Note {
  text: string;
  sigs: NoteSignature[];
}

const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');
const EM_DASH = '\u2014';
const MAX_SIGNATURES = 100;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Standard base64 that must round-trip exactly (rejects stray characters and non-zero pad bits). */
export function strictBase64(s: string): Buffer | null {
  if (s.length % 4 !== 0 || !BASE64.test(s)) return null;
  const b = Buffer.from(s, 'base64');
  return b.toString('base64') === s ? b : null;
}

/**
 * Key names (C2SP signed-note): non-empty, well-formed Unicode, no Unicode space and no '+'.
 * "Unicode space" is the White_Space property, exactly as Go's `unicode.IsSpace`: U+0085 is a
 * space, U+FEFF is not (JavaScript's `\s` gets both wrong).
 */
export function isValidKeyName(name: string): boolean {
  return name.length > 0 && !/[\p{White_Space}+]/u.test(name) && isWellFormed(name);
}

/** ASCII control characters other than newline (a signed note must not contain them). */
function hasControl(s: string): boolean {
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u0009\u000b-\u001f]/.test(s);
}

/** No lone surrogate: the string is valid UTF-8 once encoded. U+FFFD itself is valid text. */
function isWellFormed(s: string): boolean {
  return !/[\uD800-\uDFFF]/u.test(s);
}

export function keyId(name: string, type: SigType, publicKey: Uint8Array): number {
  const h = createHash('sha256')
    .update(`${name}\n`, 'utf8')
    .update(Uint8Array.of(type))
    .update(publicKey)
    .digest();
  return h.readUInt32BE(0);
}

/** Splits at the first `cuts` '+' characters; null when there are fewer. */
function cutPlus(s: string, cuts: number): string[] | null {
  const out: string[] = [];
  let rest = s;
  for (let i = 0; i < cuts; i++) {
    const at = rest.indexOf('+');
    if (at < 0) return null;
    out.push(rest.slice(0, at));
    rest = rest.slice(at + 1);
  }
  out.push(rest);
  return out;
}

const hex8 = (n: number): string => n.toString(16).padStart(8, '0');

function ed25519Private(seed: Uint8Array): KeyObject {
  return createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519, seed]),
    format: 'der',
    type: 'pkcs8',
  });
}

function ed25519Public(pub: Uint8Array): KeyObject | null {
  try {
    return createPublicKey({
      key: Buffer.concat([SPKI_ED25519, pub]),
      format: 'der',
      type: 'spki',
    });
  } catch {
    return null;
  }
}

function publicOf(priv: KeyObject): Buffer {
  return createPublicKey(priv)
    .export({ format: 'der', type: 'spki' })
    .subarray(SPKI_ED25519.length);
}

/** The message a v1 cosignature signs: header, time line, then the whole note text. */
export function cosignedMessage(text: string, timestamp: bigint): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${timestamp.toString()}\n${text}`, 'utf8');
}

function makeVerifier(name: string, type: SigType, pub: Buffer): NoteVerifier | null {
  const key = ed25519Public(pub);
  if (!key) return null;
  const id = keyId(name, type, pub);
  const verify =
    type === SigType.ed25519
      ? (text: string, sig: Uint8Array): boolean =>
          sig.length === 64 && edVerify(null, Buffer.from(text, 'utf8'), key, sig)
      : (text: string, sig: Uint8Array): boolean => {
          if (sig.length !== 72) return false;
          const ts = Buffer.from(sig.subarray(0, 8)).readBigUInt64BE(0);
          if (ts > 0x7fffffffffffffffn) return false;
          return edVerify(null, cosignedMessage(text, ts), key, sig.subarray(8));
        };
  return { name, keyId: id, type, publicKey: pub, verify };
}

/** Parses a verifier key string; the embedded key ID must match the name and key. */
export function parseVerifierKey(vkey: string): Result<NoteVerifier> {
  // The base64 key may itself contain '+': only the first two separators split fields.
  const parts = cutPlus(vkey, 2);
  if (!parts) return fail('verifier key must be <name>+<hex key id>+<base64 key>');
  const [name, idHex, b64] = parts as [string, string, string];
  if (!isValidKeyName(name)) return fail('verifier key has an invalid name');
  if (!/^[0-9a-f]{8}$/.test(idHex)) return fail('verifier key id must be 8 lowercase hex digits');
  const raw = strictBase64(b64);
  if (!raw || raw.length !== 33)
    return fail('verifier key material must be 1 type byte + 32 bytes');
  const type = raw[0];
  if (type !== SigType.ed25519 && type !== SigType.cosignature_v1) {
    return fail(`unsupported signature type 0x${(type ?? 0).toString(16)}`);
  }
  const pub = Buffer.from(raw.subarray(1));
  const v = makeVerifier(name, type, pub);
  if (!v) return fail('verifier key is not a valid Ed25519 public key');
  if (hex8(v.keyId) !== idHex) return fail('verifier key id does not match its name and key');
  return { ok: true, value: v };
}

function makeSigner(name: string, type: SigType, seed: Uint8Array, now: () => number): NoteSigner {
  const priv = ed25519Private(seed);
  const pub = publicOf(priv);
  const sign =
    type === SigType.ed25519
      ? (text: string): Buffer => edSign(null, Buffer.from(text, 'utf8'), priv)
      : (text: string): Buffer => {
          const ts = BigInt(Math.floor(now() / 1000));
          const head = Buffer.alloc(8);
          head.writeBigUInt64BE(ts);
          return Buffer.concat([head, edSign(null, cosignedMessage(text, ts), priv)]);
        };
  return { name, keyId: keyId(name, type, pub), type, publicKey: pub, sign };
}

/**
 * Parses a signer key string. `now` (milliseconds) stamps cosignatures; it is injected so tests
 * produce fixed bytes.
 */
export function parseSignerKey(skey: string, now: () => number = Date.now): Result<NoteSigner> {
  const parts = cutPlus(skey, 4);
  if (!parts || parts[0] !== 'PRIVATE' || parts[1] !== 'KEY') {
    return fail('signer key must be PRIVATE+KEY+<name>+<hex key id>+<base64 key>');
  }
  const [, , name, idHex, b64] = parts as [string, string, string, string, string];
  if (!isValidKeyName(name)) return fail('signer key has an invalid name');
  if (!/^[0-9a-f]{8}$/.test(idHex)) return fail('signer key id must be 8 lowercase hex digits');
  const raw = strictBase64(b64);
  if (!raw || raw.length !== 33) return fail('signer key material must be 1 type byte + 32 bytes');
  const type = raw[0];
  if (type !== SigType.ed25519 && type !== SigType.cosignature_v1) {
    return fail(`unsupported signature type 0x${(type ?? 0).toString(16)}`);
  }
  const s = makeSigner(name, type, raw.subarray(1), now);
  if (hex8(s.keyId) !== idHex) return fail('signer key id does not match its name and key');
  return { ok: true, value: s };
}

/** The verifier key string for a signer. */
export function verifierKeyOf(
  s: Pick<NoteSigner, 'name' | 'keyId' | 'type' | 'publicKey'>,
): string {
  const material = Buffer.concat([Uint8Array.of(s.type), s.publicKey]).toString('base64');
  return `${s.name}+${hex8(s.keyId)}+${material}`;
}

/** A fresh key pair as (signer key, verifier key) strings. `seed` is injectable for tests. */
export function generateKey(
  name: string,
  type: SigType = SigType.ed25519,
  seed: Uint8Array = randomBytes(32),
): { signerKey: string; verifierKey: string } {
  if (!isValidKeyName(name)) throw new TypeError(`invalid key name ${JSON.stringify(name)}`);
  const s = makeSigner(name, type, seed, Date.now);
  const material = Buffer.concat([Uint8Array.of(type), seed]).toString('base64');
  return {
    signerKey: `PRIVATE+KEY+${name}+${hex8(s.keyId)}+${material}`,
    verifierKey: verifierKeyOf(s),
  };
}

function isValidText(text: string): boolean {
  return text.endsWith('\n') && !hasControl(text) && isWellFormed(text);
}

export function formatSignatureLine(sig: NoteSignature): string {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(sig.keyId);
  return `${EM_DASH} ${sig.name} ${Buffer.concat([head, sig.sig]).toString('base64')}\n`;
}

/** Signs `text` (which must end in a newline) and returns the signed note. */
export function signNote(
  text: string,
  signers: readonly NoteSigner[],
  existing: readonly NoteSignature[] = [],
): Result<string> {
  if (!isValidText(text))
    return fail('note text must end with a newline and contain no control characters');
  const sigs = [...existing];
  for (const s of signers) {
    const i = sigs.findIndex((x) => x.name === s.name && x.keyId === s.keyId);
    const fresh = { name: s.name, keyId: s.keyId, sig: s.sign(text) };
    if (i >= 0) sigs[i] = fresh;
    else sigs.push(fresh);
  }
  if (sigs.length === 0) return fail('a signed note needs at least one signature');
  return { ok: true, value: `${text}\n${sigs.map(formatSignatureLine).join('')}` };
}

/** Splits a signed note into text and signature lines; checks syntax only. */
export function parseNote(msg: string): Result<Note> {
  if (hasControl(msg)) return fail('malformed note: control characters');
  if (!isWellFormed(msg)) return fail('malformed note: not valid UTF-8');
  if (!msg.endsWith('\n')) return fail('malformed note: must end with a newline');
  const split = msg.lastIndexOf('\n\n');
  if (split < 0) return fail('malformed note: no blank line before the signatures');
  const text = msg.slice(0, split + 1);
  const lines = msg.slice(split + 2, -1).split('\n');
  if (lines.length > MAX_SIGNATURES) return fail('malformed note: too many signatures');
  const sigs: NoteSignature[] = [];
  for (const line of lines) {
    // As Go does: the name runs to the first U+0020; the rest must be strict base64.
    const m = /^\u2014 ([^ ]+) (.+)$/u.exec(line);
    if (!m) return fail('malformed note: bad signature line');
    const name = m[1]!;
    const raw = strictBase64(m[2]!);
    if (!isValidKeyName(name) || !raw || raw.length < 5)
      return fail('malformed note: bad signature');
    sigs.push({ name, keyId: raw.readUInt32BE(0), sig: Buffer.from(raw.subarray(4)) });
  }
  return { ok: true, value: { text, sigs } };
}

export interface OpenedNote extends Note {
  /** Signatures that verified against a known key. */
  verified: NoteSignature[];
  /** Signatures from keys the caller does not know: ignored, as the spec requires. */
  unknown: NoteSignature[];
}

const sameKey = (a: NoteVerifier, b: NoteVerifier): boolean =>
  a.type === b.type && a.publicKey.equals(b.publicKey);

/**
 * Opens a signed note (C2SP signed-note): a signature whose (name, key ID) matches a known key MUST
 * verify, otherwise the whole note is rejected; signatures from unknown keys are ignored and
 * returned in `unknown`; at least one known signature must verify. The same key listed twice is
 * one key; only two different keys sharing a name and key ID are ambiguous.
 */
export function openNote(msg: string, verifiers: readonly NoteVerifier[]): Result<OpenedNote> {
  const parsed = parseNote(msg);
  if (!parsed.ok) return parsed;
  const { text, sigs } = parsed.value;
  const verified: NoteSignature[] = [];
  const unknown: NoteSignature[] = [];
  for (const sig of sigs) {
    const matches = verifiers.filter((v) => v.name === sig.name && v.keyId === sig.keyId);
    const v = matches[0];
    if (!v) {
      unknown.push(sig);
      continue;
    }
    if (matches.some((m) => !sameKey(m, v)))
      return fail(`ambiguous key ${sig.name}+${hex8(sig.keyId)}: two different keys`);
    if (!v.verify(text, sig.sig))
      return fail(`invalid signature for key ${sig.name}+${hex8(sig.keyId)}`);
    verified.push(sig);
  }
  if (verified.length === 0) return fail('note has no verifiable signatures');
  return { ok: true, value: { text, sigs, verified, unknown } };
}

/** `name+hex id` of a signature, for reports. */
export const signatureKeyLabel = (s: Pick<NoteSignature, 'name' | 'keyId'>): string =>
  `${escapeUnsafe(s.name.length > 80 ? `${s.name.slice(0, 80)}…` : s.name)}+${hex8(s.keyId)}`;
