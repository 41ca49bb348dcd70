// Approvals and the locked gate through the real runtime against the fake service (real sockets).
// Each refusal is checked three ways: the envelope's category, the ledger's evidence, and the fake's
// ground truth (no request at all reached the service).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApprovalGate,
  scriptedApprover,
  type ApprovalCard,
  type ScriptedAnswer,
} from '../src/approvals/index.js';
import { runScriptedAgent, type ToolCaller } from '../src/agent/scripted.js';
import type { Envelope } from '../src/core/envelope.js';
import { staticCredentials } from '../src/engine/ports.js';
import { createRuntime } from '../src/runtime.js';
import { lookupRefusingInvalid, startFakeService, type FakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { projectOperation } from '../src/ledger/projection.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';

let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ seed: 11 });
});
afterAll(async () => {
  await fake.close();
});

function setup(answers: ScriptedAnswer[], lock?: () => Promise<boolean>) {
  const ledger = openMemoryLedger();
  const approver = scriptedApprover(answers);
  const gate = createApprovalGate({ ledger, approver, ...(lock ? { lock } : {}) });
  const runtime = createRuntime({
    ledger,
    credentials: staticCredentials({
      [REFERENCE_AUTHORITY]: { authorization: 'Bearer t0ken-abc' },
    }),
    gate,
    sleep: () => Promise.resolve(),
    lookup: lookupRefusingInvalid,
  });
  const actions = new Map(referenceActions(fake.url).map((a) => [a.name, a]));
  const run = (name: string, input: unknown, correlationId: string, operationId?: string) =>
    runtime.run(actions.get(name)!, input, {
      correlationId,
      ...(operationId ? { operationId } : {}),
    });
  return { ledger, approver, gate, runtime, run };
}

async function opEvents(ledger: LedgerStore, env: Envelope) {
  const events = await ledger.query({ operation_id: env.operation_id! });
  return { events, view: projectOperation(events)! };
}

describe('refusals: each has its own category and evidence, and nothing reaches the service', () => {
  it('gate locked: gate_locked, nobody asked, no attempt, 0 requests', async () => {
    const { ledger, approver, gate, run } = setup(['approved'], () => Promise.resolve(true));
    const env = await run('create_issue', { title: 'locked' }, 'appr-locked');
    expect(env).toMatchObject({
      ok: false,
      category: 'gate_locked',
      retry: 'never',
      remote_effect: 'none',
    });
    expect(fake.groundTruth('appr-locked')).toEqual([]);
    expect(approver.cards).toHaveLength(0);
    const { view } = await opEvents(ledger, env);
    expect(view.attempts).toHaveLength(0);
    expect(view.approvals).toHaveLength(0);
    expect(view.state).toBe('cancelled');
    expect(view.resolution).toMatchObject({ category: 'gate_locked' });
    const changes = (await ledger.read()).filter((e) => e.kind === 'gate_changed');
    expect(changes.map((e) => e.data)).toEqual([{ locked: true, by: 'observed:lock' }]);
    expect(gate.prompts()).toBe(0);
  });

  it('session declined: approval_denied with a declined session approval on record, 0 requests', async () => {
    const { ledger, approver, run } = setup(['denied']);
    const env = await run('create_issue', { title: 'declined' }, 'appr-session-no');
    expect(env).toMatchObject({
      ok: false,
      category: 'approval_denied',
      retry: 'never',
      remote_effect: 'none',
    });
    expect(fake.groundTruth('appr-session-no')).toEqual([]);
    const { view } = await opEvents(ledger, env);
    expect(view.attempts).toHaveLength(0);
    expect(view.approvals).toMatchObject([
      { scope: 'session', decision: 'denied', request_fingerprint: null },
    ]);
    expect(view.prompts).toBe(1);
    expect(view.resolution).toMatchObject({ state: 'cancelled', category: 'approval_denied' });
    // The path is closed: the same action in the same session is refused without asking again.
    const again = await run('create_issue', { title: 'declined again' }, 'appr-session-no-2');
    expect(again.category).toBe('approval_denied');
    expect(approver.cards).toHaveLength(1);
    expect(fake.groundTruth('appr-session-no-2')).toEqual([]);
  });

  it('call denied: approval_denied with a denied per-call approval on record, 0 requests', async () => {
    const { ledger, approver, run } = setup(['denied']);
    const env = await run('create_payment', { amount: 500, currency: 'EUR' }, 'appr-call-no');
    expect(env).toMatchObject({
      ok: false,
      category: 'approval_denied',
      retry: 'never',
      remote_effect: 'none',
    });
    expect(fake.groundTruth('appr-call-no')).toEqual([]);
    const { view } = await opEvents(ledger, env);
    expect(view.attempts).toHaveLength(0);
    expect(view.approvals).toMatchObject([{ scope: 'per_call', decision: 'denied' }]);
    expect(approver.cards[0]).toMatchObject({
      scope: 'per_call',
      reason: 'per_call_policy',
      action_class: 'financial',
    });
    expect(fake.resources.list('payments', { client_ref: 'appr-call-no' })).toEqual([]);
  });
});

