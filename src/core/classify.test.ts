import { describe, expect, it } from 'vitest';
import { classify } from './classify.js';
import type { Contract, Evidence } from './evidence.js';

const read: Contract = { action_class: 'read' };
const createWithLookup: Contract = { action_class: 'create', reconciliation: true };

describe('classify: the seven cases every team must get right', () => {
  it('read issue + DNS failure -> local_failure / allowed, nothing sent', () => {
    const c = classify({ phase: 'not_sent', local_error: 'dns', error_code: 'ENOTFOUND' }, read);
    expect(c).toMatchObject({
      category: 'local_failure',
      retry: 'allowed',
      remote_effect: 'none',
      dispatch_state: 'not_sent',
    });
  });

  it('create issue + expired token -> authentication_failed / never', () => {
    const c = classify(
      { phase: 'response_complete', status: 401, www_authenticate: true },
      { action_class: 'create' },
    );
    expect(c).toMatchObject({
      category: 'authentication_failed',
      retry: 'never',
      remote_effect: 'none',
    });
  });

  it('delete release + denied -> authorization_denied / never', () => {
    const c = classify(
      { phase: 'response_complete', status: 403 },
      { action_class: 'destructive' },
    );
    expect(c).toMatchObject({
      category: 'authorization_denied',
      retry: 'never',
      remote_effect: 'none',
    });
  });

  it('read build + `status: 7` where a string is expected -> malformed_response / never', () => {
    const c = classify(
      { phase: 'response_complete', status: 200, contract_check: 'violated' },
      read,
    );
    expect(c).toMatchObject({
      category: 'malformed_response',
      retry: 'never',
      remote_effect: 'none',
    });
  });

  it('create deployment + reply delayed past the deadline -> outcome_unknown / reconcile_first', () => {
    const c = classify({ phase: 'request_sent', local_error: 'deadline' }, createWithLookup);
    expect(c).toMatchObject({
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      remote_effect: 'unknown',
      dispatch_state: 'sent_no_response',
    });
  });

  it('SSH restart + local helper killed after the remote started -> outcome_unknown / reconcile_first', () => {
    const c = classify(
      { phase: 'request_sent', local_error: 'cancelled', exit_status: null },
      { action_class: 'set_state', reconciliation: true },
    );
    expect(c).toMatchObject({
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      remote_effect: 'unknown',
    });
  });

  it('update record + 429 with Retry-After -> rate_limited / after_delay with the delay', () => {
    const c = classify(
      { phase: 'response_complete', status: 429, retry_after_ms: 30_000 },
      { action_class: 'set_state' },
    );
    expect(c).toMatchObject({
      category: 'rate_limited',
      retry: 'after_delay',
      retry_after_ms: 30_000,
      remote_effect: 'none',
    });
  });
});

