// A changed amount, account or path is not a retry: continuing an operation with a changed request
// is refused, and the change becomes a new operation that supersedes the old one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticCredentials } from '../src/engine/ports.js';
import { createRuntime } from '../src/runtime.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { projectOperation } from '../src/ledger/projection.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';

const TOKEN = 'supersede-canary-77aa';
let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 't', token: TOKEN }] });
});
afterAll(async () => {
  await fake.close();
});

describe('supersession', () => {
  it('refuses a changed request as a retry and records a superseding operation instead', async () => {
    const ledger = openMemoryLedger();
    const runtime = createRuntime({
      ledger,
      credentials: staticCredentials({
        [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` },
      }),
      actions: referenceActions(fake.url),
    });
    const pay = referenceActions(fake.url).find((a) => a.name === 'create_payment')!;
    fake.arm({ call_id: 'pay-1', phase: 'status', status: 429, retry_after: 0 });
    const first = await runtime.run(
      pay,
      { amount: 100, currency: 'EUR' },
      { correlationId: 'pay-1' },
    );
    expect(first).toMatchObject({ category: 'rate_limited', retry: 'after_delay' });

    // The agent "retries" with another amount: that is not a retry. Refused with an envelope,
    // before any byte, and nothing recorded as an attempt.
    const changed = await runtime.run(
      pay,
      { amount: 150, currency: 'EUR' },
      { operationId: first.operation_id! },
    );
    // The envelope states the operation (rate limited, nothing applied) and the refusal's code.
    expect(changed).toMatchObject({
      ok: false,
      category: 'rate_limited',
      remote_effect: 'none',
      operation_id: first.operation_id,
      data: { refusal: { code: 'request_changed' }, reason: 'other_input' },
    });
    expect(changed.message).toMatch(/a changed request is a new operation/i);
    expect(
      projectOperation(await ledger.query({ operation_id: first.operation_id! }))!.attempts,
    ).toHaveLength(1);
    expect(fake.groundTruth('pay-1').filter((t) => t.event === 'received')).toHaveLength(1);

    const second = await runtime.supersede(
      first.operation_id!,
      { amount: 150, currency: 'EUR' },
      { correlationId: 'pay-2' },
    );
    expect(second).toMatchObject({ ok: true, category: 'succeeded' });
    expect(second.operation_id).not.toBe(first.operation_id);
    const newer = projectOperation(await ledger.query({ operation_id: second.operation_id! }))!;
    const older = projectOperation(await ledger.query({ operation_id: first.operation_id! }))!;
    expect(newer.supersedes_operation_id).toBe(first.operation_id);
    expect(older.superseded_by).toBe(second.operation_id);
    expect(newer.attempts[0]!.request_fingerprint).not.toBe(older.attempts[0]!.request_fingerprint);
    expect(fake.resources.list('payments', {}).map((p) => p.amount)).toEqual([150]);
  });
});
