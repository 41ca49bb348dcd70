// The MCP gateway (published as `candor/mcp`): configured actions as tools whose results are
// Candor envelopes, over stdio or Streamable HTTP on loopback. Only what a program embedding the
// gateway needs: build it (createGateway, or composeGateway / startGateway from a candor.yaml),
// serve it (serveHttp, GatewayStdioTransport) and the option defaults. How tools are listed and
// results rendered stays inside (src/mcp/tools.ts, gateway.ts); the surface is pinned by
// test/exports.snapshot.txt.
export { createGateway, type CallContext, type Gateway, type GatewayOptions } from './gateway.js';
export {
  composeGateway,
  startGateway,
  type ComposeGatewayOptions,
  type RunningGateway,
  type StartFailure,
  type StartOptions,
  type StartResult,
} from './start.js';
export {
  DEFAULT_MAX_BODY_BYTES,
  MCP_PATH,
  serveHttp,
  type HttpGateway,
  type HttpOptions,
} from './http.js';
export { DEFAULT_MAX_LINE_BYTES, GatewayStdioTransport, type StdioOptions } from './stdio.js';
