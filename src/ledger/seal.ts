// Write-blind sealing of sensitive payloads: HPKE (RFC 9180) base mode with
// DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / ChaCha20-Poly1305 (suite 0x0020/0x0001/0x0003), built
// on node:crypto only. The gateway holds the auditor's public key: it can seal, never open. Each
// sealed payload has its own ephemeral key, and its AAD binds where it may appear
// (`candor-seal-v1|seq=<n>`), so a payload moved to another record fails to open.
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  randomBytes,
  type KeyObject,
} from 'node:crypto';

const KEM_ID = 0x0020;
const KDF_ID = 0x0001;
const AEAD_ID = 0x0003;
const NK = 32;
const NN = 12;
const NH = 32;
const TAG = 16;
const MODE_BASE = 0x00;

const i2osp = (n: number, len: number): Buffer => {
  const b = Buffer.alloc(len);
  b.writeUIntBE(n, 0, len);
  return b;
};
const KEM_SUITE = Buffer.concat([Buffer.from('KEM'), i2osp(KEM_ID, 2)]);
const HPKE_SUITE = Buffer.concat([
  Buffer.from('HPKE'),
  i2osp(KEM_ID, 2),
  i2osp(KDF_ID, 2),
  i2osp(AEAD_ID, 2),
]);
const V1 = Buffer.from('HPKE-v1');
const EMPTY = Buffer.alloc(0);

const PKCS8_X25519 = Buffer.from('302e020100300506032b656e04220420', 'hex');
const SPKI_X25519 = Buffer.from('302a300506032b656e032100', 'hex');

type Bytes = Uint8Array;
export type Result<T> =
  { ok: true; value: T; failure?: never } | { ok: false; failure: string; value?: never };

function hkdfExtract(salt: Bytes, ikm: Bytes): Buffer {
  // RFC 5869: an absent salt is HashLen zero bytes, which HMAC's key padding makes equal to "".
  return createHmac('sha256', salt).update(ikm).digest();
}

function hkdfExpand(prk: Bytes, info: Bytes, length: number): Buffer {
  const out: Buffer[] = [];
  let t: Buffer = EMPTY;
  for (let i = 1; out.length * NH < length; i++) {
    t = createHmac('sha256', prk).update(t).update(info).update(Uint8Array.of(i)).digest();
    out.push(t);
  }
  return Buffer.concat(out).subarray(0, length);
}

function labeledExtract(suite: Buffer, salt: Bytes, label: string, ikm: Bytes): Buffer {
  return hkdfExtract(salt, Buffer.concat([V1, suite, Buffer.from(label), ikm]));
}

function labeledExpand(
  suite: Buffer,
  prk: Bytes,
  label: string,
  info: Bytes,
  length: number,
): Buffer {
  return hkdfExpand(
    prk,
    Buffer.concat([i2osp(length, 2), V1, suite, Buffer.from(label), info]),
    length,
  );
}

function x25519Private(sk: Bytes): KeyObject {
  return createPrivateKey({ key: Buffer.concat([PKCS8_X25519, sk]), format: 'der', type: 'pkcs8' });
}

function x25519Public(pk: Bytes): KeyObject {
  return createPublicKey({ key: Buffer.concat([SPKI_X25519, pk]), format: 'der', type: 'spki' });
}

function publicOf(sk: Bytes): Buffer {
  return createPublicKey(x25519Private(sk))
    .export({ format: 'der', type: 'spki' })
    .subarray(SPKI_X25519.length);
}

function dh(sk: Bytes, pk: Bytes): Buffer {
  const z = diffieHellman({ privateKey: x25519Private(sk), publicKey: x25519Public(pk) });
  // RFC 9180 §7.1.4: an all-zero X25519 output (a low-order public key) must be rejected.
  if (z.every((b) => b === 0)) throw new RangeError('hpke: X25519 produced the all-zero value');
  return z;
}

