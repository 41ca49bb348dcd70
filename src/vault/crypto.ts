// Key derivation and value sealing for the vault, on node:crypto only.
// master key  = scrypt(passphrase, salt, N, r, p) or the 32 bytes of a key file;
// sub-keys    = HKDF-SHA256(master, salt = vault id, info = purpose) so that the value key, the key
//               check and the gate token never share a key;
// each value  = AES-256-GCM, random 96-bit nonce, 128-bit tag, aad = the credential's name, type and
//               bindings, so moving a ciphertext to another name or binding fails authentication.
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  scrypt as scryptCb,
  timingSafeEqual,
} from 'node:crypto';
import type { Random } from '../core/time.js';

export interface ScryptParams {
  /** CPU/memory cost, a power of two. */
  N: number;
  r: number;
  p: number;
}

/** OWASP-style interactive default: 32 MiB of memory, well under a second on a laptop. */
export const DEFAULT_SCRYPT: ScryptParams = { N: 2 ** 15, r: 8, p: 1 };

/**
 * Bounds for parameters read back from a file: an edited file must not make `open` allocate
 * gigabytes or spin for minutes, nor silently weaken the derivation below a useful floor.
 */
export function scryptParamsValid(params: ScryptParams, allowWeak = false): boolean {
  const { N, r, p } = params;
  const minN = allowWeak ? 2 : 2 ** 14;
  return (
    Number.isInteger(N) &&
    Number.isInteger(r) &&
    Number.isInteger(p) &&
    N >= minN &&
    N <= 2 ** 20 &&
    (N & (N - 1)) === 0 &&
    r >= 1 &&
    r <= 32 &&
    p >= 1 &&
    p <= 16
  );
}

export const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export function deriveFromPassphrase(
  passphrase: string,
  salt: Uint8Array,
  params: ScryptParams,
): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    scryptCb(
      passphrase.normalize('NFC'),
      salt,
      KEY_BYTES,
      { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r + 1024 * 1024 },
      (err, key) => (err ? reject(err) : resolve(new Uint8Array(key))),
    );
  });
}

export type SubKeyPurpose = 'values' | 'check' | 'gate' | 'continuation';

export function subKey(master: Uint8Array, vaultId: string, purpose: SubKeyPurpose): Uint8Array {
  return new Uint8Array(
    hkdfSync('sha256', master, Buffer.from(vaultId, 'utf8'), `candor-vault/${purpose}`, KEY_BYTES),
  );
}

export function hmacB64(key: Uint8Array, data: string): string {
  return createHmac('sha256', key).update(data, 'utf8').digest('base64');
}

/** Constant-time comparison of two base64 MACs. */
export function macEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'base64');
  const y = Buffer.from(b, 'base64');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

export interface Sealed {
  nonce: string;
  ciphertext: string;
  tag: string;
}

export function seal(key: Uint8Array, plaintext: string, aad: string, random: Random): Sealed {
  const nonce = random.bytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return {
    nonce: Buffer.from(nonce).toString('base64'),
    ciphertext: ciphertext.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
  };
}

/** The plaintext, or null when authentication fails (wrong key, edited ciphertext or aad). */
export function open(key: Uint8Array, sealed: Sealed, aad: string): string | null {
  const nonce = Buffer.from(sealed.nonce, 'base64');
  const tag = Buffer.from(sealed.tag, 'base64');
  if (nonce.length !== NONCE_BYTES || tag.length !== TAG_BYTES) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(tag);
    const plain = Buffer.concat([
      decipher.update(Buffer.from(sealed.ciphertext, 'base64')),
      decipher.final(),
    ]);
    return plain.toString('utf8');
  } catch {
    // node:crypto signals a failed tag check only by throwing; that is an expected outcome here.
    return null;
  }
}

/** Parses key-file text: exactly 32 bytes, base64 (surrounding whitespace ignored). */
export function parseKeyFile(text: string): Uint8Array | null {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/]{43}=$/.test(trimmed)) return null;
  const bytes = Buffer.from(trimmed, 'base64');
  return bytes.length === KEY_BYTES ? new Uint8Array(bytes) : null;
}

export function formatKeyFile(key: Uint8Array): string {
  return `${Buffer.from(key).toString('base64')}\n`;
}
