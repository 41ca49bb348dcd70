// Gate semantics on a memory ledger with synthetic engine contexts (the engine-level behaviour on
// real sockets is in test/approvals-*.test.ts).
import { describe, expect, it, vi } from 'vitest';
import { createIdFactory } from '../core/ids.js';
import { manualClock, seededRandom } from '../core/time.js';
import type { StoredEvent } from '../ledger/events.js';
import { openMemoryLedger } from '../ledger/memory/store.js';
import { projectOperation } from '../ledger/projection.js';
import type { Approver } from './approvers/approver.js';
import { scriptedApprover, type ScriptedAnswer } from './approvers/scripted.js';
import type { ApprovalCard } from './card.js';
import { createApprovalGate, type ApprovalContext } from './gate.js';
import { createPolicy } from './policy.js';

const TTL = 60_000;
const WITHDRAW = { timeout: 10_000 };
/** A financial retry after a sent request got no answer: the gate asks a person per request. */
const RETRY_AFTER_UNKNOWN = {
  action: 'create_payment',
  action_class: 'financial',
  prior_dispatch_state: 'sent_no_response',
} as const;

function setup(answers: ScriptedAnswer[] = [], lock?: () => Promise<boolean>) {
  const ledger = openMemoryLedger();
  const clock = manualClock();
  const approver = scriptedApprover(answers);
  const policy = createPolicy({ per_call_ttl_ms: TTL });
  if (!policy.ok) throw new Error('policy');
  const gate = createApprovalGate({
    ledger,
    approver,
    policy: policy.value,
    clock,
    ids: createIdFactory(clock, seededRandom(7)),
    random: seededRandom(8),
    ...(lock ? { lock } : {}),
  });
  return { ledger, clock, approver, gate };
}

function ctx(over: Partial<ApprovalContext> = {}): ApprovalContext {
  return {
    session_id: 'ses_A',
    operation_id: 'op_1',
    action: 'create_issue',
    action_class: 'create',
    request_fingerprint: 'sha256:aaa',
    prior_dispatch_state: null,
    intent: { kind: 'create_issue', subject_ref: null, params_digest: 'sha256:p' },
    ...over,
  };
}

const kinds = (events: StoredEvent[]) => events.map((e) => e.kind);

