import { userInfo } from 'node:os';

/**
 * Who asked for a call. Shared contract between the team gateway (inbound authentication), policy
 * (Cedar principal) and the ledger/telemetry records. Do not change existing fields; add optional
 * ones only when needed, and say so in your report.
 */
export interface Caller {
  /** `local`: the operator's own process (stdio, library, CLI). `token`: an authenticated HTTP caller. */
  kind: 'local' | 'token';
  /** Stable subject: the OS user name for `local`; the token's `sub` (or a static token's name) for `token`. */
  subject: string;
  /** OAuth client id (`client_id` or `azp` claim), when the token names one. */
  client_id: string | null;
  /** Token issuer (`iss`), for `token`. */
  issuer: string | null;
  /** Granted scopes (empty for `local`). */
  scopes: readonly string[];
}

/** The caller of a process nobody authenticated: the local operating-system user. */
export function localCaller(): Caller {
  let subject = 'local';
  try {
    subject = userInfo().username || subject;
  } catch {
    // No passwd entry (containers): keep the generic name.
  }
  return { kind: 'local', subject, client_id: null, issuer: null, scopes: [] };
}
