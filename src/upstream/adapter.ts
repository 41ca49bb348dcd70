// The MCP adapter of the transport port (src/core/transport.ts): one `tools/call` to an upstream
// MCP server, reported as evidence for classify():
//   not connected / spawn failed / not initialized / refused  -> not_sent
//   written, then the child exited or the stream dropped      -> request_sent, connection_closed
//   written, then the deadline passed / the caller cancelled  -> request_sent, deadline / cancelled
//   a JSON-RPC refusal for this request id (-32700..-32602)   -> mcp_reply rpc_error
//   another JSON-RPC error (a handler threw: -32603, -32000…)  -> mcp_reply rpc_internal_error
//   a result with isError                                     -> mcp_reply tool_error
//   a result whose structuredContent breaks the outputSchema  -> mcp_reply result, contract violated
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/client/validators/ajv';
import type { Evidence } from '../core/evidence.js';
import type { Dispatched, McpPrepared, McpToolReply, Transport } from '../core/transport.js';
import type { CallFacts, UpstreamConnection } from './connection.js';

export interface McpTransportOptions {
  upstreams: ReadonlyMap<string, UpstreamConnection>;
  /** The upstream tool's outputSchema from its latest listing, if it declares one. */
  outputSchemaOf?: (upstream: string, tool: string) => Record<string, unknown> | undefined;
  now?: () => number;
}

/**
 * JSON-RPC errors that refuse the request before any tool code runs: parse error, invalid request,
 * method not found, invalid params (which MCP servers also use for an unknown tool).
 */
const REFUSAL_CODES: ReadonlySet<number> = new Set([-32700, -32600, -32601, -32602]);

export function mcpTransport(options: McpTransportOptions): Transport<McpPrepared> {
  const now = options.now ?? Date.now;
  const validator = new AjvJsonSchemaValidator();
  return {
    kind: 'mcp',
    async dispatch(p, { signal }): Promise<Dispatched> {
      const started_at = now();
      const upstream = options.upstreams.get(p.upstream);
      if (!upstream) {
        return {
          evidence: { phase: 'not_sent', local_error: 'other', error_code: 'unknown_upstream' },
          data: null,
          diagnostics: { problem: `no upstream "${p.upstream}" is configured` },
          phases: { started_at, finished_at: now() },
        };
      }
      const facts = await upstream.call(p.tool, p.arguments, {
        id: p.id,
        deadline_ms: p.deadline_ms,
        signal,
      });
      const finished_at = now();
      const { evidence, data, diagnostics } = read(facts);
      if (evidence.mcp_reply === 'result' && data) {
        const schema = options.outputSchemaOf?.(p.upstream, p.tool);
        if (schema && data.structuredContent !== undefined) {
          try {
            const v = validator.getValidator(schema)(data.structuredContent);
            evidence.contract_check = v.valid ? 'valid' : 'violated';
            if (!v.valid) diagnostics['problem'] = `structuredContent: ${v.errorMessage}`;
          } catch {
            evidence.contract_check = 'unchecked';
          }
        } else if (schema && data.structuredContent === undefined) {
          // A tool that declares an outputSchema must return structured content (MCP spec).
          evidence.contract_check = 'violated';
          diagnostics['problem'] =
            'no structuredContent although the tool declares an outputSchema';
        }
      }
      return {
        evidence,
        data,
        diagnostics,
        phases: {
          started_at,
          ...(facts.stage === 'written' || facts.stage === 'answered'
            ? { request_sent_at: started_at }
            : {}),
          finished_at,
        },
      };
    },
    binding(p) {
      return { upstream: p.upstream, tool: p.tool };
    },
  };
}

function read(facts: CallFacts): {
  evidence: Evidence;
  data: McpToolReply | null;
  diagnostics: Record<string, unknown>;
} {
  switch (facts.stage) {
    case 'not_connected':
      return {
        evidence: {
          phase: 'not_sent',
          local_error: 'connect_refused',
          error_code: facts.error_code,
        },
        data: null,
        diagnostics: { stage: facts.stage, error_code: facts.error_code },
      };
    case 'not_written':
      return {
        evidence: { phase: 'not_sent', local_error: 'other', error_code: facts.error_code },
        data: null,
        diagnostics: { stage: facts.stage, error_code: facts.error_code },
      };
    case 'written':
      return {
        evidence: {
          phase: 'request_sent',
          local_error:
            facts.ended === 'closed'
              ? 'connection_closed'
              : facts.ended === 'deadline'
                ? 'deadline'
                : facts.ended === 'cancelled'
                  ? 'cancelled'
                  : 'other',
          error_code: facts.error_code,
        },
        data: null,
        diagnostics: { stage: facts.stage, ended: facts.ended, error_code: facts.error_code },
      };
    case 'answered': {
      const m = facts.message;
      if (m.error) {
        return {
          evidence: {
            phase: 'response_complete',
            mcp_reply: REFUSAL_CODES.has(m.error.code) ? 'rpc_error' : 'rpc_internal_error',
          },
          data: null,
          diagnostics: { stage: facts.stage, rpc_error: m.error },
        };
      }
      const r = (m.result ?? {}) as Partial<McpToolReply>;
      const reply: McpToolReply = {
        content: Array.isArray(r.content) ? r.content : [],
        ...(r.structuredContent !== undefined ? { structuredContent: r.structuredContent } : {}),
        isError: r.isError === true,
      };
      return {
        evidence: {
          phase: 'response_complete',
          mcp_reply: reply.isError ? 'tool_error' : 'result',
        },
        data: reply,
        diagnostics: { stage: facts.stage, ...(reply.isError ? { tool_error: reply } : {}) },
      };
    }
  }
}
