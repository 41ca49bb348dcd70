// The encrypted local credential store (DESIGN.md §5 `vault/`).
//
// Contracts:
// - The file holds no plaintext value: each value is sealed with AES-256-GCM under a key derived
//   from the master key; the aad binds it to the vault id, name, type, username/header and bindings,
//   so editing a binding in the file makes that credential unusable (`integrity`), not re-targeted.
// - A wrong passphrase or key file is detected by a key check (HMAC) before anything is decrypted
//   or written: `wrong_key`, and the file is untouched.
// - Every change is one atomic file replacement under the writer file (see file.ts).
// - The gate: `lock` needs no key (anyone may close it); `unlock` needs the key and stores an HMAC
//   token over (vault id, generation, time, by). A flag flipped by hand without the key is not a
//   valid unlock, so the vault stays locked. Restoring a whole older file is outside what a local
//   file can detect; the ledger's `gate_changed` events are the record of transitions.
// - `resolve` re-reads the file on every call so that a `candor vault lock` or `rotate` from another
//   process takes effect on the next request of a running gateway.
// - Rotation: `rotate(name, value)` replaces one value (bindings kept, `rotated_at` set);
//   `rekey(newKey)` re-encrypts every value under a new passphrase or key file.
import { systemClock, systemRandom, type Clock } from '../core/time.js';
import { bindingAdmits } from './binding.js';
import { aadFor, DEFAULT_API_KEY_HEADER, infoOf, present } from './credential.js';
import { open, seal, subKey } from './crypto.js';
import {
  DEFAULT_VAULT_PATH,
  formatVaultFile,
  readVaultFile,
  VAULT_FORMAT,
  VAULT_VERSION,
  withWriter,
  writeFileAtomic,
  type StoredCredential,
  type VaultFile,
} from './file.js';
import {
  deriveNew,
  gateOpen,
  gateToken,
  keyCheck,
  keyMatches,
  masterFor,
  type KdfOptions,
  type KeySource,
} from './keys.js';
import {
  fail,
  isSshCredentialType,
  ok,
  type Binding,
  type CredentialInfo,
  type CredentialType,
  type Destination,
  type GateChange,
  type ResolvedCredential,
  type ResolveFailure,
  type Result,
  type VaultFailure,
} from './types.js';
import { validateCredential } from './validate.js';
import {
  grantsOf,
  oauthStore,
  resealOAuth,
  type OAuthGrantInfo,
  type VaultOAuth,
} from './oauth.js';

export { createKeyFile, type KeySource } from './keys.js';
export { DEFAULT_API_KEY_HEADER, present } from './credential.js';

export interface VaultOptions extends KdfOptions {
  /** Vault file path; default `./.candor/vault.json`. */
  path?: string;
  clock?: Clock;
  /** Called for every gate transition; the engine records it as `gate_changed`. */
  onGateChange?: (change: GateChange) => void;
  /** Called with every secret string the vault decrypts or derives, e.g. `redactor.addSecret`. */
  onSecret?: (secret: string) => void;
}

export interface SetCredentialInput {
  name: string;
  type: CredentialType;
  secret: string;
  bindings: Binding[];
  /** Required for `basic`. */
  username?: string;
  /** For `api_key`; default `X-Api-Key`. */
  header_name?: string;
}

export interface GateTransition {
  /** False when the gate was already in the requested state (no event to record). */
  changed: boolean;
  gate: GateChange;
}

export interface VaultListing {
  gate: GateChange;
  credentials: CredentialInfo[];
}