describe('prompts where they matter, and only there', () => {
  it('a read never prompts; a destructive call prompts even with a session approval for a create', async () => {
    const { ledger, approver, gate, runtime, run } = setup(['approved', 'approved']);
    const created = await run('create_release', { version: '1.0.0' }, 'appr-rel-create');
    expect(created).toMatchObject({ ok: true, category: 'succeeded' });
    const id = (created.data as { id: string }).id;
    const read = await run('read_issue', { id: 'iss_none' }, 'appr-read');
    expect(read.category).not.toBe('approval_denied');
    expect(fake.groundTruth('appr-read').length).toBeGreaterThan(0);
    expect(approver.cards.map((c) => c.action)).toEqual(['create_release']);
    const deleted = await run('delete_release', { id }, 'appr-rel-delete');
    expect(deleted).toMatchObject({ ok: true, category: 'succeeded' });
    expect(approver.cards.map((c) => [c.action, c.scope])).toEqual([
      ['create_release', 'session'],
      ['delete_release', 'per_call'],
    ]);
    expect(gate.prompts(await runtime.sessionId())).toBe(2);
    const { view } = await opEvents(ledger, deleted);
    expect(view.approvals).toMatchObject([{ scope: 'per_call', decision: 'approved' }]);
  });

  it('a retry after outcome_unknown on a financial action needs a per-call approval with intent, dispatch state and planned recovery', async () => {
    const { ledger, approver, run } = setup(['approved', 'approved']);
    fake.arm({ call_id: 'appr-pay-retry', phase: 'after_commit', action: 'rst' });
    const env = await run('create_payment', { amount: 1200, currency: 'EUR' }, 'appr-pay-retry');
    // The engine retried under the honoured idempotency key; the fake replayed the first result.
    expect(env).toMatchObject({ ok: true, category: 'succeeded' });
    const truth = fake.groundTruth('appr-pay-retry');
    expect(truth.filter((t) => t.event === 'received')).toHaveLength(2);
    expect(truth.filter((t) => t.event === 'mutation_committed')).toHaveLength(1);
    expect(approver.cards.map((c) => c.reason)).toEqual(['per_call_policy', 'retry_after_unknown']);
    const retryCard = approver.cards[1]!;
    expect(retryCard).toMatchObject({
      scope: 'per_call',
      operation_id: env.operation_id,
      dispatch_state: 'sent_no_response',
      intent: { kind: 'create_payment' },
      prior_attempt: { number: 1, category: 'outcome_unknown', remote_effect: 'unknown' },
      planned_recovery: {
        action: 'retry_same_request',
        retry_reason: 'response_lost_after_dispatch',
      },
    });
    expect(retryCard.planned_recovery?.idempotency_key).toMatch(/./);
    expect(retryCard.planned_recovery?.summary).toContain(
      retryCard.planned_recovery!.idempotency_key!,
    );
    const { view } = await opEvents(ledger, env);
    expect(view.prompts).toBe(2);
    expect(view.approvals.map((a) => [a.scope, a.decision, a.card['reason']])).toEqual([
      ['per_call', 'approved', 'per_call_policy'],
      ['per_call', 'approved', 'retry_after_unknown'],
    ]);
    // The recorded card is the one the person saw.
    expect(view.approvals[1]!.card).toMatchObject({
      dispatch_state: 'sent_no_response',
      planned_recovery: { action: 'retry_same_request' },
    });
  });

  it('a declined retry after outcome_unknown sends nothing more', async () => {
    const { ledger, run } = setup(['approved', 'denied']);
    fake.arm({ call_id: 'appr-pay-noretry', phase: 'after_commit', action: 'rst' });
    const env = await run('create_payment', { amount: 700, currency: 'EUR' }, 'appr-pay-noretry');
    expect(env.category).toBe('approval_denied');
    // The refusal must not claim nothing happened: the first attempt may have applied the payment.
    expect(env).toMatchObject({ remote_effect: 'unknown', retry: 'reconcile_first' });
    expect(env.message).toContain('whether the earlier attempt applied');
    const truth = fake.groundTruth('appr-pay-noretry');
    expect(truth.filter((t) => t.event === 'received')).toHaveLength(1);
    expect(truth.filter((t) => t.event === 'mutation_committed')).toHaveLength(1);
    const { view } = await opEvents(ledger, env);
    // The first attempt may have applied: the operation stays unresolved for reconciliation.
    expect(view.attempts).toHaveLength(1);
    expect(view.state).toBe('unknown');
    expect(await ledger.unresolved()).toContain(env.operation_id);
  });
});

describe('a scripted agent under the gate', () => {
  it('does the approved action, stops at the denied one, and never reaches the service for it', async () => {
    const { approver, runtime } = setup([
      (c: ApprovalCard) => (c.action === 'create_issue' ? 'approved' : 'denied'),
      (c: ApprovalCard) => (c.action === 'create_issue' ? 'approved' : 'denied'),
    ]);
    const actions = new Map(referenceActions(fake.url).map((a) => [a.name, a]));
    let n = 0;
    const call: ToolCaller = (tool, args) => {
      const { operation_id: operationId, ...input } = args;
      return runtime.run(actions.get(tool)!, input, {
        correlationId: `appr-agent-${++n}`,
        ...(typeof operationId === 'string' ? { operationId } : {}),
      });
    };
    const result = await runScriptedAgent(
      [
        { name: 'issue', tool: 'create_issue', args: () => ({ title: 'agent issue' }) },
        { name: 'payment', tool: 'create_payment', args: () => ({ amount: 99, currency: 'EUR' }) },
        { name: 'after', tool: 'create_issue', args: () => ({ title: 'never reached' }) },
      ],
      call,
      { sleep: () => Promise.resolve() },
    );
    expect(result.completed).toBe(false);
    expect(result.stopped_at).toEqual({
      step: 'payment',
      category: 'approval_denied',
      retry: 'never',
    });
    expect(result.calls).toBe(2);
    expect(fake.groundTruth('appr-agent-1').some((t) => t.event === 'mutation_committed')).toBe(
      true,
    );
    expect(fake.groundTruth('appr-agent-2')).toEqual([]);
    expect(approver.cards.map((c) => [c.action, c.scope])).toEqual([
      ['create_issue', 'session'],
      ['create_payment', 'per_call'],
    ]);
  });
});
