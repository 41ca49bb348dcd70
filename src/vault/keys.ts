// Master keys: from a passphrase (scrypt, salt and cost stored in the vault file) or from a key file
// (32 random bytes, base64). The key check, the gate token and the value key are HKDF sub-keys of the
// master key (crypto.ts), so a wrong key is recognised before anything is decrypted or written.
import { readFile } from 'node:fs/promises';
import { canonicalJson } from '../core/canonical.js';
import { systemRandom, type Random } from '../core/time.js';
import {
  DEFAULT_SCRYPT,
  deriveFromPassphrase,
  formatKeyFile,
  hmacB64,
  KEY_BYTES,
  macEqual,
  parseKeyFile,
  scryptParamsValid,
  subKey,
  type ScryptParams,
} from './crypto.js';
import { writeFileAtomic, type VaultFile } from './file.js';
import { fail, ok, type Result, type VaultFailure } from './types.js';

export type KeySource =
  | { kind: 'passphrase'; passphrase: string }
  | { kind: 'key_file'; path: string }
  /** A raw 32-byte key obtained elsewhere (e.g. a platform secret store). */
  | { kind: 'key'; key: Uint8Array };

export interface KdfOptions {
  random?: Random;
  /** scrypt cost for new vaults and re-keying. */
  scrypt?: ScryptParams;
  /** Accept scrypt costs below the production floor (tests only). */
  allowWeakKdf?: boolean;
}

const CHECK_LABEL = 'candor-vault key check v1';

/** Creates a new key file (32 random bytes, base64, mode 0600); fails if the file exists. */
export async function createKeyFile(
  path: string,
  random: Random = systemRandom,
): Promise<Result<void, VaultFailure>> {
  return writeFileAtomic(path, formatKeyFile(random.bytes(KEY_BYTES)), 'create');
}

/** The key-check MAC stored in the file for this master key. */
export function keyCheck(master: Uint8Array, vaultId: string): string {
  return hmacB64(subKey(master, vaultId, 'check'), CHECK_LABEL);
}

export function keyMatches(master: Uint8Array, file: VaultFile): boolean {
  return macEqual(file.key_check, keyCheck(master, file.vault_id));
}

export function gateToken(master: Uint8Array, file: VaultFile): string {
  const { generation, changed_at, by } = file.gate;
  return hmacB64(
    subKey(master, file.vault_id, 'gate'),
    canonicalJson({ vault_id: file.vault_id, open: true, generation, changed_at, by }),
  );
}

/** Open only when unlocked by someone holding the key for this generation. */
export function gateOpen(master: Uint8Array, file: VaultFile): boolean {
  return (
    !file.gate.locked &&
    file.gate.token !== null &&
    macEqual(file.gate.token, gateToken(master, file))
  );
}

export type Kdf = VaultFile['kdf'];

/** Master key and KDF record for a new vault or a re-key. */
export async function deriveNew(
  key: KeySource,
  options: KdfOptions,
): Promise<Result<{ master: Uint8Array; kdf: Kdf }, VaultFailure>> {
  if (key.kind !== 'passphrase') {
    const master = await rawKey(key);
    return master.ok ? ok({ master: master.value, kdf: { kind: 'key_file' } }) : master;
  }
  if (key.passphrase.length < 8) {
    return fail({
      code: 'invalid_value',
      message: 'The passphrase must have at least 8 characters.',
    });
  }
  const params = options.scrypt ?? DEFAULT_SCRYPT;
  if (!scryptParamsValid(params, options.allowWeakKdf === true)) {
    return fail({ code: 'invalid_value', message: 'The scrypt parameters are out of range.' });
  }
  const salt = (options.random ?? systemRandom).bytes(16);
  const master = await deriveFromPassphrase(key.passphrase, salt, params);
  return ok({
    master,
    kdf: { kind: 'scrypt', salt: Buffer.from(salt).toString('base64'), ...params },
  });
}

export async function masterFor(
  file: VaultFile,
  key: KeySource,
  options: KdfOptions,
): Promise<Result<Uint8Array, VaultFailure>> {
  let master: Uint8Array;
  if (file.kdf.kind === 'scrypt') {
    if (key.kind !== 'passphrase') {
      return fail({ code: 'wrong_key', message: 'This vault is opened with a passphrase.' });
    }
    const { salt, N, r, p } = file.kdf;
    if (!scryptParamsValid({ N, r, p }, options.allowWeakKdf === true)) {
      return fail({
        code: 'corrupt',
        message: 'The vault file holds out-of-range scrypt parameters.',
      });
    }
    master = await deriveFromPassphrase(key.passphrase, Buffer.from(salt, 'base64'), { N, r, p });
  } else {
    if (key.kind === 'passphrase') {
      return fail({ code: 'wrong_key', message: 'This vault is opened with a key file.' });
    }
    const raw = await rawKey(key);
    if (!raw.ok) return raw;
    master = raw.value;
  }
  if (!keyMatches(master, file)) {
    return fail({ code: 'wrong_key', message: 'Wrong passphrase or key file for this vault.' });
  }
  return ok(master);
}

async function rawKey(
  key: { kind: 'key_file'; path: string } | { kind: 'key'; key: Uint8Array },
): Promise<Result<Uint8Array, VaultFailure>> {
  if (key.kind === 'key') {
    return key.key.length === KEY_BYTES
      ? ok(new Uint8Array(key.key))
      : fail({ code: 'bad_key_file', message: `A vault key must be ${KEY_BYTES} bytes.` });
  }
  let text: string;
  try {
    text = await readFile(key.path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
    return fail({ code: 'unreadable', message: `Cannot read the key file ${key.path} (${code}).` });
  }
  const parsed = parseKeyFile(text);
  return parsed === null
    ? fail({
        code: 'bad_key_file',
        message: `The key file ${key.path} must hold ${KEY_BYTES} bytes in base64.`,
      })
    : ok(parsed);
}
