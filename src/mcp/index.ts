// The MCP gateway (published as `candor/mcp`): configured actions as tools whose results are
// Candor envelopes, over stdio or Streamable HTTP on loopback.
export {
  createGateway,
  currentCall,
  headline,
  resultOf,
  type CallContext,
  type Gateway,
  type GatewayOptions,
} from './gateway.js';
export {
  composeGateway,
  startGateway,
  type ComposeGatewayOptions,
  type ComposeGatewayOptions as ComposeOptions,
  type RunningGateway,
  type StartFailure,
  type StartOptions,
  type StartResult,
} from './start.js';
export {
  DEFAULT_MAX_BODY_BYTES,
  MCP_PATH,
  originAllowed,
  serveHttp,
  type HttpGateway,
  type HttpOptions,
} from './http.js';
export { DEFAULT_MAX_LINE_BYTES, GatewayStdioTransport, type StdioOptions } from './stdio.js';
export {
  actionTool,
  annotationsFor,
  builtinTools,
  BUILTIN,
  outputSchema,
  titleOf,
  type BuiltinName,
} from './tools.js';
