// The MCP adapter of the transport port (src/core/transport.ts): one `tools/call` to an upstream
// MCP server, reported as evidence for classify():
//   not connected / spawn failed / not initialized / refused  -> not_sent
//   written, then the child exited or the stream dropped      -> request_sent, connection_closed
//   written, then the deadline passed / the caller cancelled  -> request_sent, deadline / cancelled
//   a JSON-RPC refusal for this request id (-32700..-32602)   -> mcp_reply rpc_error
//   another JSON-RPC error (a handler threw: -32603, -32000…)  -> mcp_reply rpc_internal_error
//   a result with isError                                     -> mcp_reply tool_error
//   a result whose structuredContent breaks the outputSchema  -> mcp_reply result, contract violated
//   OAuth (src/upstream/oauth/session.ts), before the tool request was accepted:
//     no token to send: not logged in, login required, refresh refused, token exchange refused
//       (per-principal: this caller's own token only) -> not_sent,
//       credential_unavailable (escalate: a person must log in again); vault locked -> gate_locked;
//       the authorization server unreachable -> not_sent (a local failure, allowed)
//     the upstream answered 401 (after one refresh) / 403 -> that status (authentication_failed /
//       authorization_denied, nothing done); insufficient_scope names the scope
//   Each with `data.refusal: { code, detail }` saying what a person must do.
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/client/validators/ajv';
import { McpErrorCode } from '../core/error-code.js';
import type { Evidence } from '../core/evidence.js';
import type {
  Dispatched,
  Looked,
  McpPrepared,
  McpToolReply,
  Transport,
} from '../core/transport.js';
import type { CallFacts, UpstreamConnection } from './connection.js';
import type { AuthFacts, CredentialReason } from './oauth/session.js';

/** What a person must do after an auth refusal: a stable code and one sentence. */
export interface AuthRefusal {
  code: string;
  detail: string;
  /** insufficient_scope: the scope the upstream asked for. */
  scope?: string;
}

/** Why the upstream's credential gave no token, as the evidence code (`locked` is `blocked`). */
const CREDENTIAL_CODE = {
  authorization_server_unreachable: McpErrorCode.authorization_server_unreachable,
  not_logged_in: McpErrorCode.not_logged_in,
  login_required: McpErrorCode.login_required,
  refresh_refused: McpErrorCode.refresh_refused,
  store_unavailable: McpErrorCode.store_unavailable,
  exchange_refused: McpErrorCode.exchange_refused,
  no_subject_token: McpErrorCode.no_subject_token,
  lookup_needs_caller: McpErrorCode.lookup_needs_caller,
} as const satisfies Record<Exclude<CredentialReason, 'locked'>, McpErrorCode>;

function authEvidence(f: AuthFacts): Evidence<McpErrorCode> {
  if (f.kind === 'refused')
    return { phase: 'response_complete', status: f.status, www_authenticate: true };
  if (f.reason === 'locked') return { phase: 'not_sent', blocked: 'gate_locked' };
  if (f.reason === 'authorization_server_unreachable')
    return {
      phase: 'not_sent',
      local_error: 'connect_refused',
      error_code: CREDENTIAL_CODE[f.reason],
    };
  return {
    phase: 'not_sent',
    local_error: 'credential_unavailable',
    error_code: CREDENTIAL_CODE[f.reason],
  };
}

