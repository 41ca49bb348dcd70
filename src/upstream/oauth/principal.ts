// Who is calling, as the upstream side needs it for per-principal tokens: the authenticated HTTP
// caller (src/core/caller.ts) and, for token exchange (RFC 8693), the access token it presented.
// The HTTP gateway runs each authenticated request inside `asUpstreamPrincipal`; outside one
// (stdio, library, CLI, an unauthenticated gateway) there is none, and calls are the local
// operator's.
// Contracts:
// - The caller's own access token is held here for the exchange request only: it is never put in
//   a request to an upstream, a log line, an error or a result.
// - The context only chooses which principal's connection a call goes through; each connection
//   is bound to one principal when it is made, so no call can borrow another principal's token.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Caller } from '../../core/caller.js';
import type { GrantPrincipal } from './port.js';

export interface UpstreamPrincipal {
  caller: Caller;
  /** The bearer token the caller authenticated with (for a token exchange), or null. */
  subject_token: string | null;
}

const store = new AsyncLocalStorage<UpstreamPrincipal>();

/** Runs `fn` as `principal` (null: as nobody in particular, i.e. the local operator). */
export function asUpstreamPrincipal<T>(principal: UpstreamPrincipal | null, fn: () => T): T {
  return principal ? store.run(principal, fn) : fn();
}

/** The authenticated caller of the call being made, or undefined (the local operator). */
export const currentUpstreamPrincipal = (): UpstreamPrincipal | undefined => store.getStore();

/** The grant principal of an authenticated caller; null for the local operator. */
export function grantPrincipalOf(p: UpstreamPrincipal | undefined): GrantPrincipal | null {
  if (!p || p.caller.kind !== 'token') return null;
  return { issuer: p.caller.issuer, subject: p.caller.subject };
}