export interface Vault {
  readonly path: string;
  set(input: SetCredentialInput): Promise<Result<CredentialInfo, VaultFailure>>;
  rotate(name: string, secret: string): Promise<Result<CredentialInfo, VaultFailure>>;
  rekey(newKey: KeySource): Promise<Result<void, VaultFailure>>;
  lock(by: string): Promise<Result<GateTransition, VaultFailure>>;
  unlock(by: string): Promise<Result<GateTransition, VaultFailure>>;
  list(): Promise<Result<VaultListing, VaultFailure>>;
  /** Whether the gate is open right now (re-reads the file); `locked` when it is not. */
  checkGate(): Promise<Result<GateChange, ResolveFailure>>;
  /** Resolves credential `name` for `destination`; checks gate, binding and type first. */
  resolve(
    name: string,
    destination: Destination,
  ): Promise<Result<ResolvedCredential, ResolveFailure>>;
  /**
   * The key of the engine's continuation identity (HMAC-SHA-256 of secret inputs, never stored):
   * an HKDF sub-key of the master key, the same for every process that opens this vault, so a
   * continuation after a restart or on another gateway of the fleet is recognised. It changes on
   * rekey (operations opened before then refuse a continuation that carries secret inputs).
   */
  continuationKey(): Uint8Array;
  /** OAuth clients and the tokens of upstreams that need OAuth (src/vault/oauth.ts). */
  readonly oauth: VaultOAuth;
  /** Forgets the key material held in memory. */
  close(): void;
}

/** Creates a new, unlocked, empty vault. Fails with `already_exists` rather than overwrite. */
export async function initVault(
  key: KeySource,
  options: VaultOptions = {},
): Promise<Result<Vault, VaultFailure>> {
  const path = options.path ?? DEFAULT_VAULT_PATH;
  const random = options.random ?? systemRandom;
  const clock = options.clock ?? systemClock;
  const vaultId = Buffer.from(random.bytes(16)).toString('hex');
  const derived = await deriveNew(key, options);
  if (!derived.ok) return derived;
  const { master, kdf } = derived.value;
  const at = clock.now();
  const file: VaultFile = {
    format: VAULT_FORMAT,
    version: VAULT_VERSION,
    vault_id: vaultId,
    kdf,
    key_check: keyCheck(master, vaultId),
    gate: { locked: false, changed_at: at, by: 'init', generation: 0, token: null },
    credentials: {},
  };
  file.gate.token = gateToken(master, file);
  const written = await withWriter(path, () =>
    writeFileAtomic(path, formatVaultFile(file), 'create'),
  );
  if (!written.ok) {
    if (written.failure.code === 'already_exists') {
      return fail({ code: 'already_exists', message: `A vault already exists at ${path}.` });
    }
    return written;
  }
  return ok(makeVault(path, master, vaultId, options));
}

/** Opens an existing vault; `wrong_key` when the passphrase or key file does not match. */
export async function openVault(
  key: KeySource,
  options: VaultOptions = {},
): Promise<Result<Vault, VaultFailure>> {
  const path = options.path ?? DEFAULT_VAULT_PATH;
  const read = await readVaultFile(path);
  if (!read.ok) return read;
  const master = await masterFor(read.value, key, options);
  if (!master.ok) return master;
  return ok(makeVault(path, master.value, read.value.vault_id, options));
}

/** Names, types, bindings, times and the gate state; needs no key (values are never shown). */
export async function listCredentials(
  options: VaultOptions = {},
): Promise<Result<VaultListing, VaultFailure>> {
  const read = await readVaultFile(options.path ?? DEFAULT_VAULT_PATH);
  if (!read.ok) return read;
  return ok(listing(read.value));
}

/** The OAuth grants in clear (expiry, scopes; never a token); needs no key. */
export async function listOAuthGrants(
  options: VaultOptions = {},
): Promise<Result<OAuthGrantInfo[], VaultFailure>> {
  const read = await readVaultFile(options.path ?? DEFAULT_VAULT_PATH);
  if (!read.ok) return read;
  return ok(grantsOf(read.value));
}

/** Closes the gate. Needs no key: locking only ever removes capability. */
export async function lockVault(
  by: string,
  options: VaultOptions = {},
): Promise<Result<GateTransition, VaultFailure>> {
  const path = options.path ?? DEFAULT_VAULT_PATH;
  const clock = options.clock ?? systemClock;
  const result = await withWriter(path, async () => {
    const read = await readVaultFile(path);
    if (!read.ok) return read;
    const file = read.value;
    if (file.gate.locked) return ok({ changed: false, gate: gateOf(file) });
    const at = clock.now();
    file.gate = {
      locked: true,
      changed_at: at,
      by,
      generation: file.gate.generation + 1,
      token: null,
    };
    const written = await writeFileAtomic(path, formatVaultFile(file));
    return written.ok ? ok({ changed: true, gate: gateOf(file) }) : written;
  });
  if (result.ok && result.value.changed) options.onGateChange?.(result.value.gate);
  return result;
}

