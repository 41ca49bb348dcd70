// The engine's one way to look at a destination: a reconciliation lookup handed to the
// transport's `lookup` (core/transport.ts), with the caller's signal, answering what the
// transport found, typed per kind — never a dispatched reply read back by hand.
import type {
  HttpFound,
  HttpLookupPrepared,
  Looked,
  McpPrepared,
  McpToolReply,
  SshFound,
  SshLookupPrepared,
} from '../core/transport.js';
import { TransportMissing } from './attempt.js';
import type { EngineContext } from './context.js';
import { withTraceparent } from './trace.js';

type WithTransports = Pick<EngineContext, 'transports'>;

export function lookupHttp(
  ctx: WithTransports,
  prepared: HttpLookupPrepared,
  signal: AbortSignal | undefined,
): Promise<Looked<HttpFound>> {
  const t = ctx.transports.http;
  if (!t) throw new TransportMissing('http');
  // Like an attempt, a lookup carries the call's traceparent (not part of any fingerprint).
  return t.lookup(withTraceparent(prepared), { signal });
}

export function lookupSsh(
  ctx: WithTransports,
  prepared: SshLookupPrepared,
  signal: AbortSignal | undefined,
): Promise<Looked<SshFound>> {
  const t = ctx.transports.ssh;
  if (!t) throw new TransportMissing('ssh');
  return t.lookup(prepared, { signal });
}

export function lookupMcp(
  ctx: WithTransports,
  prepared: McpPrepared,
  signal: AbortSignal | undefined,
): Promise<Looked<McpToolReply>> {
  const t = ctx.transports.mcp;
  if (!t) throw new TransportMissing('mcp');
  return t.lookup(prepared, { signal });
}
