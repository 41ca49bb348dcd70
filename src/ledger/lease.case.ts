// Ownership leases, part of the LedgerStore contract (run against memory, SQLite and PostgreSQL):
// a takeover is admitted only from the current owner and only when its lease is not live, of
// concurrent takeovers of one operation exactly one is stored, and a displaced owner can no longer
// start an attempt (fencing).
import { expect, it } from 'vitest';
import type { NewEvent, OwnerChangeReason } from './events.js';
import { LedgerError } from './ledger-error.js';
import { opened, started, type ContractSubject } from './events.case.js';
import { projectOperation } from './projection.js';
import type { OwnerLeases } from './lease.js';

const T0 = Date.UTC(2026, 0, 1);

export function ownerChanged(
  op: string,
  from: string,
  to: string,
  at: number,
  reason: OwnerChangeReason = 'lease_expired',
): NewEvent {
  return {
    kind: 'owner_changed',
    at,
    session_id: null,
    operation_id: op,
    correlation_id: null,
    data: { from, to, reason, lease_expired_at: null, by: 'recovery' },
  };
}

/** attempt_started of `op` by `worker` (an owner, or a delegated worker). */
function attemptBy(op: string, worker: string, n: number, at: number): NewEvent {
  const e = started(op, `att_${op}_${n}`, n);
  if (e.kind === 'attempt_started') e.data.worker = worker;
  return { ...e, at };
}

const leasesOf = (s: ContractSubject): OwnerLeases => {
  const leases = s.store.leases;
  if (!leases) throw new Error('store offers no leases');
  return leases;
};

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof LedgerError) return err.code;
    throw err;
  }
  return 'admitted';
}

