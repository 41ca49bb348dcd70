// Public names of the vault: the encrypted credential store, credential references with their
// bindings, and the one redaction layer.
export {
  createKeyFile,
  DEFAULT_API_KEY_HEADER,
  initVault,
  listCredentials,
  listOAuthGrants,
  lockVault,
  openVault,
  present,
  type GateTransition,
  type KeySource,
  type SetCredentialInput,
  type Vault,
  type VaultListing,
  type VaultOptions,
} from './store.js';
export { DEFAULT_VAULT_PATH } from './file.js';
export type {
  NewOAuthGrant,
  OAuthClient,
  OAuthGrant,
  OAuthGrantInfo,
  VaultOAuth,
} from './oauth.js';
export { DEFAULT_SCRYPT, type ScryptParams } from './crypto.js';
export { bindingAdmits, formatBinding, parseBinding } from './binding.js';
export {
  createCredentialResolver,
  parseCredentialRef,
  type CredentialRef,
  type CredentialResolver,
  type EnvCredential,
  type ResolverOptions,
} from './resolve.js';
export { createRedactor, REDACTED, type Redactor } from '../core/redact.js';
export {
  CREDENTIAL_NAME,
  CredentialType,
  MIN_SECRET_LENGTH,
  ResolveFailureCode,
  VaultFailureCode,
  type Binding,
  type CredentialInfo,
  type Destination,
  type GateChange,
  type ResolvedCredential,
  type ResolveFailure,
  type Result,
  type VaultFailure,
} from './types.js';
