// The binding rule (DESIGN.md §2): which looked-up records are this operation's effect.
import { describe, expect, it } from 'vitest';
import { bindRecords, CLOCK_SKEW_MS, parseCreatedAt } from './lookup-binding.js';

const ctx = { operation_id: 'op_01', correlation_id: 'cor-7', idempotency_key: 'idem_01' };
const OPENED = Date.parse('2026-06-01T12:00:00Z');
const refs = (b: { bound: Array<{ ref: string }>; unbound: Array<{ ref: string }> }) => ({
  bound: b.bound.map((r) => r.ref),
  unbound: b.unbound.map((r) => r.ref),
});

describe('bindRecords', () => {
  it('rule a: the operation id, the key or the correlation value, anywhere in the record, by exact equality', () => {
    const records = [
      { ref: 'a', record: { id: 'a', client_ref: 'op_01' } },
      { ref: 'b', record: { id: 'b', meta: { tags: ['x', 'idem_01'] } } },
      { ref: 'c', record: { id: 'c', correlation: { value: 'cor-7' } } },
      // Contains the value, is not the value.
      { ref: 'd', record: { id: 'd', client_ref: 'op_01x', note: 'cor-7 said' } },
      { ref: 'e', record: { id: 'e' } },
    ];
    expect(refs(bindRecords({}, records, ctx, { input: {}, openedAt: OPENED }))).toEqual({
      bound: ['a', 'b', 'c'],
      unbound: ['d', 'e'],
    });
  });

  it('rule b: every identifying field must equal; a record older than the operation is not its effect', () => {
    const identify = (input: unknown) => {
      const i = input as { id: string; to: string };
      return { id: i.id, 'to.name': i.to };
    };
    const createdAt = (r: unknown) => parseCreatedAt((r as { created_at?: unknown }).created_at);
    const input = { id: 'p-1', to: 'ada' };
    const at = (ms: number) => new Date(OPENED + ms).toISOString();
    const records = [
      { ref: 'new', record: { id: 'p-1', to: { name: 'ada' }, created_at: at(5_000) } },
      // Within the clock skew allowance: the service's clock may run behind ours.
      { ref: 'skew', record: { id: 'p-1', to: { name: 'ada' }, created_at: at(-CLOCK_SKEW_MS) } },
      {
        ref: 'old',
        record: { id: 'p-1', to: { name: 'ada' }, created_at: at(-CLOCK_SKEW_MS - 1) },
      },
      { ref: 'other', record: { id: 'p-1', to: { name: 'bob' }, created_at: at(5_000) } },
      // No parseable time: the identifying fields decide.
      { ref: 'untimed', record: { id: 'p-1', to: { name: 'ada' }, created_at: 'yesterday-ish' } },
    ];
    expect(
      refs(bindRecords({ identify, createdAt }, records, ctx, { input, openedAt: OPENED })),
    ).toEqual({
      bound: ['new', 'skew', 'untimed'],
      unbound: ['old', 'other'],
    });
    // Without the operation's opening time no timed record passes the age check.
    expect(
      refs(bindRecords({ identify, createdAt }, records, ctx, { input, openedAt: null })).bound,
    ).toEqual(['untimed']);
    // Without a declared creation time, the identifying fields alone bind.
    expect(
      refs(bindRecords({ identify }, records, ctx, { input, openedAt: OPENED })).unbound,
    ).toEqual(['other']);
  });

  it('identifying fields that cannot be built bind nothing; an empty set binds nothing', () => {
    const records = [{ ref: 'x', record: { id: 'x' } }];
    const throws = () => {
      throw new TypeError('no input.id');
    };
    expect(
      refs(bindRecords({ identify: throws }, records, ctx, { input: {}, openedAt: OPENED })).bound,
    ).toEqual([]);
    expect(
      refs(bindRecords({ identify: () => ({}) }, records, ctx, { input: {}, openedAt: OPENED }))
        .bound,
    ).toEqual([]);
  });
});

describe('parseCreatedAt', () => {
  it('reads ISO 8601, epoch seconds and epoch milliseconds; anything else is null', () => {
    expect(parseCreatedAt('2020-01-01T00:00:00Z')).toBe(Date.UTC(2020, 0, 1));
    expect(parseCreatedAt(1_577_836_800)).toBe(Date.UTC(2020, 0, 1));
    expect(parseCreatedAt('1577836800000')).toBe(Date.UTC(2020, 0, 1));
    for (const v of [null, undefined, '', 'soon', {}, Number.NaN])
      expect(parseCreatedAt(v)).toBe(null);
  });
});
