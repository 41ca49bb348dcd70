// The MCP gateway (published as `candor/mcp`): configured actions as tools whose results are
// Candor envelopes, over stdio or Streamable HTTP on loopback.
export { createGateway, resultOf, type Gateway, type GatewayOptions } from './gateway.js';
export {
  composeGateway,
  startGateway,
  type ComposeOptions,
  type RunningGateway,
  type StartFailure,
  type StartOptions,
  type StartResult,
} from './start.js';
export { serveHttp, MCP_PATH, type HttpGateway } from './http.js';
export { actionTool, annotationsFor, builtinTools, BUILTIN, type BuiltinName } from './tools.js';