export interface SealKeyPair {
  /** 32-byte X25519 public key (the gateway's configuration). */
  publicKey: Buffer;
  /** 32-byte X25519 private key (the auditor's, never on the gateway). */
  privateKey: Buffer;
}

/** RFC 9180 §7.1.3 DeriveKeyPair for X25519. */
export function deriveSealKeyPair(ikm: Bytes): SealKeyPair {
  const prk = labeledExtract(KEM_SUITE, EMPTY, 'dkp_prk', ikm);
  const sk = labeledExpand(KEM_SUITE, prk, 'sk', EMPTY, 32);
  return { privateKey: sk, publicKey: publicOf(sk) };
}

export function generateSealKeyPair(): SealKeyPair {
  return deriveSealKeyPair(randomBytes(32));
}

function extractAndExpand(z: Bytes, kemContext: Bytes): Buffer {
  const prk = labeledExtract(KEM_SUITE, EMPTY, 'eae_prk', z);
  return labeledExpand(KEM_SUITE, prk, 'shared_secret', kemContext, 32);
}

/** The key schedule's outputs; exposed for the RFC 9180 vector tests. */
export interface ContextSecrets {
  shared_secret: Buffer;
  key: Buffer;
  base_nonce: Buffer;
  exporter_secret: Buffer;
}

function keySchedule(sharedSecret: Buffer, info: Bytes): ContextSecrets {
  const pskIdHash = labeledExtract(HPKE_SUITE, EMPTY, 'psk_id_hash', EMPTY);
  const infoHash = labeledExtract(HPKE_SUITE, EMPTY, 'info_hash', info);
  const ctx = Buffer.concat([Uint8Array.of(MODE_BASE), pskIdHash, infoHash]);
  const secret = labeledExtract(HPKE_SUITE, sharedSecret, 'secret', EMPTY);
  return {
    shared_secret: sharedSecret,
    key: labeledExpand(HPKE_SUITE, secret, 'key', ctx, NK),
    base_nonce: labeledExpand(HPKE_SUITE, secret, 'base_nonce', ctx, NN),
    exporter_secret: labeledExpand(HPKE_SUITE, secret, 'exp', ctx, NH),
  };
}

function nonceFor(base: Buffer, seq: number): Buffer {
  const n = Buffer.from(base);
  const s = i2osp(seq, 6);
  for (let i = 0; i < 6; i++) n[NN - 6 + i]! ^= s[i]!;
  return n;
}

/** An HPKE context: messages are numbered from 0 in the order they are sealed or opened. */
export interface HpkeContext {
  readonly secrets: ContextSecrets;
  seal(aad: Bytes, plaintext: Bytes): Buffer;
  open(aad: Bytes, ciphertext: Bytes): Result<Buffer>;
  /** RFC 9180 §5.3 secret export. */
  export(exporterContext: Bytes, length: number): Buffer;
}

function context(secrets: ContextSecrets): HpkeContext {
  let seq = 0;
  const next = (): Buffer => {
    if (seq >= 2 ** 48) throw new RangeError('hpke: message limit reached');
    return nonceFor(secrets.base_nonce, seq++);
  };
  return {
    secrets,
    seal(aad, plaintext) {
      const c = createCipheriv('chacha20-poly1305', secrets.key, next(), { authTagLength: TAG });
      c.setAAD(aad, { plaintextLength: plaintext.length });
      return Buffer.concat([c.update(plaintext), c.final(), c.getAuthTag()]);
    },
    open(aad, ciphertext) {
      if (ciphertext.length < TAG) return { ok: false, failure: 'ciphertext too short' };
      const nonce = nonceFor(secrets.base_nonce, seq);
      try {
        const d = createDecipheriv('chacha20-poly1305', secrets.key, nonce, { authTagLength: TAG });
        d.setAAD(aad, { plaintextLength: ciphertext.length - TAG });
        d.setAuthTag(ciphertext.subarray(ciphertext.length - TAG));
        const pt = Buffer.concat([
          d.update(ciphertext.subarray(0, ciphertext.length - TAG)),
          d.final(),
        ]);
        seq++;
        return { ok: true, value: pt };
      } catch {
        return {
          ok: false,
          failure: 'authentication failed: wrong key, wrong binding, or altered ciphertext',
        };
      }
    },
    export(exporterContext, length) {
      return labeledExpand(HPKE_SUITE, secrets.exporter_secret, 'sec', exporterContext, length);
    },
  };
}

