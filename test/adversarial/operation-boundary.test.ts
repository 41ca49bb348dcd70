// Issue 12, items 1 and 2: an existing operation id only ever continues the SAME request (same
// action, same intent digest) in every state; a mismatch is refused before any prompt or byte with
// nothing recorded as an attempt. Issue 29: the refusal's envelope states the operation it named
// (what its attempts established), with the refusal as `data.refusal`. Approval cards show the
// request that will actually be sent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService } from '../../src/fakes/index.js';
import { received, setup } from './support.js';

let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ seed: 12 });
});
afterAll(async () => {
  await fake.close();
});

const CHANGED = /a changed request is a new operation/i;

/** create_deployment as a new configuration would define it: same input, another body. */
function redefined(s: ReturnType<typeof setup>) {
  const original = s.action('create_deployment');
  return {
    ...original,
    request: (
      i: { service: string; version: string },
      rctx: Parameters<typeof original.request>[1],
    ) => {
      const spec = original.request(i, rctx) as { body: Record<string, unknown> };
      return { ...spec, body: { ...spec.body, replicas: 3 } };
    },
  } as typeof original;
}

describe('continuing an operation is only ever the same request', () => {
  it('gate_locked, then the same operation_id with a changed amount: refused before any prompt or byte', async () => {
    const s = setup(fake, ['approved', 'approved']);
    s.lock.locked = true;
    const locked = await s.run('create_payment', { amount: 100, currency: 'EUR' }, { cor: 'ob-1' });
    expect(locked).toMatchObject({ category: 'gate_locked', remote_effect: 'none' });
    const opId = locked.operation_id!;
    s.lock.locked = false;

    const changed = await s.run(
      'create_payment',
      { amount: 999_999, currency: 'EUR' },
      { op: opId },
    );
    // The operation was stopped by the locked gate before any byte: that is what it states.
    expect(changed).toMatchObject({
      ok: false,
      category: 'gate_locked',
      operation_id: opId,
      remote_effect: 'none',
      data: { refusal: { code: 'request_changed' }, reason: 'other_input' },
    });
    expect(changed.message).toMatch(CHANGED);
    expect(s.approver.cards).toHaveLength(0); // nobody was asked
    expect(received(fake, 'ob-1')).toBe(0); // no byte
    const v = await s.view(opId);
    expect(v.attempts).toHaveLength(0);
    expect(v.approvals).toHaveLength(0);
    expect(fake.resources.list('payments', { client_ref: 'ob-1' })).toEqual([]);

    // The same request does continue: one prompt, whose card shows amount 100 — what is sent.
    const same = await s.run('create_payment', { amount: 100, currency: 'EUR' }, { op: opId });
    expect(same).toMatchObject({ ok: true, category: 'succeeded', operation_id: opId });
    expect(fake.resources.list('payments', { client_ref: 'ob-1' }).map((p) => p.amount)).toEqual([
      100,
    ]);
  });

  it('a settled operation called again with changed input states the settled operation with a request_changed refusal and sends nothing', async () => {
    const s = setup(fake, ['approved']);
    const done = await s.run(
      'create_deployment',
      { service: 'billing', version: '1.0.0' },
      { cor: 'ob-2' },
    );
    expect(done).toMatchObject({ ok: true, category: 'succeeded' });
    const again = await s.run(
      'create_deployment',
      { service: 'billing', version: '2.0.0' },
      { op: done.operation_id! },
    );
    // The operation's state is stated (it succeeded) with the refusal: this call was not sent.
    expect(again).toMatchObject({
      ok: true,
      category: 'succeeded',
      remote_effect: 'applied',
      retry: 'never',
      data: { refusal: { code: 'request_changed' } },
    });
    expect(again.message).toMatch(CHANGED);
    expect(received(fake, 'ob-2', 'POST')).toBe(1);
    expect((await s.view(done.operation_id!)).attempts).toHaveLength(1);
    // The unchanged request still answers with the stored success, without sending.
    const same = await s.run(
      'create_deployment',
      { service: 'billing', version: '1.0.0' },
      { op: done.operation_id! },
    );
    // The unchanged request answers the settled state (issue 29: already settled, nothing sent).
    expect(same).toMatchObject({
      ok: true,
      category: 'succeeded',
      remote_effect: 'applied',
      data: { refusal: { code: 'already_settled' } },
    });
    expect(received(fake, 'ob-2', 'POST')).toBe(1);
  });

  it("another tool given a payment's operation_id sends nothing under the payment", async () => {
    const s = setup(fake, ['approved']);
    const pay = await s.run('create_payment', { amount: 42, currency: 'EUR' }, { cor: 'ob-3' });
    expect(pay).toMatchObject({ ok: true });
    const note = await s.run(
      'add_note',
      { record_id: 'rec_1', text: 'hello' },
      { op: pay.operation_id! },
    );
    expect(note).toMatchObject({
      ok: true,
      category: 'succeeded',
      retry: 'never',
      data: { refusal: { code: 'request_changed' } },
    });
    expect(note.message).toMatch(CHANGED);
    expect(note.data).toMatchObject({ reason: 'other_action', operation_action: 'create_payment' });
    expect(received(fake, 'ob-3')).toBe(1); // only the payment itself
    const v = await s.view(pay.operation_id!);
    expect(v.action).toBe('create_payment');
    expect(v.attempts).toHaveLength(1);
    expect(s.approver.cards).toHaveLength(1);
  });
});

