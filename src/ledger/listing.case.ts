// The operations listing part of the LedgerStore contract (run by `ledgerContractSuite` against
// every adapter): what a page holds, in which order, with which counts, and that keyset pages
// neither repeat nor skip an operation while new events are appended between them.
import { expect, it } from 'vitest';
import { seededRandom } from '../core/time.js';
import type { OperationState } from '../core/vocabulary.js';
import type { NewEvent } from './events.js';
import { memoryListing, type OperationsPage, type OperationsQuery } from './listing.js';
import type { LedgerStore } from './store.js';

const T0 = Date.UTC(2026, 0, 1);

function open(
  op: string,
  at: number,
  o: { action?: string; cls?: 'create' | 'read'; session?: string; correlation?: string } = {},
): NewEvent {
  return {
    kind: 'operation_opened',
    at,
    session_id: o.session ?? 'ses_a',
    operation_id: op,
    correlation_id: o.correlation ?? null,
    data: {
      owner: 'gw-1',
      action: o.action ?? 'create_ticket',
      action_class: o.cls ?? 'create',
      intent: { kind: 'create_ticket', subject_ref: 'app:web', params_digest: 'd'.repeat(64) },
      destination: { method: 'POST', route_template: '/v1/tickets' },
      idempotency_key: null,
      supersedes_operation_id: null,
      attempt_budget: 3,
      params: null,
    },
  };
}

function start(op: string, at: number, n = 1): NewEvent {
  return {
    kind: 'attempt_started',
    at,
    session_id: 'ses_a',
    operation_id: op,
    correlation_id: null,
    data: {
      attempt_id: `att_${op}_${n}`,
      number: n,
      worker: 'w-1',
      retry_of_attempt_id: null,
      retry_reason: null,
      retry_decision: null,
      attempt_budget_remaining: 3 - n,
      request_fingerprint: `sha256:${'a'.repeat(64)}`,
      prior_request_fingerprint: null,
      credential_ref: null,
      destination: { method: 'POST', route_template: '/v1/tickets' },
    },
  };
}

function resolve(op: string, at: number, state: OperationState, refs: string[] = []): NewEvent {
  return {
    kind: 'operation_resolved',
    at,
    session_id: 'ses_a',
    operation_id: op,
    correlation_id: null,
    data: {
      state,
      category: state === 'duplicate_effect_confirmed' ? 'duplicate_effect' : 'succeeded',
      by: 'reconciliation',
      remote_refs: refs,
    },
  };
}

function agentSession(session: string, agent: string, at: number): NewEvent {
  return {
    kind: 'session_started',
    at,
    session_id: session,
    operation_id: null,
    correlation_id: null,
    data: { owner: 'gw-1', instance_id: 'i-1', pid: 1, agent },
  };
}

const ids = (p: OperationsPage): string[] => p.rows.map((r) => r.operation_id);

/** Six operations, one per kind of row the view must tell apart. */
async function sample(store: LedgerStore): Promise<void> {
  await store.append([
    agentSession('ses_b', 'triage-bot', T0),
    open('op_a', T0 + 1, { correlation: 'case-1' }),
    resolve('op_a', T0 + 10, 'succeeded', ['ref_a']),
    open('op_b', T0 + 2, { session: 'ses_b', action: 'close_ticket' }),
    start('op_b', T0 + 11),
    open('op_c', T0 + 3, { action: 'close_ticket' }),
    resolve('op_c', T0 + 12, 'duplicate_effect_confirmed', ['ref_c1', 'ref_c2']),
    open('op_d', T0 + 4, { cls: 'read', action: 'list_tickets', session: 'ses_b' }),
    open('op_e', T0 + 5),
    resolve('op_e', T0 + 13, 'failed'),
  ]);
  // Succeeded, but two remote records were seen: a duplicate effect all the same.
  await store.append([
    open('op_f', T0 + 6, { correlation: 'case-1' }),
    resolve('op_f', T0 + 14, 'succeeded', ['ref_f1', 'ref_f2']),
  ]);
}