/**
 * SetupBaseS. `ikmE` makes the ephemeral key deterministic — only for test vectors; production
 * callers leave it out and get a fresh random ephemeral key per payload.
 */
export function setupBaseSender(
  pkR: Bytes,
  info: Bytes,
  ikmE?: Bytes,
): { enc: Buffer; ctx: HpkeContext } {
  const eph = ikmE ? deriveSealKeyPair(ikmE) : generateSealKeyPair();
  const z = dh(eph.privateKey, pkR);
  const shared = extractAndExpand(z, Buffer.concat([eph.publicKey, pkR]));
  return { enc: eph.publicKey, ctx: context(keySchedule(shared, info)) };
}

export function setupBaseRecipient(enc: Bytes, skR: Bytes, info: Bytes): Result<HpkeContext> {
  if (enc.length !== 32 || skR.length !== 32)
    return { ok: false, failure: 'keys must be 32 bytes' };
  try {
    const z = dh(skR, enc);
    const shared = extractAndExpand(z, Buffer.concat([enc, publicOf(skR)]));
    return { ok: true, value: context(keySchedule(shared, info)) };
  } catch {
    return { ok: false, failure: 'invalid encapsulated key' };
  }
}

export const SEAL_INFO = Buffer.from('candor-seal-v1');

/** The AAD that binds a sealed payload to the record seq it is stored in. */
export function sealAad(seq: number): Buffer {
  return Buffer.from(`candor-seal-v1|seq=${seq}`);
}

/** Single-shot seal to a recipient public key. */
export function seal(
  recipientPublicKey: Bytes,
  plaintext: Bytes,
  aad: Bytes,
  opts: { info?: Bytes; ikmE?: Bytes } = {},
): { enc: Buffer; ciphertext: Buffer } {
  const { enc, ctx } = setupBaseSender(recipientPublicKey, opts.info ?? SEAL_INFO, opts.ikmE);
  return { enc, ciphertext: ctx.seal(aad, plaintext) };
}

/** Single-shot open with the recipient private key. */
export function open(
  recipientPrivateKey: Bytes,
  enc: Bytes,
  ciphertext: Bytes,
  aad: Bytes,
  opts: { info?: Bytes } = {},
): Result<Buffer> {
  const ctx = setupBaseRecipient(enc, recipientPrivateKey, opts.info ?? SEAL_INFO);
  return ctx.ok ? ctx.value.open(aad, ciphertext) : ctx;
}

/** A sealed payload as it appears inside a record's `data` (JSON-safe). */
export interface SealedPayload {
  sealed: 'candor-seal-v1';
  /** What the AAD binds the payload to, e.g. `seq=12`. */
  bind: string;
  enc: string;
  ct: string;
}

export function sealPayload(
  recipientPublicKey: Bytes,
  plaintext: Bytes | string,
  seq: number,
): SealedPayload {
  const pt = typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext;
  const { enc, ciphertext } = seal(recipientPublicKey, pt, sealAad(seq));
  return {
    sealed: 'candor-seal-v1',
    bind: `seq=${seq}`,
    enc: enc.toString('base64'),
    ct: ciphertext.toString('base64'),
  };
}

