// The fault-injecting fake HTTP service (DESIGN.md §4) and a scripted transport for testing actions
// without sockets, published as `candor/testing`.
export { startFakeService, type FakeService, type FakeServiceOptions } from './service.js';
export {
  faultSchema,
  parseFault,
  pathMatches,
  BeforeBytesVariant,
  MalformedVariant,
  type ArmedFault,
  type Fault,
  type FaultPhase,
  type FaultSpec,
} from './faults.js';
export { CloseKind, TruthEventKind, type TruthEvent } from './truth.js';
export {
  RESOURCE_KINDS,
  IdempotencyMode,
  type Resource,
  type ResourceKind,
  type ResourceKindSpec,
} from './resources.js';
export { tokenSpecSchema, type TokenSpec, type TokenSummary } from './auth.js';
export {
  fixtureCaseSchema,
  fixtureFileSchema,
  fixtureFault,
  loadFixtureDir,
  parseFixtureText,
  type FixtureCase,
  type FixtureFile,
} from './fixtures.js';
export { lookupRefusingInvalid } from './unreachable.js';
export {
  httpRequest,
  rawExchange,
  type RawEnd,
  type RawOptions,
  type RawResult,
} from './raw-client.js';
export {
  startSshd,
  startCutProxy,
  closedPort,
  sshdSkipReason,
  sshdUnavailableReason,
  SSHD_PATH,
  type SshdFixture,
  type CutProxy,
} from './sshd.js';
export {
  scriptedHttpTransport,
  scriptedSshTransport,
  scriptedMcpTransport,
  type ScriptStep,
  type ScriptedTransport,
  type ScriptedTransportOptions,
} from './scripted-transport.js';
