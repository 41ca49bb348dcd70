// The ledger event model (DESIGN.md §2). Events are immutable and are the source of truth; every
// current state is a projection of them. Payloads are versioned by `v` on the event.
import type {
  ActionClass,
  Category,
  DispatchState,
  EventKind,
  OperationState,
  RemoteEffect,
  Retry,
  RetryDecision,
  RetryReason,
} from '../core/vocabulary.js';
import type { SealedPayload } from './seal.js';
import type { Caller } from '../core/caller.js';

/** Diagnostics as the ledger holds them: redacted plain fields, or sealed to the auditor key. */
export type RecordedDiagnostics = Record<string, unknown> | SealedPayload;

export const EVENT_VERSION = 1;

/** Why an operation changed owner: its owner's lease ran out, or it never held one. */
export type OwnerChangeReason = 'lease_expired' | 'no_lease';

export interface Intent {
  /** What kind of effect, e.g. `create_deployment`, `deactivate_account`. */
  kind: string;
  /** Structured reference to the subject (never prose), e.g. `account:A-17`. */
  subject_ref: string | null;
  /** sha256 of the canonical parameters. */
  params_digest: string;
  /**
   * `hmac-sha256:<hex>` of the operation's secret inputs under the ledger's continuation key
   * (engine/ssh-action.ts), never the values; absent when the action declares none.
   */
  secrets_digest?: string;
}

export interface Destination {
  method?: string;
  route_template?: string;
  /** Where credentials come from, e.g. `vault:identity-prod`; never a credential itself. */
  authority_ref?: string;
  /** SSH host reference from the inventory. */
  host_ref?: string;
}

export interface PhaseTimes {
  started_at?: number;
  connected_at?: number;
  request_sent_at?: number;
  headers_at?: number;
  finished_at?: number;
}

export interface ResponseSummary {
  status: number | null;
  /** sha256 of the response body bytes. */
  fingerprint: string | null;
  /** Target-assigned reference (e.g. the created record's id), when the contract yields one. */
  remote_ref: string | null;
  /** The destination marked the response as an idempotent replay. */
  replay: boolean;
}

