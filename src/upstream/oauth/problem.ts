// Why an OAuth step could not be done: a stable code and one sentence (never a token, never a
// server's raw body). Expected outcomes are returned, not thrown (STYLE.md).

export type OAuthProblemCode =
  | 'no_auth_required'
  | 'unreachable'
  | 'resource_mismatch'
  | 'no_authorization_server'
  | 'discovery_failed'
  | 'issuer_mismatch'
  | 'pkce_unsupported'
  | 'no_client'
  | 'registration_rejected'
  | 'client_credential'
  | 'state_mismatch'
  | 'authorization_refused'
  | 'token_request_failed'
  | 'wrong_principal'
  | 'vault';

export interface OAuthProblem {
  code: OAuthProblemCode;
  message: string;
}

export type OAuthResult<T> =
  { ok: true; value: T; problem?: never } | { ok: false; problem: OAuthProblem; value?: never };

export const problem = (
  code: OAuthProblemCode,
  message: string,
): { ok: false; problem: OAuthProblem } => ({
  ok: false,
  problem: { code, message },
});
