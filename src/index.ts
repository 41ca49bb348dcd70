// The root entry: pure vocabulary, envelope, classifier and the library API. It loads no database or
// SSH driver (those live behind the ./ledger/sqlite, ./ledger/postgres and ./ssh subpaths).
export {
  ActionClass,
  Category,
  DispatchState,
  EventKind,
  OperationState,
  RemoteEffect,
  Retry,
  RetryDecision,
  RetryReason,
} from './core/vocabulary.js';
export { envelopeSchema, envelopeJsonSchema, type Envelope } from './core/envelope.js';
// The classifier's rule tables (STATUS_RULES, NOT_SENT_RULES, …) are internal: tests import them from
// src/core; test/entry.test.ts fails when one of them (or any other internal name) leaks here.
export { classify, type Classification } from './core/classify.js';
export {
  ContractCheck,
  LocalError,
  Phase,
  type Contract,
  type Evidence,
  type RecordedEvidence,
} from './core/evidence.js';
// Evidence codes are closed per transport; a custom transport marks a platform's code as reported.
export {
  EngineErrorCode,
  HttpErrorCode,
  McpErrorCode,
  reportedCode,
  SshErrorCode,
  type EvidenceErrorCode,
  type ReportedCode,
} from './core/error-code.js';
export { idempotencyKeyFor } from './core/fingerprint.js';
export { manualClock, systemClock, type Clock } from './core/time.js';
export type { LedgerStore, LedgerQuery, Durability } from './ledger/store.js';
export type {
  ListingFacets,
  OperationRow,
  OperationsPage,
  OperationsQuery,
  SessionSummary,
} from './ledger/listing.js';
export type { NewEvent, StoredEvent } from './ledger/events.js';
export {
  createRuntime,
  UsageError,
  type Runtime,
  type RuntimeOptions,
  type RunOptions,
  type RecoveryItem,
} from './runtime.js';
export type { RetryEvent } from './engine/context.js';
export {
  defineAction,
  type ActionDefinition,
  type Destination,
  type HttpDestination,
  type SshDestination,
} from './engine/action.js';
export { isUsageError, type UsageErrorCode } from './core/errors.js';
export type {
  Dispatched,
  DispatchOptions,
  Looked,
  LookupPrepared,
  Lookups,
  Prepared,
  Transport,
  Transports,
} from './core/transport.js';
export { defineSshAction } from './engine/ssh-action.js';
export {
  staticCredentials,
  type CredentialProvider,
  type Gate,
  type Redactor,
} from './engine/ports.js';
export { openLedger, DEFAULT_LEDGER_URL } from './ledger/open.js';
export { projectOperation, type OperationView } from './ledger/projection.js';
export { createRedactor } from './core/redact.js';
export { openTelemetry, type OpenTelemetryOptions } from './telemetry/otel.js';
export type { CallTrace, Telemetry } from './telemetry/port.js';
export { DEFAULT_LEASE_MS, type OwnerLeases } from './ledger/lease.js';
