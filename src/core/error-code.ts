// Evidence `error_code`s, closed per transport: a transport's evidence is typed with its own union
// (`Evidence<HttpErrorCode>`, …), so a code it does not declare here does not compile. A code is a
// diagnostic: classify() never decides by it, and the envelope never shows it.
//
// Two kinds of code:
//   - Candor's own, listed below as const objects (their values are what the ledger records);
//   - codes reported from outside and recorded verbatim (Node's or undici's `error.code`, ssh2's
//     error level, the signal a remote process died of, the refusal the remote wrapper printed):
//     an open set Candor does not own, so they are a branded `ReportedCode` that only
//     `reportedCode()` makes — a code written by hand cannot pass as one, and mapping them to a
//     closed set would change what existing ledgers say about the same failure.
//
// Reading is tolerant: evidence recorded by older versions may hold any string, and
// `evidenceSchema` keeps accepting it as recorded (no byte of a ledger is rewritten or mapped).

declare const reported: unique symbol;

/** A code reported from outside Candor, kept verbatim (see the file comment). */
export type ReportedCode = string & { readonly [reported]: true };

/** Marks `code` as reported by the platform, a library or the remote peer (never a literal). */
export function reportedCode(code: string): ReportedCode {
  return code as ReportedCode;
}

/** The HTTP transport's own codes (src/http). */
export const HttpErrorCode = {
  /** The request path would leave the destination's origin: refused before any connection. */
  path_leaves_origin: 'CANDOR_PATH_LEAVES_ORIGIN',
  /** The answer went past its size cap and reading stopped there (`overLimit: 'cut'`). */
  body_over_limit: 'CANDOR_BODY_OVER_LIMIT',
} as const;
export type HttpErrorCode = (typeof HttpErrorCode)[keyof typeof HttpErrorCode] | ReportedCode;

/** The SSH transport's own codes (src/ssh): the connection, the marker wrapper, the marker. */
export const SshErrorCode = {
  /** The action names a host reference the inventory does not hold. */
  unknown_host_ref: 'unknown_host_ref',
  /** The private key could not be parsed (nothing was sent). */
  key_unparsable: 'SSH_KEY_UNPARSABLE',
  /** The server refused to open a session channel. */
  channel_open_failure: 'SSH_CHANNEL_OPEN_FAILURE',
  /** The server refused the exec request. */
  exec_failed: 'SSH_EXEC_FAILED',
  /** The operation id cannot name a marker. */
  invalid_operation_id: 'invalid_operation_id',
  /** A set_state action without its convergence check. */
  missing_convergence_check: 'missing_convergence_check',
  /** The wrapper call could not be built (the tail is wrapper.ts's problem code). */
  invalid_request_bad_nonce: 'invalid_request_bad_nonce',
  invalid_request_bad_output_cap: 'invalid_request_bad_output_cap',
  invalid_request_bad_secret_env_name: 'invalid_request_bad_secret_env_name',
  invalid_request_nul_in_value: 'invalid_request_nul_in_value',
  /** The channel closed without an exit status or signal. */
  no_exit_status: 'no_exit_status',
  /** The wrapper's report names another exit status than the channel's. */
  wrapper_exit_mismatch: 'wrapper_exit_mismatch',
  /** A report of a kind this request cannot produce. */
  wrapper_unexpected_report: 'wrapper_unexpected_report',
  /** The report went past the output cap and was dropped. */
  wrapper_report_too_long: 'wrapper_report_too_long',
  /** The report could not be read (wrapper.ts `parseWrapperOutput` failures). */
  wrapper_no_report: 'wrapper_no_report',
  wrapper_bad_line: 'wrapper_bad_line',
  wrapper_bad_frame: 'wrapper_bad_frame',
  wrapper_no_exit_line: 'wrapper_no_exit_line',
  /** The marker says the command started; its process still runs, or is gone. */
  marker_started_alive: 'marker_started_alive',
  marker_started_gone: 'marker_started_gone',
  /** The marker was claimed and the command not yet started. */
  marker_claimed: 'marker_claimed',
  /** No marker at its location now (not proof that nothing ran). */
  marker_absent: 'marker_absent',
} as const;
export type SshErrorCode = (typeof SshErrorCode)[keyof typeof SshErrorCode] | ReportedCode;

/** The upstream MCP transport's own codes (src/upstream). */
export const McpErrorCode = {
  /** The action names an upstream that is not configured. */
  unknown_upstream: 'unknown_upstream',
  /** A message from the upstream went past `max_message_bytes`; the connection was closed. */
  message_too_large: 'UPSTREAM_MESSAGE_TOO_LARGE',
  /** The call ended without an answer and without an error to name. */
  no_answer: 'no_answer',
  /** The call failed with an error that carries no code. */
  error: 'error',
  // Why the upstream's credential gave no token (upstream/oauth/session.ts `CredentialReason`,
  // except `locked`, which is evidence of its own: `blocked: gate_locked`).
  authorization_server_unreachable: 'authorization_server_unreachable',
  not_logged_in: 'not_logged_in',
  login_required: 'login_required',
  refresh_refused: 'refresh_refused',
  store_unavailable: 'store_unavailable',
  exchange_refused: 'exchange_refused',
  no_subject_token: 'no_subject_token',
  lookup_needs_caller: 'lookup_needs_caller',
} as const;
export type McpErrorCode = (typeof McpErrorCode)[keyof typeof McpErrorCode] | ReportedCode;

/**
 * The engine's own codes, for evidence it writes itself when nothing reached a transport: why a
 * credential or secret gave nothing (engine/ports.ts `CredentialResult`, except `locked`), or a
 * lookup that has nothing to run.
 */
export const EngineErrorCode = {
  unknown_ref: 'unknown_ref',
  binding_mismatch: 'binding_mismatch',
  unavailable: 'unavailable',
  /** An SSH set_state lookup without a convergence check. */
  no_check: 'no_check',
} as const;
export type EngineErrorCode = (typeof EngineErrorCode)[keyof typeof EngineErrorCode];

/**
 * Every code evidence may carry when it is written. The scripted transport (src/fakes) has no
 * codes of its own: it replays the evidence its script gives, typed with this union.
 */
export type EvidenceErrorCode = HttpErrorCode | SshErrorCode | McpErrorCode | EngineErrorCode;
