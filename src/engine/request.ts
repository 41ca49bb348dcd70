// What an attempt sends: the prepared request of the next attempt (for its destination's
// transport) and its fingerprint, which binds the request line, the headers that are not secret or
// volatile, the body and whatever else the transport says identifies it (SSH: host and check).
import { canonicalJson } from '../core/canonical.js';
import { requestFingerprint, sha256Hex } from '../core/fingerprint.js';
import { merged } from '../core/merge.js';
import type { HttpPrepared, McpPrepared, SshRunPrepared, Transport } from '../core/transport.js';
import type { OperationView } from '../ledger/projection.js';
import {
  httpDestination,
  type EngineAction,
  type Destination,
  type RequestContext,
  type RequestSpec,
} from './action.js';
import type { EngineContext } from './context.js';

/** A prepared attempt request, less its attempt id and credentials (added at dispatch). */
export type DraftRequest =
  Omit<HttpPrepared, 'id'> | Omit<SshRunPrepared, 'id'> | Omit<McpPrepared, 'id'>;

export interface PreparedAttempt {
  /** The request line as recorded and shown: the HTTP method, or `SSH`. */
  method: string;
  /** Path and query relative to the destination, or the SSH command. */
  target: string;
  /** The JSON body as the action built it (for the approval card), or undefined. */
  body: unknown;
  request: DraftRequest;
  fingerprint: string;
}

/** The request of the next attempt and its fingerprint. Throws when the action cannot build it. */
export function prepare<I, O>(
  ctx: Pick<EngineContext, 'transports'>,
  action: EngineAction<I, O>,
  input: I,
  view: Pick<OperationView, 'operation_id' | 'correlation_id' | 'idempotency_key'>,
): PreparedAttempt {
  const rctx: RequestContext = {
    operation_id: view.operation_id,
    correlation_id: view.correlation_id ?? view.operation_id,
    idempotency_key: view.idempotency_key,
  };
  const spec: RequestSpec = action.request(input, rctx);
  const dest = action.destination;
  const line = requestLine(dest, spec);
  const specHeaders = 'headers' in spec ? spec.headers : undefined;
  const specBody = 'body' in spec ? spec.body : 'arguments' in spec ? spec.arguments : undefined;
  const headers: Record<string, string> = merged(
    {
      accept: 'application/json',
      'x-correlation-id': rctx.correlation_id,
      'x-candor-call-id': rctx.correlation_id,
    },
    specHeaders ?? {},
  );
  let body: string | undefined;
  if (specBody !== undefined) {
    body = JSON.stringify(specBody);
    headers['content-type'] ??= 'application/json';
  }
  const idem = httpDestination(dest)?.idempotency;
  if (idem && view.idempotency_key) headers[idem.header.toLowerCase()] = view.idempotency_key;
  const base = requestFingerprint({
    method: line.method,
    authority_ref: dest.authority_ref,
    target: line.target,
    headers,
    body: specBody,
  });
  const request: DraftRequest =
    dest.kind === 'mcp'
      ? {
          kind: 'mcp',
          upstream: dest.upstream,
          tool: dest.tool,
          arguments: (spec as { arguments: Record<string, unknown> }).arguments,
          deadline_ms: dest.deadline_ms,
        }
      : dest.kind === 'ssh'
        ? {
            kind: 'ssh',
            op: 'run',
            host_ref: dest.host_ref,
            command: line.target,
            family: action.class,
            operation_id: view.operation_id,
            deadline_ms: dest.deadline_ms,
            ...(dest.check ? { check: dest.check(input) } : {}),
            ...(dest.secret_env ? { secret_env: dest.secret_env(input) } : {}),
          }
        : {
            kind: 'http',
            origin: dest.origin,
            method: line.method.toUpperCase(),
            path: line.target,
            headers,
            ...(body !== undefined ? { body } : {}),
            ...(action.timeouts ? { timeouts: action.timeouts } : {}),
            // A stale pooled socket can only cost a read or a write under an honoured key a retry.
            reuse_connection:
              action.class === 'read' ||
              (dest.idempotency?.honoured === true && view.idempotency_key !== null),
          };
  return {
    method: line.method.toUpperCase(),
    target: line.target,
    body: specBody,
    request,
    fingerprint: bound(ctx, request, base),
  };
}

/** The base fingerprint bound to the transport's own identification of the request, if any. */
function bound(ctx: Pick<EngineContext, 'transports'>, request: DraftRequest, base: string) {
  const transport = ctx.transports[request.kind] as Transport | undefined;
  if (!transport?.binding) return base;
  const binding = transport.binding({ ...request, id: '' });
  return `sha256:${sha256Hex(canonicalJson({ base, ...binding }))}`;
}

/**
 * The request line as the ledger records it: the HTTP method and the path, or `SSH` and the
 * command. Throws when the spec does not fit the destination's transport.
 */
export function requestLine(
  dest: Destination,
  spec: RequestSpec,
): { method: string; target: string } {
  if (dest.kind === 'mcp') {
    if (!('arguments' in spec) || typeof spec.arguments !== 'object' || spec.arguments === null)
      throw new TypeError('an MCP action request must carry the tool arguments');
    return { method: 'MCP', target: dest.tool };
  }
  return dest.kind === 'ssh'
    ? { method: 'SSH', target: commandOf(spec) }
    : { method: methodOf(spec), target: (spec as { path: string }).path };
}

function commandOf(spec: RequestSpec): string {
  if (!('command' in spec) || typeof spec.command !== 'string')
    throw new TypeError('an SSH action request must name a command');
  return spec.command;
}

function methodOf(spec: RequestSpec): string {
  if (!('method' in spec) || typeof spec.method !== 'string')
    throw new TypeError('an HTTP action request must name a method');
  return spec.method;
}
