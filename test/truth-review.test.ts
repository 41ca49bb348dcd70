// Named regressions for the hostile review of issue 29 ("One truth per operation"): each a fixed
// history on real sockets against the fake (test/support/history/world.ts) and a real SQLite
// ledger; each asserts what the fake holds, what the ledger holds and what the agent was told.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openLedger } from '../src/ledger/open.js';
import { projectOperation, type OperationView } from '../src/ledger/projection.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { run as opsRun } from '../src/cli/commands/ops.js';
import { envelopeOf } from './support/history/agent.js';
import type { AttemptFault, Contract, HistoryPlan, LookupFault } from './support/history/plan.js';
import {
  actionName,
  FaultedWorld,
  startGateway,
  type GatewayProcess,
} from './support/history/world.js';

let fake: FakeService;
let world: FaultedWorld;
let dir: string;
let url: string;
let n = 0;

beforeAll(async () => {
  fake = await startFakeService({ seed: 2902 });
  world = await FaultedWorld.start(fake);
  dir = mkdtempSync(join(tmpdir(), 'candor-truth-review-'));
  url = `sqlite:${join(dir, 'ledger.db')}`;
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

function plan(contract: Contract, attempts: AttemptFault[], lookups: LookupFault[] = []) {
  n += 1;
  const p: HistoryPlan = { seed: n, id: `rev-${n}`, contract, attempts, lookups, pauseAt: 0 };
  world.track(p);
  return p;
}

async function gatewayAs(owner: string, lease?: { ttl_ms: number }): Promise<GatewayProcess> {
  const opened = await openLedger(url);
  if (!opened.ok) throw new Error(opened.failure.message);
  return startGateway(world, {
    ledger: opened.value,
    ownsLedger: true,
    owner,
    ...(lease ? { lease } : {}),
  });
}

async function call(gw: GatewayProcess, tool: string, args: Record<string, unknown>) {
  return envelopeOf(await gw.gateway.callTool(tool, args)).envelope;
}

async function viewOf(ledger: LedgerStore, operationId: string): Promise<OperationView> {
  return projectOperation(await ledger.query({ operation_id: operationId }))!;
}

const shape = (e: { category: string; retry: string; remote_effect: string }) =>
  `${e.category}/${e.retry}/${e.remote_effect}`;

describe('review 1: operation_status and the call agree (one answer per state)', () => {
  const histories: Array<[string, Contract, AttemptFault[]]> = [
    [
      'keyed, the reply lost four times (budget spent)',
      'keyed',
      Array.from({ length: 4 }, () => ({ kind: 'reset_after_commit', action: 'rst' }) as const),
    ],
    [
      'a cut 201 without a lookup',
      'unkeyed_no_lookup',
      [{ kind: 'cut_body', action: 'fin', at_byte: 5 }],
    ],
    [
      'keyed without a lookup, the reply lost, then 429s',
      'keyed_no_lookup',
      [
        { kind: 'delayed_past_deadline' },
        { kind: 'status', status: 429, commit: false },
        { kind: 'status', status: 429, commit: false },
        { kind: 'status', status: 429, commit: false },
      ],
    ],
  ];
  it.each(histories)('%s', async (_name, contract, attempts) => {
    const p = plan(contract, attempts);
    const gw = await gatewayAs('gateway:review-1');
    try {
      const action = world.actions.find((a) => a.name === actionName(contract))!;
      const env = await gw.runtime.run(action, { name: p.id }, { correlationId: p.id });
      const status = await call(gw, 'operation_status', { operation_id: env.operation_id });
      expect(shape(status), `call: ${JSON.stringify(env)}\nstatus: ${JSON.stringify(status)}`).toBe(
        shape(env),
      );
      expect(world.commits(p.id)).toBe(1);
      expect(env.remote_effect).not.toBe('none');
      const view = await viewOf(gw.ledger, env.operation_id!);
      expect(view.remote_effect).toBe(env.remote_effect);
    } finally {
      await gw.stop(true);
    }
  });
});

describe('review 2: a not_owner refusal waits out the owner’s real lease', () => {
  it('retry_after_ms is the remainder of the owner’s lease, and operation_status says the same', async () => {
    const p = plan('keyed', [
      { kind: 'delayed_past_deadline' },
      { kind: 'status', status: 429, commit: false },
      { kind: 'status', status: 429, commit: false },
      { kind: 'status', status: 429, commit: false },
    ]);
    const ttl = 60_000;
    const a = await gatewayAs('gateway:review-2a', { ttl_ms: ttl });
    const b = await gatewayAs('gateway:review-2b', { ttl_ms: ttl });
    try {
      const action = world.actions.find((x) => x.name === actionName('keyed'))!;
      const env = await a.runtime.run(action, { name: p.id }, { correlationId: p.id });
      expect(env.retry).toBe('after_delay');
      const sentBefore = world.requests(p.id).length;
      const refused = await call(b, action.name, { name: p.id, operation_id: env.operation_id });
      expect(refused.retry).toBe('after_delay');
      expect(refused.remote_effect).toBe('unknown');
      // Not "after 0 ms": close to the whole lease A just renewed, never more.
      expect(refused.retry_after_ms).toBeGreaterThan(ttl / 2);
      expect(refused.retry_after_ms).toBeLessThanOrEqual(ttl);
      expect((refused.data as { refusal: { code: string } }).refusal.code).toBe('not_owner');
      expect(world.requests(p.id)).toHaveLength(sentBefore);
      const status = await call(b, 'operation_status', { operation_id: env.operation_id });
      expect(shape(status)).toBe(shape(refused));
      expect(status.retry_after_ms).toBeGreaterThan(ttl / 2);
      const view = await viewOf(a.ledger, env.operation_id!);
      expect(view.owner).toBe('gateway:review-2a');
      expect(view.owner_changes).toHaveLength(0);
    } finally {
      await b.stop(true);
      await a.stop(true);
    }
  });
});

describe('review 4: reconcile_operation reports a failed lookup as failed', () => {
  it('a 503 lookup says so, records a failed observation and leaves the operation unknown', async () => {
    const p = plan(
      'unkeyed',
      [{ kind: 'reset_after_commit', action: 'rst' }],
      [{ kind: 'status', status: 503 }],
    );
    const gw = await gatewayAs('gateway:review-4');
    try {
      const action = world.actions.find((x) => x.name === actionName('unkeyed'))!;
      const env = await gw.runtime.run(action, { name: p.id }, { correlationId: p.id });
      expect(env.remote_effect).toBe('unknown');
      const rec = await call(gw, 'reconcile_operation', { operation_id: env.operation_id });
      expect(rec.remote_effect).toBe('unknown');
      expect(rec.message).toMatch(/^The lookup failed \(it answered 503/);
      expect(rec.data).toMatchObject({ lookup: { verdict: 'failed', status: 503 } });
      const view = await viewOf(gw.ledger, env.operation_id!);
      expect(view.state).toBe('unknown');
      expect(view.observations.at(-1)).toMatchObject({ verdict: 'failed', status: 503 });
      const status = await call(gw, 'operation_status', { operation_id: env.operation_id });
      expect(shape(status)).toBe(shape(rec));
      expect(world.commits(p.id)).toBe(1);
    } finally {
      await gw.stop(true);
    }
  });
});

describe('review 5: ops show never says "none" of an attempt whose effect is not known none', () => {
  it('a keyed 429 after a committed attempt is not shown as remote effect none', async () => {
    const p = plan('keyed_no_lookup', [
      { kind: 'reset_after_commit', action: 'rst' },
      { kind: 'status', status: 429, commit: false },
      { kind: 'status', status: 429, commit: false },
      { kind: 'status', status: 429, commit: false },
    ]);
    const gw = await gatewayAs('gateway:review-5');
    let operationId: string;
    try {
      const action = world.actions.find((x) => x.name === actionName('keyed_no_lookup'))!;
      const env = await gw.runtime.run(action, { name: p.id }, { correlationId: p.id });
      operationId = env.operation_id!;
      expect(world.commits(p.id)).toBe(1);
      const view = await viewOf(gw.ledger, operationId);
      expect(view.remote_effect).toBe('unknown');
      expect(view.attempts.length).toBeGreaterThan(1);
      expect(view.attempts.at(-1)!.finish!.remote_effect).toBe('none');
    } finally {
      await gw.stop(true);
    }
    let out = '';
    const code = await opsRun(['show', operationId, '--ledger', url], {
      out: (s) => (out += s),
      err: () => undefined,
    });
    expect(code).toBe(0);
    const outcomes = out.split('\n').filter((l) => l.startsWith('  outcome'));
    expect(outcomes.length).toBeGreaterThan(1);
    for (const line of outcomes) expect(line).not.toMatch(/remote effect none\b/);
    expect(outcomes.at(-1)).toMatch(/remote effect not known from this answer/);
  });
});

describe('review 3: recover from another configuration leaves a live gateway’s operations alone', () => {
  it('the live owner holds a lease (as every composed gateway now does): recover reports left_to_owner and sends nothing', async () => {
    const p = plan('unkeyed', [{ kind: 'reset_after_commit', action: 'rst' }]);
    // The lone gateway as `candor serve` composes it: a stable owner holding a lease.
    const live = await gatewayAs('gateway:host:config-a', { ttl_ms: 30_000 });
    const other = await gatewayAs('gateway:host:config-b');
    try {
      const action = world.actions.find((x) => x.name === actionName('unkeyed'))!;
      const env = await live.runtime.run(action, { name: p.id }, { correlationId: p.id });
      expect(env.remote_effect).toBe('unknown');
      const sentBefore = world.requests(p.id).length;
      const items = await other.runtime.recover();
      const mine = items.find((i) => i.operation_id === env.operation_id);
      expect(mine).toMatchObject({ outcome: 'left_to_owner', unresolved: true });
      expect(mine!.detail).toMatch(/owned by gateway:host:config-a, whose lease is live/);
      expect(mine!.envelope.remote_effect).toBe('unknown');
      // Nothing sent or looked up, no takeover in the ledger, the owner unchanged.
      expect(world.requests(p.id)).toHaveLength(sentBefore);
      const view = await viewOf(live.ledger, env.operation_id!);
      expect(view.owner).toBe('gateway:host:config-a');
      expect(view.owner_changes).toHaveLength(0);
      expect(view.state).toBe('unknown');
    } finally {
      await other.stop(true);
      await live.stop(true);
    }
  });
});