describe("continuing after the action's definition changed", () => {
  it('same input, other request bytes (a new configuration): refused before anything is recorded or sent', async () => {
    const s = setup(fake, ['approved']);
    fake.arm({ call_id: 'ob-def', phase: 'after_commit', action: 'rst' });
    const input = { service: 'ledger', version: '3.1.0' };
    const first = await s.run('create_deployment', input, { cor: 'ob-def' });
    expect(first).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    const opId = first.operation_id!;
    const before = (await s.ledger.read()).length;
    const asked = s.approver.cards.length;

    // The same action name and input, but its definition now builds another body: the intent
    // digest (the input) matches, the request that would be sent does not.
    const again = await s.runtime.run(redefined(s), input, { operationId: opId });
    expect(again).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      operation_id: opId,
      remote_effect: 'unknown',
      data: { refusal: { code: 'request_changed' }, reason: 'other_request' },
    });
    expect(again.message).toMatch(CHANGED);
    // Nothing recorded, nobody asked, no byte.
    expect(await s.ledger.read()).toHaveLength(before);
    expect(s.approver.cards).toHaveLength(asked);
    expect(received(fake, 'ob-def', 'POST')).toBe(1);
    expect((await s.view(opId)).attempts).toHaveLength(1);
  });
});

describe("continuing after the action's definition changed, before any attempt", () => {
  it('stopped by the locked gate, then the same input under a redefined action: refused, nothing recorded, asked or sent', async () => {
    const s = setup(fake, ['approved']);
    s.lock.locked = true;
    const input = { service: 'ledger', version: '3.2.0' };
    const locked = await s.run('create_deployment', input, { cor: 'ob-def0' });
    expect(locked).toMatchObject({ category: 'gate_locked', remote_effect: 'none' });
    const opId = locked.operation_id!;
    expect((await s.view(opId)).attempts).toHaveLength(0);
    s.lock.locked = false;
    const before = (await s.ledger.read()).length;

    // Its opening built (and its record names) the request the first attempt would send; the
    // action now builds another body for the same input.
    const again = await s.runtime.run(redefined(s), input, { operationId: opId });
    expect(again).toMatchObject({
      ok: false,
      category: 'gate_locked',
      operation_id: opId,
      remote_effect: 'none',
      data: { refusal: { code: 'request_changed' }, reason: 'other_request' },
    });
    expect(again.message).toMatch(CHANGED);
    expect(await s.ledger.read()).toHaveLength(before);
    expect(s.approver.cards).toHaveLength(0);
    expect(received(fake, 'ob-def0')).toBe(0);

    // The definition it was opened under continues it: one approval, one request.
    const same = await s.runtime.run(s.action('create_deployment'), input, { operationId: opId });
    expect(same).toMatchObject({ ok: true, category: 'succeeded', operation_id: opId });
    expect(received(fake, 'ob-def0', 'POST')).toBe(1);
  });
});

