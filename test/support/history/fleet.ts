// Fleet histories: two gateways on one PostgreSQL ledger. The first owner (B) runs the operation
// and stalls past its lease while holding the answer to one of its attempts (the answer arrived,
// the process has not acted on it yet: a GC pause, a SIGSTOP, a partition). Meanwhile the agent's
// work moves to the other gateway (A), which takes the operation over — by the agent's call with
// the operation_id, or by A's sweep — and settles what it can. Then B resumes and acts on its late
// answer, and B's agent reads what B tells it. Every claim, from either gateway and the ledger, is
// checked against the fake's ground truth after every step.
//
// B's clock runs a minute behind with a 30 s lease, so from A's side B's lease has always lapsed:
// the takeover never waits on a real timer (as in test/fleet-postgres.test.ts).
import type { Envelope } from '../../../src/core/envelope.js';
import type { LedgerStore } from '../../../src/ledger/store.js';
import { follow, Recorder, type HistoryResult, type Host } from './agent.js';
import { Claim } from './oracle.js';
import type { HistoryPlan, Rng } from './plan.js';
import { actionName, startGateway, type FaultedWorld, type GatewayProcess } from './world.js';

export const LEASE_MS = 30_000;
export const B_CLOCK_BEHIND_MS = 60_000;

/**
 * The fleet's two gateways on one ledger (each with its own connection from `open`): A, and B
 * whose clock runs B_CLOCK_BEHIND_MS behind, so that A's lapsed lease is still live by B's clock
 * for a while. Both are alive in the lease table when this returns.
 */
export async function startFleetPair(
  world: FaultedWorld,
  open: () => Promise<LedgerStore>,
): Promise<{ a: GatewayProcess; b: GatewayProcess }> {
  const a = startGateway(world, {
    ledger: await open(),
    ownsLedger: true,
    owner: 'gw-a',
    lease: { ttl_ms: LEASE_MS },
  });
  const b = startGateway(world, {
    ledger: await open(),
    ownsLedger: true,
    owner: 'gw-b',
    lease: { ttl_ms: LEASE_MS },
    clock: { now: () => Date.now() - B_CLOCK_BEHIND_MS },
  });
  await a.runtime.sessionId();
  await b.runtime.sessionId();
  return { a, b };
}

/** The agent talks to A (the survivor) or B (the stalled first owner). */
class Pinned implements Host {
  constructor(
    private readonly gw: GatewayProcess,
    readonly reader: LedgerStore,
  ) {}
  current(): Promise<GatewayProcess> {
    return Promise.resolve(this.gw);
  }
  restart(): Promise<void> {
    return Promise.reject(new Error('fleet histories do not restart gateways'));
  }
}

function brief(e: Envelope): string {
  return `${e.category}/${e.retry}/${e.remote_effect} "${e.message}"`;
}

export async function runFleetHistory(
  world: FaultedWorld,
  a: GatewayProcess,
  b: GatewayProcess,
  reader: LedgerStore,
  plan: HistoryPlan,
  r: Rng,
): Promise<HistoryResult> {
  const rec = new Recorder(plan, world);
  world.track(plan);
  const onA = new Pinned(a, reader);
  const onB = new Pinned(b, reader);
  let resume!: () => void;
  const resumed = new Promise<void>((res) => (resume = res));
  try {
    const paused = world.stall(plan.id, b.name, resumed).then(() => 'paused' as const);
    const action = world.actions.find((x) => x.name === actionName(plan.contract))!;
    const bRun = b.runtime.run(action, { name: plan.id }, { correlationId: plan.id });
    const first = await Promise.race([paused, bRun.then(() => 'returned' as const)]);
    if (first === 'returned') {
      // B never reached the stall (settled or stopped before attempt #pauseAt): B answers now, and
      // the agent carries on at A with B's answer, as after a lost connection to B.
      resume();
      const env = await bRun;
      rec.step(`${b.name}: run ${action.name} → ${brief(env)} (no stall: B answered first)`);
      rec.envelope(`run envelope (${b.name})`, env);
      await rec.checkpoint(onA, env.operation_id, a);
      if (env.operation_id !== null) await follow(rec, onA, r, env.operation_id, env, 0);
      return rec.result();
    }
    const opened = await reader.query({ correlation_id: plan.id });
    const operationId = opened.find((e) => e.kind === 'operation_opened')?.operation_id ?? null;
    rec.step(
      `${b.name}: run ${action.name} … stalled past its lease (operation ${operationId ?? '?'})`,
    );
    await rec.checkpoint(onA, operationId, a);
    if (operationId === null) throw new Error('the stalled operation is not in the ledger');

    // The work moves to A: the agent retries there, asks, or A's sweep takes the operation over.
    const how = r.weighted([
      ['retry', 5],
      ['reconcile', 2],
      ['sweep', 2],
    ] as const);
    let last: Envelope;
    if (how === 'sweep') {
      const items = await a.runtime.recover({ sweep: true });
      const mine = items.find((i) => i.operation_id === operationId);
      rec.step(
        `${a.name}: fleet sweep → ${mine ? `${mine.outcome}${mine.envelope ? `: ${brief(mine.envelope)}` : ''}` : 'did not take it'}`,
      );
      if (mine?.envelope) rec.envelope(`sweep report (${a.name})`, mine.envelope);
      const status = await rec.call(a, 'operation_status', { operation_id: operationId });
      if (!status) return rec.result();
      last = status.envelope;
    } else {
      const tool = how === 'retry' ? action.name : 'reconcile_operation';
      const args =
        how === 'retry'
          ? { name: plan.id, operation_id: operationId }
          : { operation_id: operationId };
      const got = await rec.call(a, tool, args);
      rec.step(
        `${a.name}: ${tool} with operation_id → ${got ? brief(got.envelope) : 'a protocol error'}`,
      );
      if (!got) return rec.result();
      rec.envelope(`${how} envelope (${a.name})`, got.envelope, got.headline);
      last = got.envelope;
    }
    await rec.checkpoint(onA, operationId, a);
    last = await follow(rec, onA, r, operationId, last, 0, rec.steps + 3);

    // B resumes: it acts on the late answer, and its agent reads what it says.
    resume();
    const late = await bRun;
    rec.step(`${b.name} resumed → its agent is told ${brief(late)}`);
    rec.envelope(`late envelope (${b.name})`, late);
    await rec.checkpoint(onA, operationId, a);
    // B's agent follows B's directive at B (maybe the same operation_id again).
    await follow(rec, onB, r, operationId, late, 0, rec.steps + 2);
    // What A says about it afterwards.
    const after = await rec.call(a, 'operation_status', { operation_id: operationId });
    if (after) {
      rec.step(`${a.name}: operation_status → ${brief(after.envelope)}`);
      rec.envelope(`operation_status (${a.name})`, after.envelope, after.headline);
    }
    void last;
  } catch (error) {
    rec.requests();
    rec.add([
      {
        claim: Claim.exception,
        source: 'the harness',
        said: error instanceof Error ? (error.stack ?? error.message) : String(error),
        key: `exception | ${error instanceof Error ? error.message.replace(/op_\w+|h\w*-\d+|\d+/g, '#') : 'non-error'}`,
      },
    ]);
  } finally {
    resume();
  }
  return rec.result();
}
