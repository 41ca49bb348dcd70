// The gate without approvals: it only watches the lock. Locked ⇒ `gate_locked` before any
// connection; every lock change it sees becomes one `gate_changed` ledger event, so "who locked,
// when" is on record even where nobody is asked for approvals.
import { systemClock, type Clock } from '../core/time.js';
import type { Gate, GateDecision } from '../engine/ports.js';
import type { LedgerStore } from '../ledger/store.js';
import type { LockSource } from './lock.js';

export function createLockGate(options: {
  ledger: LedgerStore;
  lock: LockSource;
  clock?: Clock;
}): Gate {
  const { ledger, lock } = options;
  const clock = options.clock ?? systemClock;
  let last: boolean | null = null;
  let chain: Promise<unknown> = Promise.resolve();

  async function observe(): Promise<boolean> {
    let locked: boolean;
    try {
      locked = await lock.isLocked();
    } catch {
      locked = true; // a lock that cannot be read fails closed
    }
    // The first look records only a lock already in place; afterwards every transition.
    if ((last === null && locked) || (last !== null && last !== locked)) {
      const holder = locked ? await lock.holder?.().catch(() => null) : null;
      await ledger.append([
        {
          kind: 'gate_changed',
          at: clock.now(),
          session_id: null,
          operation_id: null,
          correlation_id: null,
          data: { locked, by: holder?.by ?? lock.name },
        },
      ]);
    }
    last = locked;
    return locked;
  }

  function locked(): Promise<boolean> {
    const next = chain.then(observe, observe);
    chain = next.catch(() => undefined);
    return next;
  }

  return {
    check(): Promise<GateDecision> {
      return locked().then((l) => ({ decision: l ? 'gate_locked' : 'approved' }));
    },
    locked,
  };
}
