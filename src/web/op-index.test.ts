// The operations index against a naive reference: same rows, same order (duplicates, then
// unresolved, newest first), same counts, on every page of several filters.
import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '../ledger/events.js';
import { OperationIndex, priority, type OpFilter } from './op-index.js';

function build(n: number): OperationIndex {
  const ix = new OperationIndex();
  let seq = 0;
  const ev = (e: Record<string, unknown>): StoredEvent =>
    ({ ...e, seq: ++seq }) as unknown as StoredEvent;
  for (let i = 0; i < n; i++) {
    const base = {
      at: 1000 + i,
      session_id: `ses_${i % 3}`,
      operation_id: `op_${String(i).padStart(4, '0')}`,
      correlation_id: `c-${i}`,
    };
    ix.apply(
      ev({
        ...base,
        kind: 'operation_opened',
        data: { action: `a${i % 4}`, action_class: i % 5 === 0 ? 'read' : 'create' },
      }),
    );
    if (i % 7 === 0) continue; // stays open
    if (i % 11 === 0) {
      ix.apply(
        ev({
          ...base,
          kind: 'operation_resolved',
          data: { state: 'duplicate_effect_confirmed', remote_refs: [`r${i}a`, `r${i}b`] },
        }),
      );
    } else if (i % 13 === 0) {
      ix.apply(
        ev({ ...base, kind: 'operation_resolved', data: { state: 'unknown', remote_refs: [] } }),
      );
    } else {
      ix.apply(
        ev({
          ...base,
          kind: 'operation_resolved',
          data: { state: 'succeeded', remote_refs: [`r${i}`] },
        }),
      );
    }
  }
  return ix;
}

describe('OperationIndex.page', () => {
  const ix = build(400);
  const all = ix.page({}, 0, 10_000).rows;

  it('orders duplicates, then unresolved, then the rest, newest first', () => {
    expect(all).toHaveLength(400);
    const expected = [...all].sort(
      (a, b) => priority(a) - priority(b) || b.opened_at - a.opened_at,
    );
    expect(all.map((o) => o.id)).toEqual(expected.map((o) => o.id));
    expect(priority(all[0]!)).toBe(0);
  });

  const filters: OpFilter[] = [
    {},
    { states: ['unknown', 'open'] },
    { action: 'a1' },
    { cls: 'read', session: 'ses_1' },
    { from: 1100, to: 1250, states: ['succeeded', 'duplicate_effect_confirmed'] },
    { q: 'r33a' },
    { action: 'no_such_action' },
  ];
  it.each(filters)('every page of %j matches the reference', (f) => {
    const ref = all.filter(
      (o) =>
        (f.states === undefined || (o.state !== null && f.states.includes(o.state))) &&
        (f.action === undefined || o.action === f.action) &&
        (f.cls === undefined || o.cls === f.cls) &&
        (f.session === undefined || o.session === f.session) &&
        (f.from === undefined || o.opened_at >= f.from) &&
        (f.to === undefined || o.opened_at <= f.to) &&
        (f.q === undefined || o.refs.includes(f.q)),
    );
    for (const limit of [7, 50]) {
      for (let offset = 0; offset <= ref.length + limit; offset += limit) {
        const page = ix.page(f, offset, limit);
        expect(page.total).toBe(ref.length);
        expect(page.rows.map((o) => o.id)).toEqual(
          ref.slice(offset, offset + limit).map((o) => o.id),
        );
      }
    }
    const { states: _s, ...rest } = f;
    const base = ix.page(rest, 0, 1);
    expect(Object.values(base.counts).reduce((a, b) => a + b, 0)).toBe(base.total);
  });
});
