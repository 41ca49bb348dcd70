// Event builders and checks shared by the parts of the LedgerStore contract (contract.case.ts,
// lease.case.ts) and by tests elsewhere: a fixed operation, its attempts and observations, and the
// hash-chain check every adapter must pass.
import { expect } from 'vitest';
import { sha256Hex } from '../core/fingerprint.js';
import type {
  Category,
  OperationState,
  RemoteEffect,
  Retry,
  RetryDecision,
} from '../core/vocabulary.js';
import { GENESIS_HASH, type NewEvent, type StoredEvent } from './events.js';
import { recordBytes } from './record.js';
import type { LedgerStore } from './store.js';

export interface ContractSubject {
  store: LedgerStore;
  /** Closes nothing; opens a second handle on the same storage (persistent adapters only). */
  reopen?: () => Promise<LedgerStore>;
}

const T0 = Date.UTC(2026, 0, 1);
const FP = `sha256:${'a'.repeat(64)}`;

export function opened(
  op: string,
  o: {
    session?: string | null;
    correlation?: string | null;
    key?: string | null;
    at?: number;
  } = {},
): NewEvent {
  return {
    kind: 'operation_opened',
    at: o.at ?? T0,
    session_id: o.session ?? 'ses_1',
    operation_id: op,
    correlation_id: o.correlation ?? null,
    data: {
      owner: 'gw-1',
      action: 'create_deployment',
      action_class: 'create',
      intent: { kind: 'create_deployment', subject_ref: 'app:web', params_digest: 'd'.repeat(64) },
      destination: {
        method: 'POST',
        route_template: '/v1/deployments',
        authority_ref: 'vault:prod',
      },
      idempotency_key: o.key ?? null,
      supersedes_operation_id: null,
      attempt_budget: 3,
      params: { app: 'web' },
    },
  };
}

export function started(
  op: string,
  attempt: string,
  number = 1,
  o: { decision?: RetryDecision | null; session?: string } = {},
): NewEvent {
  return {
    kind: 'attempt_started',
    at: T0 + number,
    session_id: o.session ?? 'ses_1',
    operation_id: op,
    correlation_id: null,
    data: {
      attempt_id: attempt,
      number,
      worker: 'w-1',
      retry_of_attempt_id: null,
      retry_reason: null,
      retry_decision: o.decision ?? null,
      attempt_budget_remaining: 3 - number,
      request_fingerprint: FP,
      prior_request_fingerprint: null,
      credential_ref: 'vault:prod#deploy',
      destination: { method: 'POST', route_template: '/v1/deployments' },
    },
  };
}

export function finished(
  op: string,
  attempt: string,
  category: Category,
  retry: Retry,
  remote_effect: RemoteEffect,
): NewEvent {
  return {
    kind: 'attempt_finished',
    at: T0 + 100,
    session_id: 'ses_1',
    operation_id: op,
    correlation_id: null,
    data: {
      attempt_id: attempt,
      dispatch_state: remote_effect === 'none' ? 'not_sent' : 'response_received',
      category,
      retry,
      remote_effect,
      rule: 'test',
      phases: { started_at: T0 },
      response: null,
      duration_ms: 5,
      diagnostics_ref: null,
      diagnostics: null,
    },
  };
}

export function observed(op: string, state_after: OperationState, matches = 1): NewEvent {
  return {
    kind: 'observation_recorded',
    at: T0 + 200,
    session_id: 'ses_2',
    operation_id: op,
    correlation_id: null,
    data: {
      observation_id: `obs_${op}`,
      source: 'lookup',
      checked: 'GET /v1/deployments?key=k',
      checked_at: T0 + 200,
      matches,
      remote_refs: [],
      conclusion: 'test',
      state_after,
    },
  };
}

export function sessionStarted(session: string): NewEvent {
  return {
    kind: 'session_started',
    at: T0,
    session_id: session,
    operation_id: null,
    correlation_id: null,
    data: { owner: 'gw-1', instance_id: 'i-1', pid: 1, agent: null },
  };
}

/** Checks seq continuity, prev_hash links and each hash against the record's canonical bytes. */
export function expectLinearChain(records: readonly StoredEvent[], from = 1): void {
  let prev = records[0]?.prev_hash ?? GENESIS_HASH;
  if (from === 1) expect(records[0]?.prev_hash ?? GENESIS_HASH).toBe(GENESIS_HASH);
  records.forEach((r, i) => {
    expect(r.seq).toBe(from + i);
    expect(r.prev_hash).toBe(prev);
    expect(r.hash).toBe(sha256Hex(recordBytes(r, r.seq, r.prev_hash)));
    prev = r.hash;
  });
}