export interface EventPayloads {
  session_started: { owner: string; instance_id: string; pid: number; agent: string | null };
  session_ended: { reason: string };
  operation_opened: {
    owner: string;
    action: string;
    action_class: ActionClass;
    intent: Intent;
    destination: Destination;
    idempotency_key: string | null;
    supersedes_operation_id: string | null;
    attempt_budget: number;
    /**
     * The action input, redacted of known secrets, so that recovery in a new process can retry under
     * an honoured idempotency key without minting a new operation. Sealed when an auditor key is set.
     */
    params: unknown;
    /**
     * The fingerprint of the request the opening built, which the first attempt sends: a
     * continuation before any attempt is checked against it, as later ones are against the first
     * attempt's. Absent in records written before it was recorded, and when the request was built
     * but a later preparation step failed.
     */
    request_fingerprint?: string;
    /** Who asked for it (absent in records written before callers were recorded). */
    caller?: Caller;
    /**
     * The W3C `traceparent` of the traced call that wrote this event (its `execute_tool` span), so
     * that a later reconcile, recovery or sweep links its span to it. Absent when telemetry is off
     * (and in events written before it existed).
     */
    traceparent?: string;
  };
  attempt_started: {
    attempt_id: string;
    number: number;
    worker: string;
    retry_of_attempt_id: string | null;
    retry_reason: RetryReason | null;
    retry_decision: RetryDecision | null;
    attempt_budget_remaining: number;
    request_fingerprint: string;
    prior_request_fingerprint: string | null;
    credential_ref: string | null;
    destination: Destination;
    /**
     * The W3C `traceparent` of the traced call that wrote this event (its `execute_tool` span), so
     * that a later reconcile, recovery or sweep links its span to it. Absent when telemetry is off
     * (and in events written before it existed).
     */
    traceparent?: string;
  };
  attempt_finished: {
    attempt_id: string;
    dispatch_state: DispatchState;
    category: Category;
    retry: Retry;
    remote_effect: RemoteEffect;
    rule: string;
    phases: PhaseTimes;
    response: ResponseSummary | null;
    duration_ms: number;
    diagnostics_ref: string | null;
    /**
     * Protected diagnostics (raw status, headers without secrets, body excerpt, failing contract
     * field). Never copied into the envelope. Sealed to the auditor key when one is configured.
     */
    diagnostics: RecordedDiagnostics | null;
    /** The gateway (owner id) that wrote it: a former owner is fenced (ledger/lease.ts). */
    writer?: string;
  };
  observation_recorded: {
    observation_id: string;
    /** How the evidence was obtained. */
    source: 'lookup' | 'callback' | 'post_write_check' | 'operator' | 'marker' | 'late_answer';
    /** What was checked: endpoint or command reference (no secrets). */
    checked: string;
    checked_at: number;
    /** Number of matching remote records (or marker states) found. */
    matches: number;
    remote_refs: string[];
    /** Why this changed the operation's state, or did not. */
    conclusion: string;
    state_after: OperationState;
    /**
     * HTTP lookups: what the lookup showed — `found` (records bound to the operation), `absent`
     * (none, or a get-by-id's 404), `ambiguous` (records matched but none is bound to this
     * operation: possibly another's), `failed` (no usable answer: nothing learned).
     */
    verdict?: 'found' | 'absent' | 'ambiguous' | 'failed';
    /** The lookup as declared: method and path template (no input values). */
    request?: string;
    /** The lookup's HTTP status, or null when no answer arrived. */
    status?: number | null;
    /** Records the lookup matched that are not bound to this operation. */
    unbound?: number;
  };
  approval_requested: {
    approval_id: string;
    scope: 'session' | 'per_call';
    request_fingerprint: string | null;
    card: Record<string, unknown>;
    /** The caller the operation recorded (absent in records written before it was recorded). */
    requested_by?: Caller | null;
    /** An agent's tool call, or a person's own command (absent in older records). */
    requested_via?: 'agent' | 'person';
  };
  approval_decided: {
    approval_id: string;
    decision: 'approved' | 'denied' | 'expired';
    /** Who answered, as one string (`oidc:alice@https://id…`, `console:bob`, `tty`, `ttl`). */
    approver: string;
    /** The person who decided, when known: web sign-in, per-approver token or the OS user. */
    decided_by?: {
      kind: 'oidc' | 'token' | 'local';
      subject: string;
      issuer: string | null;
    } | null;
    /** The approver's justification. */
    reason?: string | null;
    /** The request the decision is bound to. */
    request_fingerprint?: string;
    requested_by?: Caller | null;
    requested_via?: 'agent' | 'person';
  };
  /**
   * A policy decision (src/policy) before one attempt: evaluated before any send and before
   * approvals, on every attempt. `policy_ids` are the policies that determined it (none for the
   * default deny or a failed evaluation); `context_digest` is sha256 of the canonical request the
   * policies saw. `counted` holds the declared numeric arguments rolling totals read back.
   */
  policy_decided: {
    decision: 'allow' | 'deny' | 'require_approval';
    policy_ids: string[];
    reason: string;
    context_digest: string;
    /** `Candor::Caller` id: `local:<user>` or `token:<subject>`. */
    principal: string;
    /** The attempt number this decision gates (1 for a first call). */
    attempt: number;
    counted: Record<string, number>;
  };
  operation_resolved: {
    state: OperationState;
    category: Category;
    by: 'attempt' | 'reconciliation' | 'operator' | 'recovery';
    remote_refs: string[];
    /** The gateway (owner id) that wrote it: a former owner is fenced (ledger/lease.ts). */
    writer?: string;
  };
  operation_superseded: { superseded_by: string; reason: string };
  /**
   * Another gateway took the operation over (src/ledger/lease.ts): `from` held no live lease when
   * `to` claimed it. The store admits it only while `from` is still the owner, so of two gateways
   * racing for one operation exactly one is recorded.
   */
  owner_changed: {
    from: string;
    to: string;
    reason: OwnerChangeReason;
    /** When `from`'s lease ran out (null: it never held one). */
    lease_expired_at: number | null;
    /** What the new owner was doing when it took over. */
    by: 'recovery' | 'run' | 'sweep';
  };
  gate_changed: { locked: boolean; by: string };
  checkpoint: {
    size: number;
    root_hash: string;
    note: string;
    witnessed?: boolean;
    /** Why a configured witness's cosignature is missing (no answer, or answered badly). */
    witness_problem?: string;
    /** The problem's stable code (`WitnessProblemCode` in chain/checkpointer.ts). */
    witness_problem_code?: string;
    /** With `fork`: the size of the tree of this log the witness has already cosigned. */
    witness_size?: number;
  };
}

/** An event as the writer hands it to the store. */
export type NewEvent = {
  [K in EventKind]: {
    kind: K;
    /** Milliseconds since the epoch, from the injected clock. */
    at: number;
    session_id: string | null;
    operation_id: string | null;
    correlation_id: string | null;
    data: EventPayloads[K];
  };
}[EventKind];

/** An event as stored: sequence number and hash chain assigned by the store, atomically. */
export type StoredEvent = NewEvent & {
  seq: number;
  v: number;
  /** sha256 (hex) of the previous record's stored bytes; 64 zeros for the first. */
  prev_hash: string;
  /** sha256 (hex) of this record's stored bytes. */
  hash: string;
};

export const GENESIS_HASH = '0'.repeat(64);
