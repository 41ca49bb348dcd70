// Ownership leases, part of the LedgerStore contract (run against memory, SQLite and PostgreSQL):
// a takeover is admitted only from the current owner and only when its lease is not live, and of
// concurrent takeovers of one operation exactly one is stored.
import { expect, it } from 'vitest';
import type { NewEvent, OwnerChangeReason } from './events.js';
import { LedgerError } from './ledger-error.js';
import { opened } from './contract.case.js';
import { projectOperation } from './projection.js';
import type { ContractSubject } from './contract.case.js';
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
}
