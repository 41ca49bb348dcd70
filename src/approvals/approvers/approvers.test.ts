import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../core/time.js';
import { openMemoryLedger } from '../../ledger/memory/store.js';
import { projectOperation } from '../../ledger/projection.js';
import type { ApprovalCard } from '../card.js';
import { createApprovalGate } from '../gate.js';
import { consoleApprover } from './console.js';
import {
  answerFromElicitation,
  elicitationApprover,
  elicitationRequest,
  type ElicitApproval,
} from './elicitation.js';
import { approvalQueue } from './queue.js';
import { scriptedApprover } from './scripted.js';
import { terminalApprover } from './terminal.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-approvers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function card(over: Partial<ApprovalCard> = {}): ApprovalCard {
  return {
    approval_id: 'apr_01TESTTESTTESTTESTTESTTEST',
    scope: 'per_call',
    reason: 'retry_after_unknown',
    question: 'Approve one retry of create_payment?',
    session_id: 'ses_1',
    operation_id: 'op_1',
    action: 'create_payment',
    action_class: 'financial',
    intent: { kind: 'create_payment', subject_ref: null, params_digest: 'sha256:p' },
    request_fingerprint: 'sha256:f',
    instance_id: 'abc',
    requested_at: 1_000,
    expires_at: 61_000,
    dispatch_state: 'sent_no_response',
    prior_attempt: {
      number: 1,
      dispatch_state: 'sent_no_response',
      category: 'outcome_unknown',
      remote_effect: 'unknown',
    },
    planned_recovery: {
      action: 'retry_same_request',
      retry_reason: 'response_lost_after_dispatch',
      retry_decision: null,
      request_fingerprint: 'sha256:f',
      idempotency_key: 'idem_1',
      summary: 'Resend the identical request under idempotency key idem_1.',
    },
    ...over,
  };
}

describe('scripted approver', () => {
  it('answers from its queue, records cards, and says no when the queue is empty', async () => {
    const a = scriptedApprover(['approved']);
    expect(await a.ask(card())).toEqual({ decision: 'approved', by: 'scripted' });
    expect(await a.ask(card({ operation_id: 'op_2' }))).toEqual({
      decision: 'denied',
      by: 'scripted',
    });
    expect(a.cards.map((c) => c.operation_id)).toEqual(['op_1', 'op_2']);
  });
});

describe('terminal approver', () => {
  function streams() {
    const input = new PassThrough();
    const output = new PassThrough();
    let shown = '';
    output.on('data', (d: Buffer) => (shown += d.toString('utf8')));
    return { input, output, shown: () => shown };
  }

  it('shows the card with the dispatch state and planned recovery; "y" approves', async () => {
    const s = streams();
    const a = terminalApprover({
      input: s.input,
      output: s.output,
      interactive: true,
      clock: manualClock(1_000),
    });
    const answer = a.ask(card());
    setTimeout(() => s.input.write('y\n'), 5);
    expect(await answer).toEqual({ decision: 'approved', by: 'tty' });
    expect(s.shown()).toContain('dispatch state so far: sent_no_response (outcome_unknown)');
    expect(s.shown()).toContain('planned recovery: Resend the identical request');
    expect(s.shown()).toContain('Approve? [y/N]');
  });

  it('anything else is a no; no terminal means no without asking', async () => {
    const s = streams();
    const a = terminalApprover({
      input: s.input,
      output: s.output,
      interactive: true,
      clock: manualClock(1_000),
    });
    const answer = a.ask(card());
    setTimeout(() => s.input.write('sure\n'), 5);
    expect((await answer).decision).toBe('denied');
    const none = terminalApprover({
      input: new PassThrough(),
      output: new PassThrough(),
      interactive: false,
    });
    expect(await none.ask(card())).toEqual({ decision: 'denied', by: 'tty:no_terminal' });
  });

  it('an unanswered prompt expires at the card expiry', async () => {
    const s = streams();
    const a = terminalApprover({
      input: s.input,
      output: s.output,
      interactive: true,
      clock: manualClock(1_000),
    });
    expect(await a.ask(card({ expires_at: 1_030 }))).toEqual({ decision: 'expired', by: 'tty' });
  });
});

