// Vault vocabulary: credential types, bindings, destinations and the stable failure codes.
// Expected outcomes are returned as `Result` values, never thrown (STYLE.md).

type ValueOf<T> = T[keyof T];

export type Result<T, F> =
  { ok: true; value: T; failure?: never } | { ok: false; failure: F; value?: never };

export const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
export const fail = <F>(failure: F): { ok: false; failure: F } => ({ ok: false, failure });

/** What a stored secret is and how it is presented to a destination. */
export const CredentialType = {
  /** `Authorization: Bearer <token>`. */
  bearer: 'bearer',
  /** `Authorization: Basic base64(username:password)`; the secret is the password. */
  basic: 'basic',
  /** A key sent in a named header (default `X-Api-Key`). */
  api_key: 'api_key',
  /** An SSH private key in PEM / OpenSSH format, only for `ssh` destinations. */
  ssh_key: 'ssh_key',
  /**
   * An opaque value for an SSH command's secret environment (`secret_env` in candor.yaml), only
   * for `ssh` destinations: it reaches the remote command on the channel's stdin, never argv.
   */
  ssh_secret: 'ssh_secret',
} as const;
export type CredentialType = ValueOf<typeof CredentialType>;

/** Types served only to `ssh` destinations (bound to `ssh:HOST` references). */
export const isSshCredentialType = (type: CredentialType): boolean =>
  type === 'ssh_key' || type === 'ssh_secret';

/**
 * Where a credential may be used. HTTP bindings hold a normalised origin (`scheme://host[:port]`,
 * default ports elided as the WHATWG URL parser does) and a path prefix matched on whole segments;
 * SSH bindings name an inventory host reference.
 */
export type Binding =
  { kind: 'http'; origin: string; path_prefix: string } | { kind: 'ssh'; host_ref: string };

/** Where a request is going. `url` is the full request URL (query allowed). */
export type Destination = { kind: 'http'; url: string } | { kind: 'ssh'; host_ref: string };

/** What a resolved credential gives the transport. Never shown to the agent. */
export type ResolvedCredential =
  | { kind: 'http_header'; header_name: string; header_value: string }
  | { kind: 'ssh_private_key'; private_key: string }
  | { kind: 'ssh_secret_value'; value: string };

/** Why a credential could not be resolved. */
export const ResolveFailureCode = {
  /** The reference is not `vault:NAME` or `env:VAR`. */
  bad_ref: 'bad_ref',
  /** No such credential (or no declaration for that environment variable). */
  unknown_ref: 'unknown_ref',
  /** The destination is not one the credential is bound to. */
  binding_mismatch: 'binding_mismatch',
  /** The credential type cannot serve this destination kind (e.g. an SSH key for HTTP). */
  type_mismatch: 'type_mismatch',
  /** The gate is locked: no credential leaves the vault. */
  locked: 'locked',
  /** A declared `env:VAR` credential whose variable is unset or too short. */
  env_missing: 'env_missing',
  /** The vault file cannot be read or parsed. */
  vault_unavailable: 'vault_unavailable',
  /** The vault was re-keyed since it was opened; reopen with the new key. */
  key_changed: 'key_changed',
  /** A stored value or its metadata failed authentication (edited or corrupted file). */
  integrity: 'integrity',
} as const;
export type ResolveFailureCode = ValueOf<typeof ResolveFailureCode>;

export interface ResolveFailure {
  code: ResolveFailureCode;
  /** One plain sentence; never contains a secret value. */
  message: string;
}

/** Why a vault operation failed. */
export const VaultFailureCode = {
  not_found: 'not_found',
  already_exists: 'already_exists',
  unreadable: 'unreadable',
  unwritable: 'unwritable',
  corrupt: 'corrupt',
  unsupported_version: 'unsupported_version',
  wrong_key: 'wrong_key',
  bad_key_file: 'bad_key_file',
  busy: 'busy',
  unknown_credential: 'unknown_credential',
  credential_exists: 'credential_exists',
  invalid_name: 'invalid_name',
  invalid_binding: 'invalid_binding',
  invalid_value: 'invalid_value',
  integrity: 'integrity',
} as const;
export type VaultFailureCode = ValueOf<typeof VaultFailureCode>;

export interface VaultFailure {
  code: VaultFailureCode;
  /** One plain sentence; never contains a secret value. */
  message: string;
}

/** A gate transition; the engine records it as a `gate_changed` ledger event. */
export interface GateChange {
  locked: boolean;
  by: string;
  /** Milliseconds since the epoch, from the injected clock. */
  at: number;
}

/** Listing entry: everything about a credential except its value. */
export interface CredentialInfo {
  name: string;
  type: CredentialType;
  /** For `basic`: the username (not secret). For `api_key`: the header name. */
  username?: string;
  header_name?: string;
  bindings: Binding[];
  created_at: number;
  rotated_at: number | null;
}

/** Credential names: what follows `vault:` in a reference. */
export const CREDENTIAL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

// The shortest secret the redactor can protect: the vault refuses shorter ones (core/redact.ts).
export { MIN_SECRET_LENGTH } from '../core/redact.js';
