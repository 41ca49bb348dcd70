// The gateway configuration (candor.yaml): schema, loader and the actions built from it.
export {
  configSchema,
  configJsonSchema,
  type ActionConfig,
  type CredentialConfig,
  type DestinationConfig,
  type GatewayConfig,
} from './schema.js';
export {
  loadConfig,
  parseConfig,
  type LoadedConfig,
  type LoadFailure,
  type LoadResult,
} from './load.js';
export { formatIssue, type ConfigIssue } from './locate.js';
export {
  BUILTIN_TOOLS,
  NO_CREDENTIAL,
  buildActions,
  checkConfig,
  type ConfiguredAction,
} from './actions.js';
export { configCredentials, type ConfigCredentialOptions } from './credentials.js';
