// A caller told `retry: allowed` after a confirmed failure may continue the same operation; the
// attempt records why it was licensed. The engine never does so on its own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticCredentials } from '../src/engine/ports.js';
import { createRuntime } from '../src/runtime.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { projectOperation } from '../src/ledger/projection.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';

const TOKEN = 'licence-canary-0c1d';
let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 't', token: TOKEN }] });
});
afterAll(async () => {
  await fake.close();
});

describe('retry licence after a confirmed failure', () => {
  it("is the caller's to use, recorded as destination_refused_not_applied", async () => {
    const ledger = openMemoryLedger();
    const runtime = createRuntime({
      ledger,
      credentials: staticCredentials({
        [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` },
      }),
    });
    const create = referenceActions(fake.url).find((a) => a.name === 'create_issue')!;
    fake.arm({
      call_id: 'lic-1',
      phase: 'status',
      status: 500,
      body: { error: 'shard unavailable' },
    });
    const first = await runtime.run(create, { title: 'retry me' }, { correlationId: 'lic-1' });
    expect(first).toMatchObject({
      category: 'confirmed_failure',
      retry: 'allowed',
      remote_effect: 'none',
    });
    // The engine did not retry on its own.
    expect(fake.groundTruth('lic-1').filter((t) => t.event === 'received')).toHaveLength(1);

    const second = await runtime.run(
      create,
      { title: 'retry me' },
      { operationId: first.operation_id! },
    );
    expect(second).toMatchObject({
      ok: true,
      category: 'succeeded',
      operation_id: first.operation_id,
    });
    const view = projectOperation(await ledger.query({ operation_id: first.operation_id! }))!;
    expect(view.attempts.map((a) => a.retry_decision)).toEqual([
      null,
      'destination_refused_not_applied',
    ]);
    expect(view.attempts[1]!.retry_reason).toBe('destination_5xx');
    expect(fake.resources.list('issues', { client_ref: 'lic-1' })).toHaveLength(1);
  });
});