export function isSealedPayload(v: unknown): v is SealedPayload {
  if (v === null || typeof v !== 'object') return false;
  const p = v as Record<string, unknown>;
  return (
    p.sealed === 'candor-seal-v1' &&
    typeof p.bind === 'string' &&
    typeof p.enc === 'string' &&
    typeof p.ct === 'string'
  );
}

/**
 * Seals a payload bound to an id of the record it will be stored in (`attempt=att_…`,
 * `operation=op_…`), for writers that seal before the store assigns the seq. The AAD has the same
 * shape as the seq binding: `candor-seal-v1|<bind>`.
 */
export function sealPayloadBound(
  recipientPublicKey: Bytes,
  plaintext: Bytes | string,
  bind: `attempt=${string}` | `operation=${string}`,
): SealedPayload {
  const pt = typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext;
  const { enc, ciphertext } = seal(recipientPublicKey, pt, Buffer.from(`candor-seal-v1|${bind}`));
  return {
    sealed: 'candor-seal-v1',
    bind,
    enc: enc.toString('base64'),
    ct: ciphertext.toString('base64'),
  };
}

/** The ids a stored record offers for id-bound payloads. */
export interface RecordIds {
  operation_id?: unknown;
  data?: unknown;
}

/**
 * Opens a payload found in the record with seq `seq`; a payload bound elsewhere does not open.
 * Id-bound payloads open only inside the record carrying that operation or attempt id.
 */
export function openPayload(
  recipientPrivateKey: Bytes,
  payload: SealedPayload,
  seq: number,
  record: RecordIds = {},
): Result<Buffer> {
  const attemptId = (record.data as { attempt_id?: unknown } | null | undefined)?.attempt_id;
  const matches =
    payload.bind === `seq=${seq}` ||
    (typeof attemptId === 'string' && payload.bind === `attempt=${attemptId}`) ||
    (typeof record.operation_id === 'string' &&
      payload.bind === `operation=${record.operation_id}`);
  if (!matches) {
    return { ok: false, failure: `payload is bound to ${payload.bind}, found in seq=${seq}` };
  }
  return open(
    recipientPrivateKey,
    Buffer.from(payload.enc, 'base64'),
    Buffer.from(payload.ct, 'base64'),
    Buffer.from(`candor-seal-v1|${payload.bind}`),
  );
}

const PK_PREFIX = 'candor-seal-pk-v1:';
const SK_PREFIX = 'candor-seal-sk-v1:';

export function encodeSealPublicKey(pk: Bytes): string {
  return PK_PREFIX + Buffer.from(pk).toString('base64url');
}

/**
 * RFC 9180 §7.1.2: SerializePrivateKey for X25519 clamps its output (RFC 7748 §5), so a stored key
 * reads the same in every HPKE implementation; DeserializePrivateKey clamps its input. X25519
 * clamps internally, so clamping changes neither the public key nor any shared secret.
 */
export function clampX25519(sk: Bytes): Buffer {
  const c = Buffer.from(sk);
  c[0]! &= 248;
  c[31]! &= 127;
  c[31]! |= 64;
  return c;
}

export function encodeSealPrivateKey(sk: Bytes): string {
  return SK_PREFIX + clampX25519(sk).toString('base64url');
}

function decodeKey(s: string, prefix: string): Result<Buffer> {
  const t = s.trim();
  if (!t.startsWith(prefix))
    return { ok: false, failure: `expected a key starting with ${prefix}` };
  const b = Buffer.from(t.slice(prefix.length), 'base64url');
  if (b.length !== 32 || b.toString('base64url') !== t.slice(prefix.length)) {
    return { ok: false, failure: 'key must be 32 bytes of base64url' };
  }
  return { ok: true, value: b };
}

export const decodeSealPublicKey = (s: string): Result<Buffer> => decodeKey(s, PK_PREFIX);
export function decodeSealPrivateKey(s: string): Result<Buffer> {
  const k = decodeKey(s, SK_PREFIX);
  return k.ok ? { ok: true, value: clampX25519(k.value) } : k;
}
