// The `./ssh` subpath: run, check and reconcile a command over SSH under the marker protocol, and
// the host inventory. Kept off the root entry so that importing `candor` never loads the SSH
// driver. The surface is pinned by test/exports.snapshot.txt.
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
  reconcileSsh,
  runSsh,
  sshContract,
  type CheckSshOptions,
  type ReconcileSshOptions,
  type SshCheckResult,
  type RunSshOptions,
  type SshReconcileResult,
  type SshRunResult,
} from './transport.js';
// The option limits a caller may need; the remote wrapper itself (its script, protocol, statuses,
// the parser of its report and the shell quoting) is how runSsh works, not part of this surface.
export { DEFAULT_OUTPUT_CAP, SECRET_ENV_NAME_PATTERN, type MarkerState } from './wrapper.js';
export { OPERATION_ID_PATTERN } from '../core/ids.js';
