import type { Caller } from '../core/caller.js';
import { EngineErrorCode } from '../core/error-code.js';
import type {
  ActionClass,
  Category,
  DispatchState,
  RemoteEffect,
  RetryDecision,
  RetryReason,
} from '../core/vocabulary.js';

// What the engine needs from the outside, as small ports: credentials, approvals/gate, redaction.
export type CredentialResult =
  | { ok: true; headers: Record<string, string>; secrets: string[]; failure?: never }
  | {
      ok: false;
      failure: {
        code: 'locked' | 'unknown_ref' | 'binding_mismatch' | 'unavailable';
        /**
         * Why, in a sentence the agent may read (it names the reference or variable, never a
         * value): shown as `data.refusal.detail` of the local_failure.
         */
        detail?: string;
      };
      headers?: never;
    };

/**
 * Why a credential (or an SSH secret) gave nothing, as the evidence code; `locked` is evidence of
 * its own (`blocked: gate_locked`).
 */
export const CREDENTIAL_ERROR_CODE = {
  unknown_ref: EngineErrorCode.unknown_ref,
  binding_mismatch: EngineErrorCode.binding_mismatch,
  unavailable: EngineErrorCode.unavailable,
} as const satisfies Record<
  Exclude<Extract<CredentialResult, { ok: false }>['failure']['code'], 'locked'>,
  EngineErrorCode
>;

/** Resolves a credential reference at dispatch time, inside the runtime; never seen by the agent. */
export interface CredentialProvider {
  resolve(
    authorityRef: string,
    target: { origin: string; path: string },
  ): Promise<CredentialResult>;
}

/** A fixed map of references to headers (tests, examples). */
export function staticCredentials(map: Record<string, Record<string, string>>): CredentialProvider {
  return {
    resolve(ref) {
      const headers = map[ref];
      if (!headers) return Promise.resolve({ ok: false, failure: { code: 'unknown_ref' } });
      return Promise.resolve({ ok: true, headers: { ...headers }, secrets: secretsOf(headers) });
    },
  };
}

/** The secret parts of credential headers (`Bearer abc` -> `abc` as well as the whole value). */
export function secretsOf(headers: Record<string, string>): string[] {
  const out: string[] = [];
  for (const value of Object.values(headers)) {
    out.push(value);
    const space = value.indexOf(' ');
    if (space > 0) out.push(value.slice(space + 1));
  }
  return out.filter((s) => s.length >= 4);
}

export interface GateContext {
  session_id: string;
  operation_id: string;
  action: string;
  action_class: ActionClass;
  request_fingerprint: string;
  /**
   * Dispatch state of the previous attempt, if this is a retry (`sent_no_response` when it started
   * and never finished: the bytes may have left).
   */
  prior_dispatch_state: DispatchState | null;
  intent: Record<string, unknown>;
  /** What the previous attempt established, if any. */
  prior_attempt?: {
    category: Category;
    remote_effect: RemoteEffect;
    dispatch_state: DispatchState;
  } | null;
  /** Why this attempt is a retry, and what licensed it. */
  retry?: { reason: RetryReason; decision: RetryDecision } | null;
  correlation_id?: string | null;
  /** The caller's signal: a cancelled call withdraws the approval request it is waiting on. */
  signal?: AbortSignal;
  /**
   * Resolves once the operation's own records are written. The engine may keep an operation's
   * opening back to write it with the first attempt (one commit); a gate that reads or records
   * anything about the operation (an approval card, its view) awaits this first.
   */
  recorded?: () => Promise<void>;
  /**
   * The request this attempt will send, rendered from its prepared request (secrets redacted), so
   * an approval card shows what is approved — never a stored summary of an earlier request.
   */
  request?: GateRequest;
  /**
   * Policy (src/policy) decided this attempt needs a person: the gate asks per call whatever the
   * action's approval scope, and the card names the policies and their reason.
   */
  policy_approval?: { policy_ids: string[]; reason: string } | null;
}

/** The prepared request of one attempt, as a person sees it on an approval card. */
export interface GateRequest {
  /** HTTP method, or `SSH`. */
  method: string;
  /** Path and query relative to the destination, or the SSH command. */
  target: string;
  /** The destination origin or SSH host reference. */
  destination: string;
  /** JSON body (redacted), or null. */
  body: unknown;
  /**
   * HTTP: the headers the attempt will send (redacted), less the credential, which is added at
   * dispatch and never shown; `credential` names where it comes from.
   */
  headers?: Record<string, string>;
  credential?: string | null;
}

/**
 * `pending`: a person has been asked and has not answered within the gate's wait (or the client
 * cannot prompt); nothing was sent and the operation stays open for a call with the same id.
 */
export type GateDecision =
  | { decision: 'approved' }
  | { decision: 'denied' }
  | { decision: 'gate_locked' }
  /** The caller is not granted this action (the gateway's access rules): nothing is sent. */
  | { decision: 'unauthorized'; reason: string }
  | { decision: 'pending'; approval_id: string };

/** Approvals and the lock: consulted before every attempt; no connection on a denial. */
export interface Gate {
  check(ctx: GateContext): Promise<GateDecision>;
  /**
   * Whether the lock is in force, asking nobody: consulted before bytes that are not an attempt
   * (a reconciliation lookup carries the credential too). A gate without it is never locked.
   */
  locked?(): Promise<boolean>;
  /**
   * True when the gate can ask a person. A policy's "require approval" on a gate that cannot ask
   * is refused (fail closed), never approved.
   */
  readonly asks?: boolean;
}

/** What a policy sees of one attempt (built by the engine before any send). */
export interface PolicyInput {
  action: { name: string; class: ActionClass; destination: { kind?: string } & object };
  /** The validated arguments of the call. */
  args: unknown;
  caller: Caller;
  session_id: string | null;
  operation_id: string;
  /** The operation so far: its attempts and what the fold establishes. */
  operation: {
    attempts: number;
    effect: RemoteEffect;
    state: string | null;
    /** Category of the newest finished attempt, or null before any. */
    last_category: string | null;
  };
}

/** A policy decision; `deny` and a failed evaluation both send nothing. */
export interface PolicyVerdict {
  decision: 'allow' | 'deny' | 'require_approval';
  policy_ids: string[];
  reason: string;
  context_digest: string;
  /** `Candor::Caller` id of the principal. */
  principal: string;
  /** Declared numeric arguments of this call that rolling totals count. */
  counted: Record<string, number>;
}

/** Policy as code (src/policy): consulted before every attempt, before approvals. */
export interface PolicyPort {
  /** Never throws for a policy that fails to evaluate: that is a `deny` (fail closed). */
  decide(input: PolicyInput): Promise<PolicyVerdict>;
}

export const openGate: Gate = {
  check: () => Promise.resolve({ decision: 'approved' }),
  locked: () => Promise.resolve(false),
};

/** One redaction layer over everything agent-visible or stored in clear. */
export interface Redactor {
  addSecret(secret: string): void;
  redactValue<T>(value: T): T;
  redactString(value: string): string;
}