function makeVault(
  path: string,
  initialMaster: Uint8Array,
  vaultId: string,
  options: VaultOptions,
): Vault {
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  let master = initialMaster;

  /** Reads the file and confirms it is still the vault this key opens. */
  const load = async (): Promise<Result<VaultFile, VaultFailure>> => {
    const read = await readVaultFile(path);
    if (!read.ok) return read;
    if (read.value.vault_id !== vaultId || !keyMatches(master, read.value)) {
      return fail({
        code: 'wrong_key',
        message: 'The vault was re-keyed or replaced since it was opened; open it again.',
      });
    }
    return read;
  };

  /** One read-modify-write cycle under the writer file. */
  const mutate = <T>(
    fn: (file: VaultFile) => Promise<Result<T, VaultFailure>> | Result<T, VaultFailure>,
  ): Promise<Result<T, VaultFailure>> =>
    withWriter(path, async () => {
      const loaded = await load();
      if (!loaded.ok) return loaded;
      const out = await fn(loaded.value);
      if (!out.ok) return out;
      const written = await writeFileAtomic(path, formatVaultFile(loaded.value));
      return written.ok ? out : written;
    });

  const valuesKey = (): Uint8Array => subKey(master, vaultId, 'values');

  /** The current file, if it is still this vault under this key and its gate is open. */
  const readGated = async (): Promise<Result<VaultFile, ResolveFailure>> => {
    const read = await readVaultFile(path);
    if (!read.ok) {
      return fail({ code: 'vault_unavailable', message: read.failure.message });
    }
    const file = read.value;
    if (file.vault_id !== vaultId || !keyMatches(master, file)) {
      return fail({ code: 'key_changed', message: 'The vault was re-keyed; open it again.' });
    }
    if (!gateOpen(master, file)) {
      return fail({ code: 'locked', message: 'The vault is locked; no credential is released.' });
    }
    return ok(file);
  };

  const gateTransition = async (
    locked: boolean,
    by: string,
  ): Promise<Result<GateTransition, VaultFailure>> => {
    const result = await mutate((file) => {
      if (file.gate.locked === locked && (locked || gateOpen(master, file))) {
        return ok({ changed: false, gate: gateOf(file) });
      }
      file.gate = {
        locked,
        changed_at: clock.now(),
        by,
        generation: file.gate.generation + 1,
        token: null,
      };
      if (!locked) file.gate.token = gateToken(master, file);
      return ok({ changed: true, gate: gateOf(file) });
    });
    if (result.ok && result.value.changed) options.onGateChange?.(result.value.gate);
    return result;
  };

  return {
    path,

    set: (input) =>
      mutate((file) => {
        const valid = validateCredential(input);
        if (!valid.ok) return valid;
        if (file.credentials[input.name] !== undefined) {
          return fail({
            code: 'credential_exists',
            message: `Credential "${input.name}" exists; use rotate to replace its value.`,
          });
        }
        const at = clock.now();
        const meta = {
          type: input.type,
          ...(input.type === 'basic' ? { username: input.username ?? '' } : {}),
          ...(input.type === 'api_key'
            ? { header_name: input.header_name ?? DEFAULT_API_KEY_HEADER }
            : {}),
          bindings: input.bindings,
        };
        const sealed = seal(valuesKey(), input.secret, aadFor(vaultId, input.name, meta), random);
        const stored: StoredCredential = { ...meta, created_at: at, rotated_at: null, ...sealed };
        file.credentials[input.name] = stored;
        return ok(infoOf(input.name, stored));
      }),

    rotate: (name, secret) =>
      mutate((file) => {
        const stored = file.credentials[name];
        if (stored === undefined) {
          return fail({ code: 'unknown_credential', message: `No credential named "${name}".` });
        }
        const valid = validateCredential({ ...stored, name, secret });
        if (!valid.ok) return valid;
        const sealed = seal(valuesKey(), secret, aadFor(vaultId, name, stored), random);
        const next: StoredCredential = { ...stored, ...sealed, rotated_at: clock.now() };
        file.credentials[name] = next;
        return ok(infoOf(name, next));
      }),

    rekey: async (newKey) => {
      const derived = await deriveNew(newKey, options);
      if (!derived.ok) return derived;
      const next = derived.value.master;
      const result = await mutate((file) => {
        const oldValues = valuesKey();
        const newValues = subKey(next, vaultId, 'values');
        // Decrypt everything first: one unreadable value aborts the re-key with nothing written.
        for (const [name, stored] of Object.entries(file.credentials)) {
          const aad = aadFor(vaultId, name, stored);
          const plain = open(oldValues, stored, aad);
          if (plain === null) {
            return fail({
              code: 'integrity',
              message: `Credential "${name}" failed authentication; re-key aborted, nothing changed.`,
            });
          }
          file.credentials[name] = { ...stored, ...seal(newValues, plain, aad, random) };
        }
        const unreadable = resealOAuth(file, vaultId, oldValues, newValues, random);
        if (unreadable !== null) {
          return fail({
            code: 'integrity',
            message: `${unreadable} failed authentication; re-key aborted, nothing changed.`,
          });
        }
        const wasOpen = gateOpen(master, file);
        file.kdf = derived.value.kdf;
        file.key_check = keyCheck(next, vaultId);
        file.gate.token = wasOpen ? gateToken(next, file) : null;
        return ok(undefined);
      });
      if (result.ok) master = next;
      return result;
    },

    lock: (by) => gateTransition(true, by),
    unlock: (by) => gateTransition(false, by),

    list: async () => {
      const loaded = await load();
      return loaded.ok ? ok(listing(loaded.value)) : loaded;
    },

    checkGate: async () => {
      const read = await readGated();
      return read.ok ? ok(gateOf(read.value)) : read;
    },

    resolve: async (name, destination) => {
      const read = await readGated();
      if (!read.ok) return read;
      const file = read.value;
      const stored = file.credentials[name];
      if (stored === undefined) {
        return fail({ code: 'unknown_ref', message: `No credential named "${name}".` });
      }
      if (isSshCredentialType(stored.type) !== (destination.kind === 'ssh')) {
        return fail({
          code: 'type_mismatch',
          message: `Credential "${name}" (${stored.type}) cannot serve a ${destination.kind} destination.`,
        });
      }
      if (!bindingAdmits(stored.bindings, destination)) {
        return fail({
          code: 'binding_mismatch',
          message: `Credential "${name}" is not bound to this destination.`,
        });
      }
      const plain = open(valuesKey(), stored, aadFor(vaultId, name, stored));
      if (plain === null) {
        return fail({
          code: 'integrity',
          message: `Credential "${name}" failed authentication; the vault file was altered.`,
        });
      }
      const resolved = present(stored, plain);
      options.onSecret?.(plain);
      if (resolved.kind === 'http_header') options.onSecret?.(resolved.header_value);
      return ok(resolved);
    },

    continuationKey: () => subKey(master, vaultId, 'continuation'),

    oauth: oauthStore({
      vaultId,
      clock,
      random,
      valuesKey,
      readGated,
      mutate,
      onSecret: options.onSecret,
    }),

    close: () => {
      master.fill(0);
    },
  };
}

function gateOf(file: VaultFile): GateChange {
  return { locked: file.gate.locked, by: file.gate.by, at: file.gate.changed_at };
}

function listing(file: VaultFile): VaultListing {
  return {
    gate: gateOf(file),
    credentials: Object.keys(file.credentials)
      .sort()
      .map((name) => infoOf(name, file.credentials[name]!)),
  };
}
