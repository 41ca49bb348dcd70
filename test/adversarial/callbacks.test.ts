// Issue 12, item 7: a user callback that throws (`remoteRef`, `matches`, `request`, `lookup`,
// `subjectRef`) never escapes `run()` or `reconcile()`: attempt_finished is still written and the
// envelope says what is known.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActionDefinition } from '../../src/engine/action.js';
import { startFakeService, type FakeService } from '../../src/fakes/index.js';
import { received, setup } from './support.js';

let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ seed: 7 });
});
afterAll(async () => {
  await fake.close();
});

const boom = (): never => {
  throw new Error('user callback failed');
};

function variant(base: ActionDefinition, over: Partial<ActionDefinition>): ActionDefinition {
  return { ...base, ...over, destination: { ...base.destination, ...over.destination } };
}

describe('throwing user callbacks', () => {
  it('remoteRef throws after a valid response: succeeded, attempt_finished on record', async () => {
    const s = setup(fake, ['approved']);
    const action = variant(s.action('create_issue'), { name: 'create_issue', remoteRef: boom });
    const env = await s.runtime.run(action, { title: 't' }, { correlationId: 'cb-1' });
    expect(env).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
    const v = await s.view(env.operation_id!);
    expect(v.attempts).toHaveLength(1);
    expect(v.attempts[0]!.finish).toMatchObject({ category: 'succeeded' });
    expect(v.state).toBe('succeeded');
    expect(fake.resources.list('issues', { client_ref: 'cb-1' })).toHaveLength(1);
  });

  it('request throws: an envelope, nothing recorded or sent', async () => {
    const s = setup(fake, ['approved']);
    const action = variant(s.action('create_issue'), { name: 'create_issue', request: boom });
    const env = await s.runtime.run(action, { title: 't' }, { correlationId: 'cb-2' });
    expect(env).toMatchObject({
      ok: false,
      category: 'local_failure',
      remote_effect: 'none',
      retry: 'escalate',
      operation_id: null,
    });
    expect(received(fake, 'cb-2')).toBe(0);
    expect(await s.ledger.query({ correlation_id: 'cb-2' })).toEqual([]);
  });

  it('request throws on a continuation only: no attempt, the earlier one stands', async () => {
    const s = setup(fake, ['approved']);
    fake.arm({ call_id: 'cb-3', phase: 'after_request_body', action: 'rst' });
    const first = await s.run('create_issue', { title: 't' }, { cor: 'cb-3' });
    expect(first).toMatchObject({ category: 'outcome_unknown' });
    let calls = 0;
    const base = s.action('create_issue');
    const flaky = variant(base, {
      name: 'create_issue',
      request: (i, c) => (++calls > 0 ? boom() : base.request(i, c)),
    });
    const env = await s.runtime.reconcile(first.operation_id!);
    expect(env.category).toBe('outcome_unknown');
    const again = await s.runtime.run(flaky, { title: 't' }, { operationId: first.operation_id! });
    expect(again.ok).toBe(false);
    // Issue 29: the refusal states the operation (its first attempt may have applied), with its
    // own code; the operation's directive stands.
    expect(again).toMatchObject({
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      data: { refusal: { code: 'request_changed' }, reason: 'unbuildable' },
    });
    expect(['reconcile_first', 'escalate']).toContain(again.retry);
    expect((await s.view(first.operation_id!)).attempts).toHaveLength(1);
    expect(received(fake, 'cb-3', 'POST')).toBe(1);
  });

  it('matches and lookup throw: reconcile answers, nothing learned; only the sent lookup is an observation', async () => {
    const s = setup(fake, ['approved']);
    fake.arm({ call_id: 'cb-4', phase: 'after_commit', action: 'rst' });
    const first = await s.run('create_issue', { title: 't' }, { cor: 'cb-4' });
    expect(first).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    const base = s.action('create_issue');
    const lookup = base.destination.reconciliation!;
    s.runtime.register(
      variant(base, {
        destination: {
          ...base.destination,
          reconciliation: { lookup: (c, i) => lookup.lookup(c, i), matches: boom },
        },
      }),
    );
    const m = await s.runtime.reconcile(first.operation_id!);
    expect(m).toMatchObject({ ok: false, category: 'outcome_unknown', remote_effect: 'unknown' });
    s.runtime.register(
      variant(base, {
        destination: {
          ...base.destination,
          reconciliation: { lookup: boom, matches: (b, i) => lookup.matches(b, i) },
        },
      }),
    );
    const l = await s.runtime.reconcile(first.operation_id!);
    expect(l).toMatchObject({ ok: false, remote_effect: 'unknown', retry: 'escalate' });
    const v = await s.view(first.operation_id!);
    // The lookup whose answer could not be read was sent: it is evidence (a failed lookup), and it
    // changes nothing. The lookup that could not be built was never sent: no observation.
    expect(v.observations).toMatchObject([
      { source: 'lookup', verdict: 'failed', status: 200, matches: 0, state_after: 'unknown' },
    ]);
    expect(v.state).toBe('unknown');
  });

  it('subjectRef throws: the operation opens without a subject reference', async () => {
    const s = setup(fake, ['approved']);
    const action = variant(s.action('create_issue'), { name: 'create_issue', subjectRef: boom });
    const env = await s.runtime.run(action, { title: 't' }, { correlationId: 'cb-5' });
    expect(env).toMatchObject({ ok: true });
    expect((await s.view(env.operation_id!)).intent).toMatchObject({ subject_ref: null });
  });
});
