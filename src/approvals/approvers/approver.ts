// The approver port: how a gate asks a person. Adapters: scripted (tests), terminal (TTY prompt),
// console (queue directory + `candor approve`), MCP elicitation (the gateway's client).
import type { ApprovalCard } from '../card.js';
import type { ApproverIdentity } from '../identity.js';

export type ApproverDecision = 'approved' | 'denied' | 'expired';

export interface ApproverVerdict {
  decision: ApproverDecision;
  /** Who answered, as recorded in `approval_decided.approver` (e.g. `console:alice`, `tty`). */
  by: string;
  /** The person who decided, when the adapter knows them (web sign-in, token, OS user). */
  identity?: ApproverIdentity;
  /** Their justification, as given. */
  reason?: string | null;
  /** The request fingerprint the person saw; an approval for another request approves nothing. */
  request_fingerprint?: string;
}

export interface Approver {
  readonly name: string;
  /**
   * Shows the card to a person and resolves with their answer. `expired` when no answer came before
   * `card.expires_at`. A failure to reach anyone is not an approval: adapters answer `denied`.
   * When `signal` aborts, the request is withdrawn (nobody can answer it any more) and `ask`
   * resolves promptly; the gate records why.
   */
  ask(card: ApprovalCard, options?: { signal?: AbortSignal }): Promise<ApproverVerdict>;
}