export function leaseContract(
  withStore: (fn: (s: ContractSubject) => Promise<void>) => Promise<void>,
): void {
  it('never displaces an owner whose lease is live; takes over once it has run out', () =>
    withStore(async (s) => {
      const leases = leasesOf(s);
      await s.store.append([opened('op_1', { at: T0 })]); // owner gw-1
      await leases.heartbeat('gw-1', T0, T0 + 30_000);
      expect(
        await refusal(s.store.append([ownerChanged('op_1', 'gw-1', 'gw-2', T0 + 29_999)])),
      ).toBe('OWNER_CONFLICT');
      expect((await s.store.query({ operation_id: 'op_1' })).map((e) => e.kind)).toEqual([
        'operation_opened',
      ]);
      await s.store.append([ownerChanged('op_1', 'gw-1', 'gw-2', T0 + 30_000)]);
      const view = projectOperation(await s.store.query({ operation_id: 'op_1' }));
      expect(view?.owner).toBe('gw-2');
      expect(view?.owner_changes).toMatchObject([{ from: 'gw-1', to: 'gw-2', at: T0 + 30_000 }]);
      // The displaced owner cannot be displaced again: gw-2 owns it now.
      expect(
        await refusal(s.store.append([ownerChanged('op_1', 'gw-1', 'gw-3', T0 + 40_000)])),
      ).toBe('OWNER_CONFLICT');
      expect(await leases.leases(['gw-1', 'gw-9'])).toEqual([
        { owner: 'gw-1', expires_at: T0 + 30_000, heartbeat_at: T0 },
      ]);
    }));

  it('a released lease lets another gateway take over at once; no lease at all does too', () =>
    withStore(async (s) => {
      const leases = leasesOf(s);
      await s.store.append([opened('op_1', { at: T0 }), opened('op_2', { at: T0 })]);
      await leases.heartbeat('gw-1', T0, T0 + 30_000);
      await leases.release('gw-1', T0 + 5);
      await s.store.append([ownerChanged('op_1', 'gw-1', 'gw-2', T0 + 10)]);
      await s.store.append([ownerChanged('op_2', 'gw-1', 'gw-3', T0 + 10, 'no_lease')]);
      expect(projectOperation(await s.store.query({ operation_id: 'op_1' }))?.owner).toBe('gw-2');
      expect(projectOperation(await s.store.query({ operation_id: 'op_2' }))?.owner).toBe('gw-3');
    }));

  it('of concurrent takeovers of one operation exactly one is stored', () =>
    withStore(async (s) => {
      const ops = Array.from({ length: 20 }, (_, i) => `op_${i}`);
      await s.store.append(ops.map((op) => opened(op, { at: T0 })));
      // Two handles on the same storage where the adapter has them (two gateways).
      const other = s.reopen ? await s.reopen() : s.store;
      try {
        const tries = ops.flatMap((op) => [
          refusal(s.store.append([ownerChanged(op, 'gw-1', 'gw-a', T0 + 1)])),
          refusal(other.append([ownerChanged(op, 'gw-1', 'gw-b', T0 + 1)])),
        ]);
        const outcomes = await Promise.all(tries);
        for (let i = 0; i < ops.length; i++) {
          const pair = [outcomes[2 * i], outcomes[2 * i + 1]].sort();
          expect(pair).toEqual(['OWNER_CONFLICT', 'admitted']);
          const events = await s.store.query({ operation_id: ops[i]! });
          expect(events.filter((e) => e.kind === 'owner_changed')).toHaveLength(1);
        }
      } finally {
        if (other !== s.store) await other.close();
      }
    }));

  it('fences a displaced owner: its attempt_started is refused, the new owner’s admitted', () =>
    withStore(async (s) => {
      const leases = leasesOf(s);
      await s.store.append([opened('op_1', { at: T0 }), attemptBy('op_1', 'gw-1', 1, T0 + 1)]);
      await leases.heartbeat('gw-1', T0, T0 + 30_000);
      // gw-1 stalls past its lease; gw-2 takes the operation over.
      await s.store.append([ownerChanged('op_1', 'gw-1', 'gw-2', T0 + 30_000)]);
      // gw-1 wakes up and tries its retry: refused inside the append, nothing of the batch stored.
      expect(await refusal(s.store.append([attemptBy('op_1', 'gw-1', 2, T0 + 30_001)]))).toBe(
        'OWNER_CONFLICT',
      );
      // Even when it renewed its lease first, and in a batch with other work.
      await leases.heartbeat('gw-1', T0 + 30_002, T0 + 60_000);
      expect(
        await refusal(
          s.store.append([
            opened('op_2', { at: T0 + 30_003 }),
            attemptBy('op_1', 'gw-1', 2, T0 + 30_003),
          ]),
        ),
      ).toBe('OWNER_CONFLICT');
      expect(await s.store.query({ operation_id: 'op_2' })).toEqual([]);
      // The new owner, and a delegated worker (never an owner), may start attempts.
      await s.store.append([attemptBy('op_1', 'gw-2', 2, T0 + 30_004)]);
      await s.store.append([attemptBy('op_1', 'w-9', 3, T0 + 30_005)]);
      const view = projectOperation(await s.store.query({ operation_id: 'op_1' }));
      expect(view?.attempts.map((a) => a.worker)).toEqual(['gw-1', 'gw-2', 'w-9']);
      // Handed back (gw-2 lapsed, gw-1 took it again): gw-1 owns it and may attempt; gw-2 may not.
      await s.store.append([ownerChanged('op_1', 'gw-2', 'gw-1', T0 + 90_000)]);
      await s.store.append([attemptBy('op_1', 'gw-1', 4, T0 + 90_001)]);
      expect(await refusal(s.store.append([attemptBy('op_1', 'gw-2', 5, T0 + 90_002)]))).toBe(
        'OWNER_CONFLICT',
      );
      expect(
        projectOperation(await s.store.query({ operation_id: 'op_1' }))?.attempts.map(
          (a) => a.worker,
        ),
      ).toEqual(['gw-1', 'gw-2', 'w-9', 'gw-1']);
    }));

  it('fences within one transaction: a takeover and the old owner’s attempt racing', () =>
    withStore(async (s) => {
      const ops = Array.from({ length: 10 }, (_, i) => `op_${i}`);
      await s.store.append(ops.map((op) => opened(op, { at: T0 })));
      const other = s.reopen ? await s.reopen() : s.store;
      try {
        // The new owner takes over while the stalled one starts attempts: whichever is written
        // first, no attempt by gw-1 follows the takeover in the chain.
        const tries = ops.flatMap((op) => [
          refusal(s.store.append([ownerChanged(op, 'gw-1', 'gw-2', T0 + 1)])),
          refusal(other.append([attemptBy(op, 'gw-1', 1, T0 + 2)])),
        ]);
        await Promise.all(tries);
        for (const op of ops) {
          const kinds = (await s.store.query({ operation_id: op }))
            .filter((e) => e.kind !== 'operation_opened')
            .map((e) => e.kind);
          expect(kinds.indexOf('owner_changed')).toBeGreaterThanOrEqual(0);
          expect(kinds.slice(kinds.indexOf('owner_changed') + 1)).toEqual([]);
        }
      } finally {
        if (other !== s.store) await other.close();
      }
    }));
}