describe('approval gate', () => {
  it('locked: gate_locked, nobody asked, one gate_changed per observed change', async () => {
    let locked = true;
    const { gate, approver, ledger } = setup(['approved'], () => Promise.resolve(locked));
    expect(await gate.check(ctx())).toEqual({ decision: 'gate_locked' });
    expect(await gate.check(ctx({ action: 'create_payment', action_class: 'financial' }))).toEqual({
      decision: 'gate_locked',
    });
    expect(approver.cards).toHaveLength(0);
    locked = false;
    expect(await gate.check(ctx({ action: 'read_issue', action_class: 'read' }))).toEqual({
      decision: 'approved',
    });
    const events = await ledger.read();
    expect(events.map((e) => [e.kind, e.kind === 'gate_changed' ? e.data.locked : null])).toEqual([
      ['gate_changed', true],
      ['gate_changed', false],
    ]);
    expect(gate.prompts()).toBe(0);
  });

  it('a lock check that throws counts as locked', async () => {
    const { gate, approver } = setup(['approved'], () => Promise.reject(new Error('EACCES')));
    expect(await gate.check(ctx())).toEqual({ decision: 'gate_locked' });
    expect(approver.cards).toHaveLength(0);
  });

  it('reads never prompt and write nothing', async () => {
    const { gate, approver, ledger } = setup();
    for (let i = 0; i < 3; i++)
      expect(
        await gate.check(
          ctx({ action: 'read_issue', action_class: 'read', operation_id: `op_r${i}` }),
        ),
      ).toEqual({ decision: 'approved' });
    expect(approver.cards).toHaveLength(0);
    expect(await ledger.read()).toHaveLength(0);
    expect(gate.prompts('ses_A')).toBe(0);
  });

  it('session scope: one prompt per (session, action), none for repeats', async () => {
    const { gate, approver, ledger } = setup(['approved', 'approved', 'approved']);
    expect(await gate.check(ctx())).toEqual({ decision: 'approved' });
    expect(await gate.check(ctx({ operation_id: 'op_2' }))).toEqual({ decision: 'approved' });
    expect(approver.cards).toHaveLength(1);
    // Another action in the same session is not covered, nor the same action in another session.
    await gate.check(ctx({ operation_id: 'op_3', action: 'create_build' }));
    await gate.check(ctx({ operation_id: 'op_4', session_id: 'ses_B' }));
    expect(approver.cards.map((c) => [c.session_id, c.action, c.scope])).toEqual([
      ['ses_A', 'create_issue', 'session'],
      ['ses_A', 'create_build', 'session'],
      ['ses_B', 'create_issue', 'session'],
    ]);
    expect(gate.prompts('ses_A')).toBe(2);
    expect(gate.prompts('ses_B')).toBe(1);
    const events = await ledger.read();
    expect(kinds(events)).toEqual([
      'approval_requested',
      'approval_decided',
      'approval_requested',
      'approval_decided',
      'approval_requested',
      'approval_decided',
    ]);
    const first = events[0]!;
    expect(first.operation_id).toBe('op_1');
    expect(first.kind === 'approval_requested' && first.data).toMatchObject({
      scope: 'session',
      request_fingerprint: null,
      card: { instance_id: gate.instance_id, reason: 'session_policy' },
    });
  });

  it('concurrent checks for the same session approval share one prompt', async () => {
    let release: (d: 'approved') => void = () => undefined;
    let shown: () => void = () => undefined;
    const asked = new Promise<void>((r) => (shown = r));
    const { gate, approver } = setup([
      () => {
        shown();
        return new Promise((r) => (release = r));
      },
    ]);
    const a = gate.check(ctx());
    const b = gate.check(ctx({ operation_id: 'op_2' }));
    // The answer comes once the person is looking at the card, not after some time.
    await asked;
    release('approved');
    expect(await Promise.all([a, b])).toEqual([{ decision: 'approved' }, { decision: 'approved' }]);
    expect(approver.cards).toHaveLength(1);
  });

  it('a declined session approval ends the path without asking again', async () => {
    const { gate, approver, ledger } = setup(['denied', 'approved']);
    expect(await gate.check(ctx())).toEqual({ decision: 'denied' });
    expect(await gate.check(ctx({ operation_id: 'op_2' }))).toEqual({ decision: 'denied' });
    expect(approver.cards).toHaveLength(1);
    const view = projectOperation(await ledger.query({ operation_id: 'op_1' }))!;
    expect(view.approvals).toMatchObject([
      { scope: 'session', decision: 'denied', approver: 'scripted' },
    ]);
  });

  it('per call: bound to the fingerprint, used once, expires', async () => {
    const pay = { action: 'create_payment', action_class: 'financial' } as const;
    const { gate, approver, clock } = setup(['approved', 'approved', 'approved', 'approved']);
    expect(await gate.check(ctx({ ...pay, request_fingerprint: 'sha256:X' }))).toEqual({
      decision: 'approved',
    });
    // The first attempt never left (e.g. connection refused): the same request reuses it.
    expect(
      await gate.check(
        ctx({ ...pay, request_fingerprint: 'sha256:X', prior_dispatch_state: 'not_sent' }),
      ),
    ).toEqual({ decision: 'approved' });
    expect(approver.cards).toHaveLength(1);
    // Same operation, another fingerprint: not covered.
    await gate.check(
      ctx({ ...pay, request_fingerprint: 'sha256:Y', prior_dispatch_state: 'not_sent' }),
    );
    expect(approver.cards).toHaveLength(2);
    expect(approver.cards[1]).toMatchObject({ request_fingerprint: 'sha256:Y', scope: 'per_call' });
    // An attempt that was answered (known outcome, e.g. 429): the approval was used.
    await gate.check(
      ctx({
        ...pay,
        request_fingerprint: 'sha256:Y',
        prior_dispatch_state: 'response_received',
        prior_attempt: {
          category: 'rate_limited',
          remote_effect: 'none',
          dispatch_state: 'response_received',
        },
      }),
    );
    expect(approver.cards).toHaveLength(3);
    expect(approver.cards[2]!.reason).toBe('per_call_policy');
    // Past the TTL even an unused approval is gone.
    clock.advance(TTL + 1);
    await gate.check(
      ctx({ ...pay, request_fingerprint: 'sha256:Y', prior_dispatch_state: 'not_sent' }),
    );
    expect(approver.cards).toHaveLength(4);
  });

  it('an answer after the TTL is recorded as expired and approves nothing', async () => {
    const { gate, clock, ledger } = setup([
      () => {
        clock.advance(TTL + 5);
        return 'approved';
      },
    ]);
    const pay = ctx({ action: 'create_payment', action_class: 'financial' });
    expect(await gate.check(pay)).toEqual({ decision: 'denied' });
    const view = projectOperation(await ledger.query({ operation_id: 'op_1' }))!;
    expect(view.approvals).toMatchObject([{ scope: 'per_call', decision: 'expired' }]);
  });

  it('a denied call ends that operation; another operation is asked afresh', async () => {
    const pay = { action: 'create_payment', action_class: 'financial' } as const;
    const { gate, approver } = setup(['denied', 'approved']);
    expect(await gate.check(ctx(pay))).toEqual({ decision: 'denied' });
    expect(await gate.check(ctx({ ...pay, prior_dispatch_state: 'not_sent' }))).toEqual({
      decision: 'denied',
    });
    expect(approver.cards).toHaveLength(1);
    expect(await gate.check(ctx({ ...pay, operation_id: 'op_2' }))).toEqual({
      decision: 'approved',
    });
  });

  it('a destructive call prompts even with a session approval for a create', async () => {
    const { gate, approver } = setup(['approved', 'approved']);
    await gate.check(ctx());
    await gate.check(
      ctx({ operation_id: 'op_2', action: 'delete_release', action_class: 'destructive' }),
    );
    expect(approver.cards.map((c) => [c.action, c.scope])).toEqual([
      ['create_issue', 'session'],
      ['delete_release', 'per_call'],
    ]);
  });

  it('sensitive retry after an unknown outcome needs a per-call card even under a session approval', async () => {
    const policy = createPolicy({ actions: { create_payment: { scope: 'session' } } });
    if (!policy.ok) throw new Error('policy');
    const ledger = openMemoryLedger();
    const approver = scriptedApprover(['approved', 'approved']);
    const gate = createApprovalGate({ ledger, approver, policy: policy.value });
    const pay = { action: 'create_payment', action_class: 'financial' } as const;
    await gate.check(ctx(pay));
    await gate.check(ctx({ ...pay, operation_id: 'op_2' })); // covered by the session
    expect(approver.cards).toHaveLength(1);
    await gate.check(
      ctx({
        ...pay,
        operation_id: 'op_2',
        prior_dispatch_state: 'sent_no_response',
        retry: {
          reason: 'response_lost_after_dispatch',
          decision: 'destination_idempotency_confirmed',
        },
      }),
    );
    expect(approver.cards).toHaveLength(2);
    expect(approver.cards[1]).toMatchObject({
      scope: 'per_call',
      reason: 'retry_after_unknown',
      dispatch_state: 'sent_no_response',
      intent: { kind: 'create_issue' },
      planned_recovery: {
        action: 'retry_same_request',
        retry_reason: 'response_lost_after_dispatch',
        retry_decision: 'destination_idempotency_confirmed',
      },
    });
  });

  it('a sensitive retry-after-unknown grant does not survive a changed fingerprint at the gate itself', async () => {
    // The approval arrives after the asking call returned pending: a fresh grant for request X.
    let answer: (d: 'approved') => void = () => undefined;
    const ledger = openMemoryLedger();
    const approver = scriptedApprover([() => new Promise((r) => (answer = r))]);
    const gate = createApprovalGate({ ledger, approver, wait_ms: 0 });
    expect(
      await gate.check(ctx({ ...RETRY_AFTER_UNKNOWN, request_fingerprint: 'sha256:X' })),
    ).toMatchObject({
      decision: 'pending',
    });
    answer('approved');
    await vi.waitFor(() => expect(gate.open()).toBe(0));
    // The same operation now retries another request: the grant for X does not cover Y. The gate
    // asks again (the script has no more answers: denied) instead of approving.
    expect(
      await gate.check(ctx({ ...RETRY_AFTER_UNKNOWN, request_fingerprint: 'sha256:Y' })),
    ).toEqual({
      decision: 'denied',
    });
    expect(approver.cards.map((c) => [c.reason, c.request_fingerprint])).toEqual([
      ['retry_after_unknown', 'sha256:X'],
      ['retry_after_unknown', 'sha256:Y'],
    ]);
    const view = projectOperation(await ledger.query({ operation_id: 'op_1' }))!;
    expect(view.approvals.map((a) => a.decision)).toEqual(['approved', 'denied']);
  });

  // Its own timeout: a gate that waited on the open card instead of withdrawing it would hang.
  it(
    'an open retry-after-unknown card for one request does not cover another: withdrawn',
    WITHDRAW,
    async () => {
      // The person answers "approved" only as the card for X is withdrawn: too late to count.
      const cards: ApprovalCard[] = [];
      const approver: Approver = {
        name: 'person',
        ask(card, options) {
          cards.push(card);
          if (card.request_fingerprint !== 'sha256:X')
            return Promise.resolve({ decision: 'denied', by: 'person' });
          return new Promise((r) =>
            options?.signal?.addEventListener('abort', () =>
              r({ decision: 'approved', by: 'person' }),
            ),
          );
        },
      };
      const ledger = openMemoryLedger();
      const gate = createApprovalGate({ ledger, approver, wait_ms: 0 });
      expect(
        await gate.check(ctx({ ...RETRY_AFTER_UNKNOWN, request_fingerprint: 'sha256:X' })),
      ).toMatchObject({
        decision: 'pending',
      });
      // Another request under the same operation while X's card is still open: a card of its own.
      const y = await gate.check(ctx({ ...RETRY_AFTER_UNKNOWN, request_fingerprint: 'sha256:Y' }));
      expect(y.decision).not.toBe('approved');
      expect(cards.map((c) => c.request_fingerprint)).toEqual(['sha256:X', 'sha256:Y']);
      await vi.waitFor(() => expect(gate.open()).toBe(0));
      const view = projectOperation(await ledger.query({ operation_id: 'op_1' }))!;
      expect(view.approvals.map((a) => a.decision)).toEqual(['expired', 'denied']);
    },
  );

  it('a response that left the effect unknown also counts as unknown; a known one does not', async () => {
    const { gate, approver } = setup(['approved', 'approved', 'approved']);
    const del = { action: 'delete_release', action_class: 'destructive' } as const;
    await gate.check(ctx(del));
    await gate.check(
      ctx({
        ...del,
        prior_dispatch_state: 'response_received',
        prior_attempt: {
          category: 'malformed_response',
          remote_effect: 'unknown',
          dispatch_state: 'response_received',
        },
      }),
    );
    expect(approver.cards.map((c) => c.reason)).toEqual(['per_call_policy', 'retry_after_unknown']);
    expect(approver.cards[1]!.prior_attempt).toMatchObject({ category: 'malformed_response' });
  });

  it('an approver that fails is a denial, recorded as unreachable', async () => {
    const ledger = openMemoryLedger();
    const gate = createApprovalGate({
      ledger,
      approver: { name: 'broken', ask: () => Promise.reject(new Error('no tty')) },
    });
    expect(await gate.check(ctx())).toEqual({ decision: 'denied' });
    const view = projectOperation(await ledger.query({ operation_id: 'op_1' }))!;
    expect(view.approvals[0]).toMatchObject({ decision: 'denied', approver: 'broken:unreachable' });
  });

  it('a lock that closes while a person approves still wins', async () => {
    let locked = false;
    const { gate } = setup(
      [
        () => {
          locked = true;
          return 'approved';
        },
      ],
      () => Promise.resolve(locked),
    );
    expect(await gate.check(ctx())).toEqual({ decision: 'gate_locked' });
  });

  it('records reported lock transitions (vault onGateChange) without double-counting', async () => {
    let locked = false;
    const { gate, ledger } = setup([], () => Promise.resolve(locked));
    await gate.check(ctx({ action: 'read_issue', action_class: 'read' }));
    locked = true;
    gate.onGateChange({ locked: true, by: 'alice', at: 5 });
    await gate.idle();
    expect(await gate.check(ctx())).toEqual({ decision: 'gate_locked' });
    const changes = (await ledger.read()).filter((e) => e.kind === 'gate_changed');
    expect(changes.map((e) => e.data)).toEqual([{ locked: true, by: 'alice' }]);
  });
});
