// classify() on the evidence of an upstream MCP exchange (src/upstream/adapter.ts).
import { describe, expect, it } from 'vitest';
import { classify } from './classify.js';
import type { Contract, Evidence } from './evidence.js';

const read: Contract = { action_class: 'read' };
const create: Contract = { action_class: 'create' };
const createWithLookup: Contract = { action_class: 'create', reconciliation: true };
const answered = (mcp_reply: Evidence['mcp_reply'], extra: Partial<Evidence> = {}): Evidence => ({
  phase: 'response_complete',
  mcp_reply,
  ...extra,
});

describe('classify: MCP upstream answers', () => {
  it.each([
    ['a result', answered('result'), create, 'succeeded', 'never', 'applied', 'mcp_result'],
    [
      'a result of a read',
      answered('result'),
      read,
      'succeeded',
      'never',
      'none',
      'mcp_read_result',
    ],
    [
      'a JSON-RPC refusal',
      answered('rpc_error'),
      create,
      'confirmed_rejection',
      'never',
      'none',
      'mcp_rpc_error',
    ],
    [
      'isError of a write with a lookup',
      answered('tool_error'),
      createWithLookup,
      'outcome_unknown',
      'reconcile_first',
      'unknown',
      'mcp_tool_error',
    ],
    [
      'isError of a write without a lookup',
      answered('tool_error'),
      create,
      'outcome_unknown',
      'escalate',
      'unknown',
      'mcp_tool_error',
    ],
    [
      'isError of a read',
      answered('tool_error'),
      read,
      'confirmed_failure',
      'allowed',
      'none',
      'mcp_read_error',
    ],
    [
      'an internal JSON-RPC error of a write',
      answered('rpc_internal_error'),
      createWithLookup,
      'outcome_unknown',
      'reconcile_first',
      'unknown',
      'mcp_rpc_internal_error',
    ],
    [
      'structured content breaking the outputSchema',
      answered('result', { contract_check: 'violated' }),
      createWithLookup,
      'malformed_response',
      'reconcile_first',
      'applied',
      'mcp_result_contract_violated',
    ],
    [
      'written, then the child exited',
      { phase: 'request_sent', local_error: 'connection_closed' },
      createWithLookup,
      'outcome_unknown',
      'reconcile_first',
      'unknown',
      'sent_no_response',
    ],
    [
      'written, then the child exited (no lookup)',
      { phase: 'request_sent', local_error: 'connection_closed' },
      create,
      'outcome_unknown',
      'escalate',
      'unknown',
      'sent_no_response',
    ],
    [
      'written, then the deadline passed (a read)',
      { phase: 'request_sent', local_error: 'deadline' },
      read,
      'outcome_unknown',
      'allowed',
      'unknown',
      'sent_no_response',
    ],
    [
      'spawn failed',
      { phase: 'not_sent', local_error: 'connect_refused' },
      create,
      'local_failure',
      'allowed',
      'none',
      'not_sent',
    ],
  ])('%s', (_name, evidence, contract, category, retry, remote_effect, rule) => {
    expect(classify(evidence, contract)).toMatchObject({ category, retry, remote_effect, rule });
  });
});
