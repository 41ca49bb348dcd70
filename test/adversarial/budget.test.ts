// Issue 12, item 4: the attempt budget is a hard limit per operation across run, reconcile and
// recover. After it: `reconcile_first` when a lookup exists, else `escalate`; never another POST.
//
// A loop that ignored the budget must fail these tests, not hang the suite: every fault fires a
// bounded number of times (a few more than the budget), so such a loop would reach a POST that
// succeeds and stop, and the counts below fail; and the tests have their own timeout, far under
// the suite's hang guard.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService } from '../../src/fakes/index.js';
import { received, setup } from './support.js';

let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ seed: 4 });
});
afterAll(async () => {
  await fake.close();
});

// Far above the few seconds these take on a loaded machine; far below the suite's 120 s hang guard.
const BOUNDED = { timeout: 30_000 };

describe('the attempt budget holds across run, reconcile and recover', BOUNDED, () => {
  it('create_release (budget 4, honoured key, lookup): 4 POSTs in all, whatever is called after', async () => {
    const s = setup(fake, ['approved']);
    // Every POST the budget allows (and two more) is received and dropped before commit: the
    // lookup finds nothing. A seventh POST would be answered: a loop past the budget ends there.
    fake.arm({ call_id: 'bud-1', phase: 'after_request_body', action: 'rst', times: 6 });
    const first = await s.run('create_release', { version: '4.0.0' }, { cor: 'bud-1' });
    expect(first).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      retry: 'reconcile_first',
    });
    expect(received(fake, 'bud-1', 'POST')).toBe(4);
    const opId = first.operation_id!;

    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await s.runtime.reconcile(opId));
    for (const a of answers) {
      expect(a).toMatchObject({ ok: false, remote_effect: 'unknown', retry: 'escalate' });
    }
    const again = await s.run('create_release', { version: '4.0.0' }, { op: opId });
    expect(again).toMatchObject({ remote_effect: 'unknown', retry: 'reconcile_first' });
    const recovered = await s.runtime.recover();
    expect(recovered.find((r) => r.operation_id === opId)).toMatchObject({
      outcome: 'needs_person',
      unresolved: true,
    });

    expect(received(fake, 'bud-1', 'POST')).toBe(4);
    expect((await s.view(opId)).attempts).toHaveLength(4);
    expect(fake.resources.list('releases', { client_ref: 'bud-1' })).toEqual([]);
    fake.disarm();
  });

  it('without a lookup: escalate once the budget is spent, and no further POST on a continuation', async () => {
    const s = setup(fake, ['approved']);
    // add_note: append, no key, no lookup. A 503 on a not-applied contract is not declared here,
    // so each 503 leaves the effect unknown: one attempt, then a person.
    fake.arm({ call_id: 'bud-2', phase: 'after_request_body', action: 'rst', times: 3 });
    const first = await s.run('add_note', { record_id: 'rec_9', text: 'x' }, { cor: 'bud-2' });
    expect(first).toMatchObject({ category: 'outcome_unknown', retry: 'escalate' });
    const again = await s.run(
      'add_note',
      { record_id: 'rec_9', text: 'x' },
      { op: first.operation_id! },
    );
    expect(again).toMatchObject({ retry: 'escalate' });
    expect(received(fake, 'bud-2', 'POST')).toBe(1);
    fake.disarm();
  });
});