export function listingContract(
  withStore: (fn: (s: { store: LedgerStore }) => Promise<void>) => Promise<void>,
): void {
  it('lists operations in triage order (duplicates, unresolved, rest; newest first) with counts per state', () =>
    withStore(async ({ store }) => {
      await sample(store);
      const page = await store.operations({});
      expect(ids(page)).toEqual(['op_f', 'op_c', 'op_d', 'op_b', 'op_e', 'op_a']);
      expect(page.rows.map((r) => r.priority)).toEqual([0, 0, 1, 1, 2, 2]);
      expect(page.total).toBe(6);
      expect(page.counts).toEqual({
        open: 1,
        succeeded: 2,
        failed: 1,
        unknown: 1,
        cancelled: 0,
        duplicate_effect_confirmed: 1,
      });
      expect(page.next).toBeNull();
      expect(page.prev).toBeNull();
      const f = page.rows[0]!;
      expect(f).toMatchObject({
        operation_id: 'op_f',
        state: 'succeeded',
        duplicate: true,
        remote_refs: ['ref_f1', 'ref_f2'],
        action: 'create_ticket',
        action_class: 'create',
        session_id: 'ses_a',
        correlation_id: 'case-1',
        opened_at: T0 + 6,
        last_at: T0 + 14,
      });
      expect(page.rows.find((r) => r.operation_id === 'op_b')).toMatchObject({
        state: 'unknown',
        attempts: 1,
        duplicate: false,
      });
    }));

  it('filters by state, action, action class, session and time range; counts ignore the state part', () =>
    withStore(async ({ store }) => {
      await sample(store);
      const q = async (query: OperationsQuery): Promise<string[]> =>
        ids(await store.operations(query));
      expect(await q({ states: ['unknown', 'open'] })).toEqual(['op_d', 'op_b']);
      expect(await q({ states: ['succeeded'] })).toEqual(['op_f', 'op_a']);
      expect(await q({ action: 'close_ticket' })).toEqual(['op_c', 'op_b']);
      expect(await q({ action_class: 'read' })).toEqual(['op_d']);
      expect(await q({ session_id: 'ses_b' })).toEqual(['op_d', 'op_b']);
      expect(await q({ opened_from: T0 + 2, opened_to: T0 + 4 })).toEqual(['op_c', 'op_d', 'op_b']);
      expect(await q({ action: 'close_ticket', session_id: 'ses_b' })).toEqual(['op_b']);
      expect(await q({ action: 'no_such_action' })).toEqual([]);
      const filtered = await store.operations({ session_id: 'ses_b', states: ['open'] });
      expect(ids(filtered)).toEqual(['op_d']);
      expect(filtered.total).toBe(1);
      expect(filtered.counts).toMatchObject({ open: 1, unknown: 1, succeeded: 0 });
      const timed = await store.operations({ opened_from: T0 + 2, opened_to: T0 + 4 });
      expect(timed.counts).toMatchObject({ unknown: 1, open: 1, duplicate_effect_confirmed: 1 });
      expect(timed.total).toBe(3);
      expect(await q({ order: 'opened', session_id: 'ses_a' })).toEqual([
        'op_a',
        'op_c',
        'op_e',
        'op_f',
      ]);
    }));

  it('searches by operation id, id prefix, correlation id and remote reference', () =>
    withStore(async ({ store }) => {
      await sample(store);
      const q = async (search: string): Promise<string[]> =>
        ids(await store.operations({ search }));
      expect(await q('op_c')).toEqual(['op_c']);
      expect(await q('case-1')).toEqual(['op_f', 'op_a']);
      expect(await q('ref_c2')).toEqual(['op_c']);
      expect(await q('ref_nothing')).toEqual([]);
      await store.append([open('op_longname_1', T0 + 20), open('op_longname_2', T0 + 21)]);
      expect(await q('op_longn')).toEqual(['op_longname_2', 'op_longname_1']);
      const found = await store.operations({ search: 'case-1', states: ['succeeded'] });
      expect(found.counts.succeeded).toBe(2);
      expect(found.total).toBe(2);
      expect(ids(await store.operations({ operation_ids: ['op_e', 'op_a', 'op_x'] }))).toEqual([
        'op_e',
        'op_a',
      ]);
    }));

  it('pages by cursor: no repeat and no gap while new operations and events arrive', () =>
    withStore(async ({ store }) => {
      const events: NewEvent[] = [];
      for (let i = 0; i < 23; i++) {
        const op = `op_${String(i).padStart(3, '0')}`;
        // Equal opening times for some: the first event's seq breaks the tie.
        events.push(open(op, T0 + Math.floor(i / 3)));
        if (i % 4 === 0) events.push(start(op, T0 + 100));
        else if (i % 5 !== 1) events.push(resolve(op, T0 + 100, 'succeeded', [`ref_${i}`]));
      }
      await store.append(events);
      const first = await store.operations({ limit: 500 });
      const all = ids(first);
      expect(all).toHaveLength(23);
      expect(new Set(all).size).toBe(23);
      const unresolved = first.rows.filter((r) => r.priority === 1).map((r) => r.operation_id);
      expect(unresolved.length).toBeGreaterThan(3);
      const walk = async (between?: (n: number) => Promise<void>): Promise<string[][]> => {
        const pages: string[][] = [];
        let page = await store.operations({ limit: 4 });
        for (let n = 0; ; n++) {
          pages.push(ids(page));
          if (!page.next) return pages;
          await between?.(n);
          page = await store.operations({ limit: 4, after: page.next });
        }
      };
      // Between pages: a new operation, and another attempt of an unresolved one (same bucket).
      const live = await walk(async (n) => {
        await store.append([
          open(`op_new_${n}`, T0 + 1_000 + n),
          start(unresolved[n % unresolved.length]!, T0 + 2_000 + n, 2),
        ]);
      });
      expect(live.flat()).toEqual(all);
      expect(live.slice(0, -1).every((p) => p.length === 4)).toBe(true);
      // On a quiet ledger: the same pages forward, then backward with `prev` cursors.
      const pages = await walk();
      expect(pages.flat().filter((id) => !id.startsWith('op_new_'))).toEqual(all);
      let last = await store.operations({ limit: 4 });
      while (last.next) last = await store.operations({ limit: 4, after: last.next });
      const back: string[][] = [ids(last)];
      let prev = last.prev;
      while (prev) {
        const p = await store.operations({ limit: 4, before: prev });
        back.push(ids(p));
        prev = p.prev;
      }
      expect(back.reverse()).toEqual(pages);
      const filtered: string[] = [];
      let f = await store.operations({ limit: 2, states: ['unknown', 'succeeded'] });
      for (;;) {
        filtered.push(...ids(f));
        if (!f.next) break;
        f = await store.operations({ limit: 2, states: ['unknown', 'succeeded'], after: f.next });
      }
      const expected = ids(
        await store.operations({ limit: 500, states: ['unknown', 'succeeded'] }),
      );
      expect(filtered).toEqual(expected);
      expect(expected.length).toBeGreaterThan(10);
    }));

  it('offers the filter values: actions, classes and the newest sessions with their agent', () =>
    withStore(async ({ store }) => {
      await sample(store);
      const f = await store.facets();
      expect(f.actions).toEqual(['close_ticket', 'create_ticket', 'list_tickets']);
      expect(f.action_classes).toEqual(['create', 'read']);
      expect(f.sessions.map((s) => [s.session_id, s.agent, s.operations])).toEqual([
        ['ses_a', null, 4],
        ['ses_b', 'triage-bot', 2],
      ]);
      expect((await store.facets(1)).sessions).toHaveLength(1);
    }));

  it('walks every page of a query to exactly the reference list (seeded random histories)', () =>
    withStore(async ({ store }) => {
      const seed = 20261130;
      const rnd = seededRandom(seed);
      const pick = (n: number): number => rnd.bytes(1)[0]! % n;
      const reference = memoryListing();
      for (let round = 0; round < 6; round++) {
        const batch: NewEvent[] = [];
        for (let i = 0; i < 15; i++) {
          const op = `op_${round}_${i}`;
          batch.push(
            open(op, T0 + pick(20), {
              action: `act_${pick(3)}`,
              cls: pick(3) === 0 ? 'read' : 'create',
              session: `ses_${pick(3)}`,
              correlation: `corr_${pick(4)}`,
            }),
          );
          const k = pick(6);
          if (k === 1) batch.push(start(op, T0 + 50));
          else if (k === 2) batch.push(resolve(op, T0 + 60, 'succeeded', [`ref_${op}`]));
          else if (k === 3) batch.push(resolve(op, T0 + 60, 'failed'));
          else if (k === 4) batch.push(resolve(op, T0 + 60, 'succeeded', ['ref_x', `ref_${op}`]));
          else if (k === 5) batch.push(resolve(op, T0 + 60, 'duplicate_effect_confirmed', []));
        }
        const stored = await store.append(batch);
        reference.apply(stored);
      }
      const queries: OperationsQuery[] = [
        {},
        { states: ['open', 'unknown'] },
        { states: ['succeeded', 'failed'] },
        { action: 'act_1' },
        { action_class: 'read', session_id: 'ses_2' },
        { opened_from: T0 + 5, opened_to: T0 + 12 },
        // Partial-index paths of SQLite schema 5: rare resolved states and buckets 0/1 under a
        // filter, a time range with a filter.
        { states: ['failed'], action: 'act_2' },
        { states: ['open', 'duplicate_effect_confirmed'], session_id: 'ses_0' },
        { opened_from: T0 + 3, action: 'act_0' },
        { search: 'corr_2' },
        { search: 'ref_x', states: ['succeeded'] },
        { order: 'opened', session_id: 'ses_1' },
      ];
      for (const query of queries) {
        const label = `seed ${seed}, query ${JSON.stringify(query)}`;
        const want = await reference.operations({ ...query, limit: 500 });
        const walked: string[] = [];
        let page = await store.operations({ ...query, limit: 7 });
        expect(page.counts, label).toEqual(want.counts);
        expect(page.total, label).toBe(want.total);
        for (;;) {
          walked.push(...ids(page));
          if (!page.next) break;
          page = await store.operations({ ...query, limit: 7, after: page.next });
        }
        expect(walked, label).toEqual(ids(want));
        expect(want.rows.length, label).toBe(want.total);
      }
      expect((await reference.operations({ limit: 500 })).total).toBe(90);
    }));
}