describe('classify: the rest of the DESIGN.md §1 table', () => {
  const rows: Array<[string, Evidence, Contract, Partial<ReturnType<typeof classify>>]> = [
    [
      'connection refused',
      { phase: 'not_sent', local_error: 'connect_refused' },
      { action_class: 'financial' },
      { category: 'local_failure', retry: 'allowed', remote_effect: 'none' },
    ],
    [
      'TLS failure',
      { phase: 'not_sent', local_error: 'tls' },
      { action_class: 'create' },
      { category: 'local_failure', retry: 'allowed' },
    ],
    [
      'credential unavailable needs a person, not a retry',
      { phase: 'not_sent', local_error: 'credential_unavailable' },
      { action_class: 'create' },
      { category: 'local_failure', retry: 'escalate', remote_effect: 'none' },
    ],
    [
      'SSH host key mismatch is never retried',
      { phase: 'not_sent', local_error: 'host_key_mismatch' },
      { action_class: 'execute' },
      { category: 'local_failure', retry: 'never', remote_effect: 'none' },
    ],
    [
      'SSH auth rejected',
      { phase: 'not_sent', local_error: 'ssh_auth_rejected' },
      { action_class: 'execute' },
      { category: 'authentication_failed', retry: 'never' },
    ],
    [
      '429 without Retry-After uses the contract default',
      { phase: 'response_complete', status: 429 },
      { action_class: 'create', default_retry_after_ms: 2500 },
      { category: 'rate_limited', retry: 'after_delay', retry_after_ms: 2500 },
    ],
    [
      '503 + Retry-After with not-applied contract',
      { phase: 'response_complete', status: 503, retry_after_ms: 5000 },
      { action_class: 'create', five_xx: 'not_applied' },
      {
        category: 'rate_limited',
        retry: 'after_delay',
        retry_after_ms: 5000,
        remote_effect: 'none',
      },
    ],
    [
      '503 + Retry-After without the contract stays unknown',
      { phase: 'response_complete', status: 503, retry_after_ms: 5000 },
      createWithLookup,
      { category: 'outcome_unknown', retry: 'reconcile_first', remote_effect: 'unknown' },
    ],
    [
      '400',
      { phase: 'response_complete', status: 400 },
      { action_class: 'create' },
      { category: 'confirmed_rejection', retry: 'never', remote_effect: 'none' },
    ],
    [
      '404',
      { phase: 'response_complete', status: 404 },
      read,
      { category: 'confirmed_rejection', retry: 'never' },
    ],
    [
      '409 conflict',
      { phase: 'response_complete', status: 409 },
      { action_class: 'create' },
      { category: 'confirmed_rejection', retry: 'never' },
    ],
    [
      '422',
      { phase: 'response_complete', status: 422 },
      { action_class: 'append' },
      { category: 'confirmed_rejection', retry: 'never' },
    ],
    [
      'documented failure body on 500',
      { phase: 'response_complete', status: 500, contract_check: 'documented_failure' },
      { action_class: 'create' },
      { category: 'confirmed_failure', remote_effect: 'none', retry: 'allowed' },
    ],
    [
      '5xx means not applied (documented), financial escalates',
      { phase: 'response_complete', status: 500 },
      { action_class: 'financial', five_xx: 'not_applied' },
      { category: 'confirmed_failure', remote_effect: 'none', retry: 'escalate' },
    ],
    [
      '500 on a write by default',
      { phase: 'response_complete', status: 500 },
      createWithLookup,
      { category: 'outcome_unknown', remote_effect: 'unknown', retry: 'reconcile_first' },
    ],
    [
      '502 on a write with honoured key',
      { phase: 'response_complete', status: 502 },
      { action_class: 'create', idempotency_honoured: true },
      { category: 'outcome_unknown', retry: 'allowed' },
    ],
    [
      '504 on a write with neither key nor lookup',
      { phase: 'response_complete', status: 504 },
      { action_class: 'create' },
      { category: 'outcome_unknown', retry: 'escalate' },
    ],
    [
      '500 on a read',
      { phase: 'response_complete', status: 500 },
      read,
      { category: 'outcome_unknown', retry: 'allowed', remote_effect: 'none' },
    ],
    [
      'error body with 2xx on a write',
      { phase: 'response_complete', status: 200, contract_check: 'documented_failure' },
      createWithLookup,
      { category: 'malformed_response', retry: 'reconcile_first', remote_effect: 'applied' },
    ],
    [
      'missing id on a create',
      { phase: 'response_complete', status: 201, contract_check: 'violated' },
      createWithLookup,
      { category: 'malformed_response', retry: 'reconcile_first', remote_effect: 'applied' },
    ],
    [
      'bad status line',
      { phase: 'response_complete', response_misframed: true },
      createWithLookup,
      { category: 'malformed_response', retry: 'reconcile_first', remote_effect: 'unknown' },
    ],
    [
      'read reset after send',
      { phase: 'request_sent', local_error: 'connection_reset' },
      read,
      { category: 'outcome_unknown', retry: 'allowed', remote_effect: 'unknown' },
    ],
    [
      'write FIN after send, honoured key',
      { phase: 'request_sent', local_error: 'connection_closed' },
      { action_class: 'create', idempotency_honoured: true },
      { category: 'outcome_unknown', retry: 'allowed' },
    ],
    [
      'write client crash after send without key or lookup',
      { phase: 'request_sent', local_error: 'execution_error' },
      { action_class: 'destructive' },
      { category: 'outcome_unknown', retry: 'escalate', dispatch_state: 'execution_error' },
    ],
    [
      '2xx body cut on a create: applied but id unknown',
      { phase: 'response_cut', status: 201 },
      createWithLookup,
      { category: 'outcome_unknown', retry: 'reconcile_first', remote_effect: 'applied' },
    ],
    [
      'success',
      { phase: 'response_complete', status: 201, contract_check: 'valid' },
      createWithLookup,
      { category: 'succeeded', remote_effect: 'applied', retry: 'never' },
    ],
    [
      'idempotent replay',
      { phase: 'response_complete', status: 201, contract_check: 'valid', idempotent_replay: true },
      createWithLookup,
      { category: 'succeeded', rule: 'http_2xx_replay' },
    ],
    [
      'person declined',
      { phase: 'not_sent', blocked: 'approval_denied' },
      { action_class: 'financial' },
      { category: 'approval_denied', retry: 'never', remote_effect: 'none' },
    ],
    [
      'gate locked',
      { phase: 'not_sent', blocked: 'gate_locked' },
      read,
      { category: 'gate_locked', retry: 'never', remote_effect: 'none' },
    ],
    [
      'reconciliation found two',
      { phase: 'request_sent', reconciliation_matches: 2 },
      createWithLookup,
      { category: 'duplicate_effect', retry: 'escalate', remote_effect: 'applied' },
    ],
    [
      '409 in progress on a retry under an honoured key',
      { phase: 'response_complete', status: 409, idempotency_in_progress: true },
      { action_class: 'create', idempotency_honoured: true, default_retry_after_ms: 200 },
      {
        category: 'outcome_unknown',
        retry: 'after_delay',
        retry_after_ms: 200,
        remote_effect: 'unknown',
      },
    ],
    [
      'SSH exit 0',
      { phase: 'response_complete', exit_status: 0 },
      { action_class: 'execute', reconciliation: true },
      { category: 'succeeded', remote_effect: 'applied' },
    ],
    [
      'SSH exit 255 is an answer, not transport loss',
      { phase: 'response_complete', exit_status: 255 },
      { action_class: 'execute', reconciliation: true },
      { category: 'confirmed_failure', remote_effect: 'unknown', retry: 'reconcile_first' },
    ],
    [
      'SSH channel closed without exit status',
      { phase: 'response_complete', exit_status: null },
      { action_class: 'execute', reconciliation: true },
      { category: 'outcome_unknown', retry: 'reconcile_first' },
    ],
  ];
  it.each(rows)('%s', (_name, evidence, contract, expected) => {
    expect(classify(evidence, contract)).toMatchObject(expected);
  });

  it('treats unreadable evidence as the worst case, never as not-sent', () => {
    expect(classify({ phase: 'warp' }, createWithLookup)).toMatchObject({
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      retry: 'reconcile_first',
    });
    expect(classify(undefined, undefined)).toMatchObject({
      category: 'outcome_unknown',
      retry: 'escalate',
    });
  });
});

describe('dispatch state: the rule table’s `answered` column', () => {
  it('a read answer is response_received even when the transport also reports an execution error; no answer is not', () => {
    // A transport can hold the answer and still end on an error of its own (an SSH channel that
    // broke after the exit status, an MCP reply read before the child died): the answer decides.
    const execute: Contract = { action_class: 'execute' };
    const broke = { phase: 'response_complete', local_error: 'execution_error' } as const;
    const cases: [Evidence, string, string][] = [
      [{ ...broke, exit_status: 3 }, 'exit_nonzero', 'response_received'],
      [{ ...broke, exit_status: 0 }, 'exit_zero', 'response_received'],
      [{ ...broke, mcp_reply: 'tool_error' }, 'mcp_tool_error', 'response_received'],
      // Without an answer the error stands.
      [{ ...broke, exit_status: null }, 'no_exit_status', 'execution_error'],
      [{ ...broke }, 'no_status', 'execution_error'],
    ];
    expect(
      cases.map(([ev]) => {
        const c = classify(ev, execute);
        return [c.rule, c.dispatch_state];
      }),
    ).toEqual(cases.map(([, rule, dispatch]) => [rule, dispatch]));
  });
});