function authRefusal(f: AuthFacts, upstream: string): AuthRefusal {
  const login =
    (f.kind === 'credential' ? f.login : undefined) ?? `candor upstream login ${upstream}`;
  if (f.kind === 'refused') {
    if (f.status === 403 && f.error === 'insufficient_scope')
      return {
        code: 'insufficient_scope',
        detail: `The upstream needs the scope ${f.scope ? JSON.stringify(f.scope) : '(unnamed)'}; a person must log in again to grant it: ${login}`,
        ...(f.scope ? { scope: f.scope } : {}),
      };
    return f.status === 401
      ? {
          code: 'token_rejected',
          detail: `The upstream rejected Candor's token, also after a refresh; a person must log in again: ${login}`,
        }
      : { code: 'forbidden', detail: 'The upstream refused permission for this call.' };
  }
  switch (f.reason) {
    case 'locked':
      return { code: 'vault_locked', detail: 'The vault is locked; no token is released.' };
    case 'authorization_server_unreachable':
      return {
        code: 'authorization_server_unreachable',
        detail: 'The token could not be refreshed: the authorization server did not answer.',
      };
    case 'store_unavailable':
      return { code: 'vault_unavailable', detail: 'The tokens cannot be read from the vault.' };
    case 'not_logged_in':
      return {
        code: 'login_required',
        detail: `${f.login && f.login !== `candor upstream login ${upstream}` ? 'This caller has' : 'Nobody has'} not logged in to this upstream yet; nothing was sent. A person must log in once: ${login}`,
      };
    case 'exchange_refused':
      return {
        code: 'token_exchange_refused',
        detail:
          "The authorization server refused to exchange the caller's token for this upstream (RFC 8693); nothing was sent. A person must check the caller's grants at the authorization server.",
      };
    case 'lookup_needs_caller':
      return {
        code: 'lookup_needs_caller',
        detail:
          "This upstream's tokens are per caller: the lookup runs only as the caller who made the operation (reconcile_operation through the team gateway); nothing was sent.",
      };
    case 'no_subject_token':
      return {
        code: 'token_exchange_refused',
        detail:
          'This caller presented no access token that could be exchanged for this upstream; nothing was sent. Call through the authenticated HTTP gateway, or a person logs in: ' +
          login,
      };
    case 'refresh_refused':
    case 'login_required':
      return {
        code: 'login_required',
        detail: `The authorization server refused to refresh the token; a person must log in again: ${login}`,
      };
  }
}

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
  /** One `tools/call`, with the tool's result (null without one) typed for lookups. */
  const exchange = async (
    p: McpPrepared,
    signal: AbortSignal | undefined,
  ): Promise<{ dispatched: Dispatched; result: McpToolReply | null }> => {
    const started_at = now();
    const upstream = options.upstreams.get(p.upstream);
    if (!upstream) {
      const dispatched: Dispatched = {
        evidence: {
          phase: 'not_sent',
          local_error: 'other',
          error_code: McpErrorCode.unknown_upstream,
        },
        data: null,
        diagnostics: { problem: `no upstream "${p.upstream}" is configured` },
        phases: { started_at, finished_at: now() },
      };
      return { dispatched, result: null };
    }
    const facts = await upstream.call(p.tool, p.arguments, {
      id: p.id,
      deadline_ms: p.deadline_ms,
      signal,
      ...(p.operation_caller !== undefined ? { operation_caller: p.operation_caller } : {}),
    });
    const finished_at = now();
    const { evidence, data, diagnostics } = read(facts, p.upstream);
    if (evidence.mcp_reply === 'result' && data && 'content' in data) {
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
        diagnostics['problem'] = 'no structuredContent although the tool declares an outputSchema';
      }
    }
    const dispatched: Dispatched = {
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
    return { dispatched, result: data && 'content' in data ? data : null };
  };
  return {
    kind: 'mcp',
    dispatch: async (p, { signal }) => (await exchange(p, signal)).dispatched,
    lookup: async (p, { signal }) => lookedUp(await exchange(p, signal)),
    binding(p) {
      return { upstream: p.upstream, tool: p.tool };
    },
  };
}

/**
 * A `tools/call` read as a lookup: the read tool's result (an `isError` one too: "no such file" is
 * how a read tool says absent, which the configured rule decides) is `found`; a JSON-RPC error, an
 * auth refusal or no answer is `failed`. Whether the result shows the effect is the rule's to say.
 */
function lookedUp({
  dispatched: d,
  result,
}: {
  dispatched: Dispatched;
  result: McpToolReply | null;
}): Looked<McpToolReply> {
  const base = { evidence: d.evidence, phases: d.phases };
  return d.evidence.phase === 'response_complete' && result
    ? { verdict: 'found', found: result, ...base }
    : { verdict: 'failed', ...base };
}

function read(
  facts: CallFacts,
  upstream: string,
): {
  evidence: Evidence<McpErrorCode>;
  data: McpToolReply | { refusal: AuthRefusal } | null;
  diagnostics: Record<string, unknown>;
} {
  switch (facts.stage) {
    case 'auth':
      return {
        evidence: authEvidence(facts.facts),
        data: { refusal: authRefusal(facts.facts, upstream) },
        diagnostics: { stage: facts.stage, auth: facts.facts },
      };
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