describe("reconciling after the action's definition changed", () => {
  it('a retry under the key that the recorded input no longer rebuilds: nobody is asked, nothing is sent', async () => {
    const s = setup(fake, ['approved']);
    // Received and dropped before commit, by a worker making one attempt: the lookup will find
    // nothing, and the idempotency key would license a retry.
    fake.arm({ call_id: 'ob-rdef', phase: 'after_request_body', action: 'rst' });
    const input = { principal: 'u_7', role: 'admin' };
    const first = await s.runtime.run(s.action('grant_permission'), input, {
      correlationId: 'ob-rdef',
      worker: 'w1',
    });
    expect(first).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    const opId = first.operation_id!;
    const asked = s.approver.cards.length;

    // A new configuration: the same action name now builds another body.
    const original = s.action('grant_permission');
    s.runtime.register({
      ...original,
      request: (i: typeof input, rctx: Parameters<typeof original.request>[1]) => {
        const spec = original.request(i, rctx) as { body: Record<string, unknown> };
        return { ...spec, body: { ...spec.body, role: 'owner' } };
      },
    } as typeof original);
    const env = await s.runtime.reconcile(opId);
    // The lookup was made; no approval card for the changed request, no second POST, no attempt.
    expect(received(fake, 'ob-rdef.lookup')).toBe(1);
    expect(s.approver.cards).toHaveLength(asked);
    expect(received(fake, 'ob-rdef', 'POST')).toBe(1);
    const v = await s.view(opId);
    expect(v.attempts).toHaveLength(1);
    expect(v.approvals).toHaveLength(asked);
    expect(fake.resources.list('permissions', { client_ref: 'ob-rdef' })).toEqual([]);
    expect(env).toMatchObject({ ok: false, remote_effect: 'unknown', retry: 'escalate' });
    expect(env.message).toMatch(/no longer rebuilds the request/);
  });
});

describe('approval cards show the request that will be sent', () => {
  it('the card carries the prepared request of that attempt, as the fake received it', async () => {
    const s = setup(fake, ['approved']);
    const pay = await s.run('create_payment', { amount: 73, currency: 'CHF' }, { cor: 'ob-4' });
    expect(pay).toMatchObject({ ok: true });
    const card = s.approver.cards[0]!;
    // The headers the engine sends (the credential only named, never its value), for the
    // approvals page to show the exact request.
    const idempotencyKey = card.request?.headers?.['idempotency-key'];
    expect(idempotencyKey).toMatch(/^candor-/);
    expect(card.request).toEqual({
      method: 'POST',
      target: '/v1/payments',
      destination: fake.url,
      body: { amount: 73, currency: 'CHF', client_ref: 'ob-4' },
      headers: {
        accept: 'application/json',
        'content-type': 'application/json',
        'idempotency-key': idempotencyKey,
        'x-candor-call-id': 'ob-4',
        'x-correlation-id': 'ob-4',
      },
      credential: 'vault:reference-api',
    });
    expect(JSON.stringify(card)).not.toContain(TOKEN_FRAGMENT);
    expect(fake.resources.list('payments', { client_ref: 'ob-4' })).toMatchObject([
      { amount: 73, currency: 'CHF' },
    ]);
    // The card on record in the ledger is the same card.
    const v = await s.view(pay.operation_id!);
    expect(v.approvals[0]!.card).toMatchObject({ request: card.request });
  });
});

const TOKEN_FRAGMENT = 'canary';
