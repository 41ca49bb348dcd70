// What a transport observed about one attempt, and what the destination's contract promises.
// Both are plain data so that the classifier is one pure function and the ledger can record them.
import { z } from 'zod';
import type { EvidenceErrorCode } from './error-code.js';
import { ActionClass, valuesOf } from './vocabulary.js';

/** How far the exchange got. Decided from transport events, never from error message text. */
export const Phase = {
  /** No request byte left this process (DNS, refused, connect timeout, TLS, credential fetch, gate). */
  not_sent: 'not_sent',
  /** Request bytes were handed to the socket (or the SSH exec request was sent); no response yet. */
  request_sent: 'request_sent',
  /** Response status and headers arrived; the body is complete. */
  response_complete: 'response_complete',
  /** Response status and headers arrived; the body was cut (FIN, RST, stall, deadline). */
  response_cut: 'response_cut',
} as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

/** Local reasons an attempt stopped; codes, never prose. */
export const LocalError = {
  dns: 'dns',
  connect_refused: 'connect_refused',
  connect_timeout: 'connect_timeout',
  tls: 'tls',
  credential_unavailable: 'credential_unavailable',
  host_key_mismatch: 'host_key_mismatch',
  ssh_auth_rejected: 'ssh_auth_rejected',
  deadline: 'deadline',
  cancelled: 'cancelled',
  connection_reset: 'connection_reset',
  connection_closed: 'connection_closed',
  parse_error: 'parse_error',
  /** Our own code failed after dispatch began. */
  execution_error: 'execution_error',
  other: 'other',
} as const;
export type LocalError = (typeof LocalError)[keyof typeof LocalError];

/** Result of checking a response body against the action's declared response contract. */
export const ContractCheck = {
  valid: 'valid',
  /** The body breaks the contract (bad type, missing id, HTML, truncated JSON, duplicates…). */
  violated: 'violated',
  /** The body is the destination's documented "not applied" failure shape. */
  documented_failure: 'documented_failure',
  /** No body check was possible or declared. */
  unchecked: 'unchecked',
} as const;
export type ContractCheck = (typeof ContractCheck)[keyof typeof ContractCheck];

export const evidenceSchema = z.object({
  phase: z.enum(valuesOf(Phase)),
  /** Stopped by Candor itself before any connection. */
  blocked: z.enum(['gate_locked', 'approval_denied']).optional(),
  local_error: z.enum(valuesOf(LocalError)).optional(),
  /**
   * Transport error code (e.g. `ECONNREFUSED`, `UND_ERR_SOCKET`), for diagnostics. Read as any
   * string, as recorded: older ledgers may hold codes outside today's unions (core/error-code.ts).
   */
  error_code: z.string().optional(),
  /** Whether the response status line itself was unparseable or misframed. */
  response_misframed: z.boolean().optional(),
  status: z.number().int().min(100).max(999).optional(),
  www_authenticate: z.boolean().optional(),
  retry_after_ms: z.number().int().nonnegative().optional(),
  idempotent_replay: z.boolean().optional(),
  /**
   * The destination answered a retry under the same idempotency key with "the original request is
   * still in progress" (IETF idempotency-key draft: 409). Not a rejection: the outcome is pending.
   */
  idempotency_in_progress: z.boolean().optional(),
  contract_check: z.enum(valuesOf(ContractCheck)).optional(),
  /** SSH: exit status received from the remote command (null when the channel closed without one). */
  exit_status: z.number().int().nullable().optional(),
  /**
   * MCP upstream: what answered the request once it was written — a tool result, a tool result
   * flagged `isError`, a JSON-RPC error refusing the request (parse error, invalid request,
   * unknown method or tool, invalid params), or another JSON-RPC error (internal or server-defined:
   * the tool's code may have failed halfway). Absent when no answer arrived.
   */
  mcp_reply: z.enum(['result', 'tool_error', 'rpc_error', 'rpc_internal_error']).optional(),
  /** Reconciliation: how many remote records matched the operation. */
  reconciliation_matches: z.number().int().nonnegative().optional(),
});
/** Evidence as read back (a ledger, a script, anything classify() is given): any recorded code. */
export type RecordedEvidence = z.infer<typeof evidenceSchema>;
/**
 * Evidence as it is written: its `error_code` from a closed union (core/error-code.ts). Each
 * transport narrows `C` to its own union, so a code it does not declare does not compile.
 */
export type Evidence<C extends EvidenceErrorCode = EvidenceErrorCode> = Omit<
  RecordedEvidence,
  'error_code'
> & { error_code?: C };

export const FiveXxMeaning = {
  /** Default: a 5xx tells nothing about whether the work happened. */
  unknown: 'unknown',
  /** The destination documents that any 5xx means the work was not applied. */
  not_applied: 'not_applied',
} as const;
export type FiveXxMeaning = (typeof FiveXxMeaning)[keyof typeof FiveXxMeaning];

export const contractSchema = z.object({
  action_class: z.enum(valuesOf(ActionClass)),
  /** The destination documents and honours the idempotency key Candor sends. */
  idempotency_honoured: z.boolean().default(false),
  /** A lookup exists that finds the remote record by correlation id or client reference. */
  reconciliation: z.boolean().default(false),
  five_xx: z.enum(valuesOf(FiveXxMeaning)).default('unknown'),
  /** Delay used for a 429 that carries no usable Retry-After. */
  default_retry_after_ms: z.number().int().nonnegative().default(1000),
});
export type Contract = z.input<typeof contractSchema>;
export type ResolvedContract = z.output<typeof contractSchema>;

/** `Retry-After` as milliseconds from `nowMs`: delta-seconds or an HTTP-date; undefined if unusable. */
export function parseRetryAfter(
  value: string | undefined | null,
  nowMs: number,
): number | undefined {
  if (value === undefined || value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Math.min(Number(v), 86_400) * 1000;
  const date = Date.parse(v);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - nowMs);
}