describe('console approver and queue', () => {
  it('the gate waits for the console answer; the first decision wins', async () => {
    const qdir = join(dir, 'q1');
    const queue = approvalQueue(qdir);
    const clock = manualClock(1_000);
    const approver = consoleApprover({
      queue,
      clock,
      sleep: async () => {
        const pending = await queue.pending(clock.now());
        if (pending[0]) {
          expect(
            (
              await queue.decide(
                pending[0].approval_id.slice(0, 12),
                'approved',
                'console:alice',
                clock.now(),
              )
            ).ok,
          ).toBe(true);
          const again = await queue.decide(
            pending[0].approval_id,
            'denied',
            'console:bob',
            clock.now(),
          );
          expect(again.failure?.code).toBe('already_decided');
        }
      },
    });
    // The queue writes the card's fingerprint with the decision: it is bound to that request.
    expect(await approver.ask(card())).toEqual({
      decision: 'approved',
      by: 'console:alice',
      request_fingerprint: 'sha256:f',
    });
    expect(await queue.pending(clock.now())).toEqual([]);
  });

  it('no answer before the expiry: expired, and a late yes is refused', async () => {
    const queue = approvalQueue(join(dir, 'q2'));
    const clock = manualClock(1_000);
    const approver = consoleApprover({
      queue,
      clock,
      sleep: () => Promise.resolve(clock.advance(30_000)),
    });
    expect(await approver.ask(card())).toEqual({ decision: 'expired', by: 'ttl' });
    const late = await queue.decide(card().approval_id, 'approved', 'console:alice', clock.now());
    expect(late.failure?.code).toBe('not_found');
  });

  it('through the gate: approval_decided names the console user', async () => {
    const queue = approvalQueue(join(dir, 'q3'));
    const ledger = openMemoryLedger();
    const approver = consoleApprover({
      queue,
      sleep: async () => {
        for (const c of await queue.pending(Date.now()))
          await queue.decide(c.approval_id, 'denied', 'console:carol', Date.now());
      },
    });
    const gate = createApprovalGate({ ledger, approver });
    const decision = await gate.check({
      session_id: 'ses_1',
      operation_id: 'op_9',
      action: 'delete_release',
      action_class: 'destructive',
      request_fingerprint: 'sha256:f',
      prior_dispatch_state: null,
      intent: { kind: 'delete_release' },
    });
    expect(decision).toEqual({ decision: 'denied' });
    const view = projectOperation(await ledger.query({ operation_id: 'op_9' }))!;
    expect(view.approvals).toMatchObject([
      { scope: 'per_call', decision: 'denied', approver: 'console:carol' },
    ]);
  });
});

describe('MCP elicitation approver', () => {
  it('adapts an elicit function and builds a form with one required boolean', async () => {
    const seen: ApprovalCard[] = [];
    const elicit: ElicitApproval = (c) => {
      seen.push(c);
      // What the gateway does: server.elicitInput(elicitationRequest(c)) then answerFromElicitation.
      const req = elicitationRequest(c);
      expect(req.requestedSchema.required).toEqual(['approve']);
      expect(req.message).toContain('Dispatch state so far: sent_no_response');
      expect(req.message).toContain('Planned recovery:');
      return Promise.resolve(
        answerFromElicitation({ action: 'accept', content: { approve: true } }),
      );
    };
    const a = elicitationApprover(elicit);
    expect(await a.ask(card())).toEqual({ decision: 'approved', by: 'mcp_elicitation' });
    expect(seen).toHaveLength(1);
  });

  it('decline, cancel, or accept without approve=true are a no', () => {
    expect(answerFromElicitation({ action: 'decline' })).toBe('denied');
    expect(answerFromElicitation({ action: 'cancel' })).toBe('denied');
    expect(answerFromElicitation({ action: 'accept', content: { approve: false } })).toBe('denied');
    expect(answerFromElicitation({ action: 'accept', content: { approve: 'true' } })).toBe(
      'denied',
    );
  });
});
