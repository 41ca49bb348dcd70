// Ownership in a fleet (src/ledger/lease.ts holds the rules the store enforces). A runtime with
// `lease` configured holds a lease while it has a session and renews it on a timer; `takeOver`
// makes this runtime the owner of another process's operation by appending `owner_changed`, which
// the store admits only while the old owner holds no live lease — so a live owner is never
// displaced and, of two gateways racing for one operation, exactly one wins.
import { isLedgerFault, LedgerError } from '../ledger/ledger-error.js';
import { DEFAULT_LEASE_MS, leaseLive } from '../ledger/lease.js';
import type { EventPayloads } from '../ledger/events.js';
import type { OperationView } from '../ledger/projection.js';
import type { EngineContext, LeaseOptions } from './context.js';

export interface LeaseKeeper {
  /** Takes or renews the lease now and keeps renewing it until `stop`. */
  hold(): Promise<void>;
  /** Stops renewing and ends the lease (its operations may be taken over at once). */
  stop(): Promise<void>;
}

/** Keeps this runtime's lease; does nothing when leases are off or the store has none. */
export function createLeaseKeeper(
  ctx: EngineContext,
  options: LeaseOptions | undefined,
): LeaseKeeper {
  const leases = ctx.ledger.leases;
  if (!options || !leases) return { hold: () => Promise.resolve(), stop: () => Promise.resolve() };
  const ttl = Math.max(1_000, options.ttl_ms ?? DEFAULT_LEASE_MS);
  let timer: NodeJS.Timeout | null = null;
  const beat = async (): Promise<void> => {
    const now = ctx.clock.now();
    await leases.heartbeat(ctx.owner, now, now + ttl);
  };
  return {
    async hold() {
      await beat();
      if (timer) return;
      // A missed beat is not fatal: the next append fails too if the database is gone, and the
      // lease simply runs out if this process stalls (then another gateway may take over).
      timer = setInterval(() => void beat().catch(() => undefined), Math.floor(ttl / 3));
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      await leases.release(ctx.owner, ctx.clock.now()).catch(() => undefined);
    },
  };
}

export type TakeOver =
  { ok: true; view: OperationView } | { ok: false; why: string; view?: never; held?: OwnerHold };

/**
 * Another gateway's hold on an operation: `until` is when its live lease expires, `null` when it
 * holds no lease that could lapse (a lone gateway from an older version).
 */
export interface OwnerHold {
  owner: string;
  until: number | null;
}

/**
 * The hold another owner has on `view`'s operation, as a call with its operation_id would meet it
 * (`takeOver(…, { requireLease })`), or null when this runtime owns it or its owner's lease lapsed.
 */
export async function ownerHold(
  ctx: EngineContext,
  view: OperationView,
  requireLease: boolean,
): Promise<OwnerHold | null> {
  if (view.owner === ctx.owner || view.owner === null) return null;
  const [lease] = ctx.ledger.leases ? await ctx.ledger.leases.leases([view.owner]) : [];
  if (leaseLive(lease, ctx.clock.now())) return { owner: view.owner, until: lease!.expires_at };
  if (requireLease && !lease) return { owner: view.owner, until: null };
  return null;
}

/** The named arguments of `takeOver`. */
export interface TakeOverOptions {
  keeper: LeaseKeeper;
  requireLease?: boolean;
}

/**
 * Makes this runtime the owner of `view`'s operation. Refused (with the reason) when its owner's
 * lease is live, or when another gateway took it over first; `requireLease` also refuses an owner
 * that never held a lease (a `run` continuing an operation: only a lapsed lease proves the owner
 * gone).
 */
export async function takeOver(
  ctx: EngineContext,
  view: OperationView,
  by: EventPayloads['owner_changed']['by'],
  { keeper, requireLease = false }: TakeOverOptions,
): Promise<TakeOver> {
  if (view.owner === ctx.owner) return { ok: true, view };
  const from = view.owner ?? 'unknown';
  const at = ctx.clock.now();
  const [lease] = ctx.ledger.leases ? await ctx.ledger.leases.leases([from]) : [];
  if (leaseLive(lease, at)) {
    return {
      ok: false,
      why: `owned by ${from}, whose lease is live until ${new Date(lease!.expires_at).toISOString()}`,
      held: { owner: from, until: lease!.expires_at },
    };
  }
  if (requireLease && !lease) {
    return {
      ok: false,
      why: `owned by ${from}, which holds no lease that could lapse`,
      held: { owner: from, until: null },
    };
  }
  // The new owner must itself be alive in the lease table before it owns anything.
  await keeper.hold();
  try {
    await ctx.append([
      {
        kind: 'owner_changed',
        at,
        session_id: view.session_id,
        operation_id: view.operation_id,
        correlation_id: view.correlation_id,
        data: {
          from,
          to: ctx.owner,
          reason: lease ? 'lease_expired' : 'no_lease',
          lease_expired_at: lease ? lease.expires_at : null,
          by,
        },
      },
    ]);
  } catch (err) {
    if (err instanceof LedgerError && !isLedgerFault(err)) {
      return { ok: false, why: err.message };
    }
    throw err;
  }
  const after = await ctx.load(view.operation_id);
  return after ? { ok: true, view: after } : { ok: false, why: 'the operation vanished' };
}
