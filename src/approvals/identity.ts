// Who decided an approval, and who asked for the call it gates.
//
// Contracts:
// - An approver is identified like a caller: a subject, and the issuer that vouches for it (an
//   OpenID issuer for the web sign-in; none for a per-approver token or the local OS user).
// - The four-eyes rule compares the approver with the caller recorded on the operation: the same
//   subject under the same issuer (both null counts as the same issuer) is the same principal, and
//   may not approve its own call. Denying one's own call is always allowed (it only stops things).
// - A card whose caller is unknown (records written before callers were recorded) cannot prove a
//   different person: under four-eyes it is refused too (fail closed).
import { userInfo } from 'node:os';
import type { Caller } from '../core/caller.js';

export interface ApproverIdentity {
  /** `oidc`: signed in at the web view; `token`: a per-approver token; `local`: the OS user. */
  kind: 'oidc' | 'token' | 'local';
  subject: string;
  issuer: string | null;
}

/** Whether the call came from an agent (an MCP tool call) or a person (an operator's command). */
export type RequestedVia = 'agent' | 'person';

/** The `approval_decided.approver` string for an identity (kept for older readers). */
export function approverLabel(who: ApproverIdentity): string {
  if (who.kind === 'oidc') return `oidc:${who.subject}@${who.issuer ?? ''}`;
  return `${who.kind === 'token' ? 'token' : 'console'}:${who.subject}`;
}

/** The operating-system user running this command. */
export function localApprover(name?: string): ApproverIdentity {
  if (name !== undefined) return { kind: 'local', subject: name, issuer: null };
  let subject = 'unknown';
  try {
    subject = userInfo().username || subject;
  } catch {
    // No passwd entry (containers): keep the generic name.
  }
  return { kind: 'local', subject, issuer: null };
}

/** True when the approver is the principal that asked for the call (or that cannot be ruled out). */
export function isSelfApproval(
  requester: Caller | null | undefined,
  approver: ApproverIdentity,
): boolean {
  if (!requester) return true;
  return requester.subject === approver.subject && (requester.issuer ?? null) === approver.issuer;
}
