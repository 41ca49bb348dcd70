// The `./ssh` subpath: SSH transport (ssh2), marker protocol and host inventory. Kept off the root
// entry so that importing `candor` never loads the SSH driver.
export {
  FINGERPRINT_PATTERN,
  HOST_REF_PATTERN,
  KEY_REF_PATTERN,
  hostEntrySchema,
  hostKeyFingerprint,
  hostKeySchema,
  inventorySchema,
  lookupHost,
  parseInventory,
  pinnedHostVerifier,
  type HostEntry,
  type HostEntryInput,
  type Inventory,
  type InventoryIssue,
  type ResolveKey,
} from './inventory.js';
export { type SshPhaseName, type SshPhases } from './exec.js';
export {
  checkSsh,
  familyMode,
  markerEvidence,
  reconcileSsh,
  runSsh,
  sshContract,
  type CheckSshOptions,
  type ReconcileSshOptions,
  type SshCheckResult,
  type RunSshOptions,
  type SshFamilyMode,
  type SshReconcileResult,
  type SshRunResult,
} from './transport.js';
export {
  DEFAULT_OUTPUT_CAP,
  SECRET_ENV_NAME_PATTERN,
  WRAPPER_EXEC,
  WRAPPER_IN_PROGRESS_STATUS,
  WRAPPER_PROTOCOL,
  WRAPPER_REFUSED_STATUS,
  WRAPPER_SCRIPT,
  parseWrapperOutput,
  shQuote,
  wrapperCallProblem,
  wrapperRequest,
  type MarkerState,
  type WrapperCall,
  type WrapperReport,
} from './wrapper.js';
export { OPERATION_ID_PATTERN } from '../core/ids.js';
