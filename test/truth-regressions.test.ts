// Named regressions for the numbered cases of issue 29 ("One truth per operation"), each a fixed
// history on real sockets against the fake (test/support/history/world.ts arms each attempt's and
// each lookup's fault). Every one of them fails on the main of 2026-12-01 (before the engine fix).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Envelope } from '../src/core/envelope.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openLedger } from '../src/ledger/open.js';
import { openPostgresLedger } from '../src/ledger/postgres/store.js';
import { projectOperation, type OperationView } from '../src/ledger/projection.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { envelopeOf } from './support/history/agent.js';
import { B_CLOCK_BEHIND_MS, LEASE_MS, startFleetPair } from './support/history/fleet.js';
import type { AttemptFault, Contract, HistoryPlan, LookupFault } from './support/history/plan.js';
import {
  actionName,
  FaultedWorld,
  startGateway,
  type GatewayProcess,
} from './support/history/world.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from './support/postgres.js';

let fake: FakeService;
let world: FaultedWorld;
let dir: string;
let url: string;
let n = 0;

beforeAll(async () => {
  fake = await startFakeService({ seed: 2901 });
  world = await FaultedWorld.start(fake);
  dir = mkdtempSync(join(tmpdir(), 'candor-truth-regressions-'));
  url = `sqlite:${join(dir, 'ledger.db')}`;
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

function plan(
  contract: Contract,
  attempts: AttemptFault[],
  lookups: LookupFault[] = [],
  pauseAt = 0,
): HistoryPlan {
  n += 1;
  const p: HistoryPlan = { seed: n, id: `reg-${n}`, contract, attempts, lookups, pauseAt };
  world.track(p);
  return p;
}

async function lone(): Promise<GatewayProcess> {
  const opened = await openLedger(url);
  if (!opened.ok) throw new Error(opened.failure.message);
  // As `candor serve` composes a gateway outside a fleet: the same owner across restarts.
  return startGateway(world, { ledger: opened.value, ownsLedger: true, owner: 'gateway:lone' });
}

async function call(gw: GatewayProcess, tool: string, args: Record<string, unknown>) {
  return envelopeOf(await gw.gateway.callTool(tool, args));
}

async function viewOf(ledger: LedgerStore, operationId: string): Promise<OperationView> {
  return projectOperation(await ledger.query({ operation_id: operationId }))!;
}

const posts = (id: string): number =>
  fake.groundTruth(id).filter((e) => e.event === 'received' && e.method === 'POST').length;

/** What an envelope about a committed operation may never say. */
function expectNotDenied(e: Envelope, what: string): void {
  expect(e.remote_effect, `${what}: ${JSON.stringify(e)}`).not.toBe('none');
  expect(e.message, what).not.toMatch(/not applied|nothing was sent(?! now| from here)/);
}

const refusals: Array<[string, AttemptFault, AttemptFault]> = [
  [
    'RST after commit, then 429',
    { kind: 'reset_after_commit', action: 'rst' },
    { kind: 'status', status: 429, commit: false },
  ],
  [
    'cut 201, then 422',
    { kind: 'cut_body', action: 'fin', at_byte: 5 },
    { kind: 'status', status: 422, commit: false },
  ],
  [
    'reply delayed past the deadline, then 401',
    { kind: 'delayed_past_deadline' },
    { kind: 'status', status: 401, commit: false },
  ],
  [
    'RST after commit, then 403',
    { kind: 'reset_after_commit', action: 'rst' },
    { kind: 'status', status: 403, commit: false },
  ],
];

describe('case 1: a later attempt never erases an earlier one (one gateway)', () => {
  for (const contract of ['keyed', 'keyed_no_lookup'] as const) {
    it.each(refusals)(
      `${contract}: %s → the operation is not "failed"/"none"`,
      async (_n, first, second) => {
        const p = plan(
          contract,
          [first, second, second, second],
          [{ kind: 'status', status: 503 }],
        );
        const gw = await lone();
        try {
          const action = world.actions.find((a) => a.name === actionName(contract))!;
          const env = await gw.runtime.run(action, { name: p.id }, { correlationId: p.id });
          expect(world.commits(p.id)).toBe(1);
          expectNotDenied(env, 'run envelope');
          const view = await viewOf(gw.ledger, env.operation_id!);
          expect(view.state).not.toBe('failed');
          const status = await call(gw, 'operation_status', { operation_id: env.operation_id });
          expectNotDenied(status.envelope, 'operation_status');
        } finally {
          await gw.stop(true);
        }
      },
    );
  }
});

describe('case 3: a restarted gateway is the same owner (SQLite)', () => {
  it('an applied operation, retried with its operation_id after a restart, answers applied and sends nothing', async () => {
    const p = plan('keyed', [{ kind: 'ok' }]);
    const first = await lone();
    const action = world.actions.find((a) => a.name === actionName('keyed'))!;
    const env = await first.runtime.run(action, { name: p.id }, { correlationId: p.id });
    expect(env).toMatchObject({ ok: true, remote_effect: 'applied' });
    await first.stop(true);
    const second = await lone();
    try {
      const again = await call(second, action.name, { name: p.id, operation_id: env.operation_id });
      expect(again.envelope).toMatchObject({ category: 'succeeded', remote_effect: 'applied' });
      expect(again.headline).not.toMatch(/nothing was sent/);
      expect(posts(p.id)).toBe(1);
      const status = await call(second, 'operation_status', { operation_id: env.operation_id });
      expect(status.envelope).toMatchObject({ remote_effect: 'applied' });
    } finally {
      await second.stop(true);
    }
  });

  it('an operation whose directive invites a retry can be retried with its operation_id after a restart', async () => {
    // #1 commits and its reply is lost; the keyed retry #2 is answered 429: whatever the first
    // gateway says, it invites a retry after a delay. The restarted gateway's #3 is replayed.
    const p = plan('keyed', [
      { kind: 'reset_after_commit', action: 'rst' },
      { kind: 'status', status: 429, commit: false },
      { kind: 'ok' },
    ]);
    const first = await lone();
    const action = world.actions.find((a) => a.name === actionName('keyed'))!;
    const env = await first.runtime.run(action, { name: p.id }, { correlationId: p.id });
    expect(env.retry).toBe('after_delay');
    await first.stop(false);
    const second = await lone();
    try {
      const again = await call(second, action.name, { name: p.id, operation_id: env.operation_id });
      expect(again.envelope.category).not.toBe('invalid_input');
      expectNotDenied(again.envelope, 'retry after restart');
      expect(world.commits(p.id)).toBe(1);
    } finally {
      await second.stop(true);
    }
  });
});

describe('case 4: a settled operation answers its settled state; a cut 2xx is coherent', () => {
  it('retried with its operation_id, a succeeded operation answers succeeded and sends nothing', async () => {
    const p = plan('key_not_honoured', [{ kind: 'cut_body', action: 'rst', at_byte: 4 }]);
    const gw = await lone();
    try {
      const action = world.actions.find((a) => a.name === actionName('key_not_honoured'))!;
      const env = await gw.runtime.run(action, { name: p.id }, { correlationId: p.id });
      const reconciled = await call(gw, 'reconcile_operation', { operation_id: env.operation_id });
      expect(reconciled.envelope).toMatchObject({
        category: 'succeeded',
        remote_effect: 'applied',
      });
      const sent = posts(p.id);
      const again = await call(gw, action.name, { name: p.id, operation_id: env.operation_id });
      expect(again.envelope).toMatchObject({ category: 'succeeded', remote_effect: 'applied' });
      const reconcileAgain = await call(gw, 'reconcile_operation', {
        operation_id: env.operation_id,
      });
      expect(reconcileAgain.envelope).toMatchObject({ remote_effect: 'applied' });
      expect(posts(p.id)).toBe(sent);
    } finally {
      await gw.stop(true);
    }
  });

  it('a 2xx whose body is cut never says applied and "unknown" at once', async () => {
    const p = plan('unkeyed', [{ kind: 'cut_body', action: 'fin', at_byte: 6 }]);
    const gw = await lone();
    try {
      const action = world.actions.find((a) => a.name === actionName('unkeyed'))!;
      const env = await gw.runtime.run(action, { name: p.id }, { correlationId: p.id });
      expect(world.commits(p.id)).toBe(1);
      if (env.remote_effect === 'applied') expect(env.message).not.toMatch(/unknown|whether/);
      else expect(env.remote_effect).toBe('unknown');
    } finally {
      await gw.stop(true);
    }
  });

  it('operation_status of a rate-limited operation answers with an envelope', async () => {
    const p = plan('unkeyed_no_lookup', [{ kind: 'status', status: 429, commit: false }]);
    const gw = await lone();
    try {
      const action = world.actions.find((a) => a.name === actionName('unkeyed_no_lookup'))!;
      const env = await gw.runtime.run(action, { name: p.id }, { correlationId: p.id });
      expect(env.retry).toBe('after_delay');
      const status = await call(gw, 'operation_status', { operation_id: env.operation_id });
      expect(status.envelope.operation_id).toBe(env.operation_id);
    } finally {
      await gw.stop(true);
    }
  });
});

const skip = postgresSkipReason();
describe.skipIf(skip !== undefined)(
  'case 2 and 4b: a stalled former owner (PostgreSQL fleet)',
  () => {
    let server: ThrowawayPostgres;
    let a: GatewayProcess;
    let b: GatewayProcess;
    let reader: LedgerStore;
    beforeAll(async () => {
      server = await startPostgres();
      const open = () => openPostgresLedger(server.url, { schema: 'truth_regressions' });
      reader = await open();
      ({ a, b } = await startFleetPair(world, open));
    }, 120_000);
    afterAll(async () => {
      await a?.stop(true);
      await b?.stop(true);
      await reader?.close();
      await server?.stop();
    });

    /** B runs until it stalls holding the answer to attempt `pauseAt`; returns its pending run. */
    async function stalledB(p: HistoryPlan) {
      let resume!: () => void;
      const resumed = new Promise<void>((r) => (resume = r));
      const paused = world.stall(p.id, 'gw-b', resumed);
      const action = world.actions.find((x) => x.name === actionName(p.contract))!;
      const run = b.runtime.run(action, { name: p.id }, { correlationId: p.id });
      await paused;
      const opened = await reader.query({ correlation_id: p.id });
      const operationId = opened.find((e) => e.kind === 'operation_opened')!.operation_id!;
      return { run, resume, operationId, action };
    }

    const lateAnswers: Array<[string, AttemptFault]> = [
      ['a late 429', { kind: 'status', status: 429, commit: false }],
      ['a late 422', { kind: 'status', status: 422, commit: false }],
      ['a late unknown (reset)', { kind: 'reset_before_commit', phase: 'after_request_body' }],
    ];
    it.each(lateAnswers)(
      'the new owner settled it succeeded; %s to the stalled owner changes nothing',
      async (_n, late) => {
        // #1 commits and its reply is lost; B's keyed retry #2 gets `late`, held while B stalls; A
        // takes over and its keyed retry #3 is answered by the replay.
        const p = plan(
          'keyed',
          [{ kind: 'reset_after_commit', action: 'rst' }, late, { kind: 'ok' }],
          [],
          2,
        );
        const { run, resume, operationId, action } = await stalledB(p);
        // A settles it the way its agent would: the same call, then a reconcile when told to.
        let settled = (await call(a, action.name, { name: p.id, operation_id: operationId }))
          .envelope;
        if (settled.retry === 'reconcile_first')
          settled = (await call(a, 'reconcile_operation', { operation_id: operationId })).envelope;
        expect(settled).toMatchObject({ category: 'succeeded', remote_effect: 'applied' });
        resume();
        const told = await run;
        expect(world.commits(p.id)).toBe(1);
        expectNotDenied(told, "the stalled owner's envelope");
        expect((await viewOf(reader, operationId)).state).toBe('succeeded');
        const status = await call(a, 'operation_status', { operation_id: operationId });
        expect(status.envelope).toMatchObject({ category: 'succeeded', remote_effect: 'applied' });
        // The stalled owner's agent follows what it was told: it is never told "nothing was sent".
        if (told.retry === 'allowed' || told.retry === 'after_delay') {
          const again = await call(b, action.name, { name: p.id, operation_id: operationId });
          expectNotDenied(again.envelope, "the former owner's retry");
        }
      },
    );

    /** A ledger handle that runs `before` ahead of the appends `when` picks. */
    function holdingAppends(
      store: LedgerStore,
      when: (events: Parameters<LedgerStore['append']>[0]) => boolean,
      before: () => Promise<void>,
    ): LedgerStore {
      return new Proxy(store, {
        get(target, key) {
          if (key === 'append')
            return async (events: Parameters<LedgerStore['append']>[0]) => {
              if (when(events)) await before();
              return target.append(events);
            };
          const v = Reflect.get(target, key, target) as unknown;
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
    }

    it('a former owner whose resolution is fenced says so, and does not speak as if it settled it', async () => {
      // B's attempt #1 is answered 422 and recorded; before B writes the resolution, A takes the
      // operation over (B's lease lapsed). B's resolution is refused (fenced): B used to drop that
      // refusal silently and answer as the operation's settler.
      const p = plan('keyed', [{ kind: 'status', status: 422, commit: false }, { kind: 'ok' }]);
      let held!: () => void;
      const holding = new Promise<void>((r) => (held = r));
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const bLedger = await openPostgresLedger(server.url, { schema: 'truth_regressions' });
      const b2 = startGateway(world, {
        ledger: holdingAppends(
          bLedger,
          (events) =>
            events.some((e) => e.kind === 'operation_resolved' && e.correlation_id === p.id),
          () => (held(), released),
        ),
        ownsLedger: false,
        owner: 'gw-b2',
        lease: { ttl_ms: LEASE_MS },
        clock: { now: () => Date.now() - B_CLOCK_BEHIND_MS },
      });
      try {
        const action = world.actions.find((x) => x.name === actionName(p.contract))!;
        const run = b2.runtime.run(action, { name: p.id }, { correlationId: p.id });
        await holding;
        const opened = await reader.query({ correlation_id: p.id });
        const operationId = opened.find((e) => e.kind === 'operation_opened')!.operation_id!;
        // A takes it over, as its agent's call with the operation_id does; the 422 said "never".
        const atA = await call(a, action.name, { name: p.id, operation_id: operationId });
        expect(atA.envelope).toMatchObject({ category: 'confirmed_rejection', retry: 'never' });
        release();
        const told = await run;
        expect(told.data).toMatchObject({ refusal: { code: 'owner_lost' } });
        expect(told.message).toMatch(/no longer owns operation .* does not settle it/);
        // What it says of the operation is the ledger's truth: only the 422 reached the fake.
        expect(told).toMatchObject({ category: 'confirmed_rejection', remote_effect: 'none' });
        expect(posts(p.id)).toBe(1);
        expect(world.commits(p.id)).toBe(0);
        const events = await reader.query({ operation_id: operationId });
        expect(events.filter((e) => e.kind === 'owner_changed').map((e) => e.data)).toMatchObject([
          { from: 'gw-b2', to: 'gw-a' },
        ]);
        const writers = events
          .filter((e) => e.kind === 'operation_resolved')
          .map((e) => (e.data as { writer?: string }).writer);
        expect(writers).not.toContain('gw-b2');
      } finally {
        release();
        await b2.stop(true);
        await bLedger.close();
      }
    });

    it('a sweep that read an operation before its 4xx was recorded does not retry it (seed 1308)', async () => {
      // Seen in the fleet campaign under load: A's sweep loaded the operation while B's attempt #1
      // was out, B recorded its 422 (failed: nothing applied, retry never) and told its agent "not
      // applied", and A then took the operation over and retried it under the key from its stale
      // view: #2 committed, and B's answer became false.
      const p = plan(
        'keyed',
        [{ kind: 'status', status: 422, commit: false }, { kind: 'ok' }],
        [],
        1,
      );
      const { run, resume, operationId } = await stalledB(p);
      const cLedger = await openPostgresLedger(server.url, { schema: 'truth_regressions' });
      // C's takeover is written only once B's answer is on record (C read the operation before).
      const c = startGateway(world, {
        ledger: holdingAppends(
          cLedger,
          (events) =>
            events.some((e) => e.kind === 'owner_changed' && e.operation_id === operationId),
          async () => {
            resume();
            for (let i = 0; i < 400; i++) {
              const now = await reader.query({ operation_id: operationId });
              if (now.some((e) => e.kind === 'attempt_finished')) return;
              await new Promise((r) => setTimeout(r, 25));
            }
            throw new Error("B's answer never reached the ledger");
          },
        ),
        ownsLedger: false,
        owner: 'gw-c',
        lease: { ttl_ms: LEASE_MS },
      });
      try {
        const swept = await c.runtime.recover({ sweep: true });
        expect(swept.filter((i) => i.operation_id === operationId)).toEqual([]);
        const told = await run;
        expect(told).toMatchObject({ remote_effect: 'none', retry: 'never' });
        // Nothing more was sent: the one POST was B's, and the fake committed nothing.
        expect(posts(p.id)).toBe(1);
        expect(world.commits(p.id)).toBe(0);
        const events = await reader.query({ operation_id: operationId });
        expect(
          events
            .filter((e) => e.kind === 'attempt_started')
            .map((e) => (e.data as { worker: string }).worker),
        ).toEqual(['gw-b']);
        expect((await viewOf(reader, operationId)).state).toBe('failed');
      } finally {
        resume();
        await run.catch(() => undefined);
        await c.stop(true);
        await cLedger.close();
      }
    });

    it('a takeover whose lookup failed is looked up again by its new owner and listed meanwhile', async () => {
      // B stalls holding the RST of #1 (committed); A's sweep takes over and its lookup fails; a keyed
      // retry by A (if it makes one) is answered too late to tell.
      const p = plan(
        'keyed',
        [{ kind: 'reset_after_commit', action: 'rst' }, { kind: 'delayed_past_deadline' }],
        [{ kind: 'status', status: 503 }],
        1,
      );
      const { run, resume, operationId } = await stalledB(p);
      try {
        await a.runtime.recover({ sweep: true });
        const listed = await call(a, 'list_unresolved_operations', {});
        const ops = (listed.envelope.data as { operations: Array<{ operation_id: string }> })
          .operations;
        expect(ops.map((o) => o.operation_id)).toContain(operationId);
        // The owner's next pass looks again (the lookup answers now) and settles it.
        await a.runtime.recover({ sweep: true });
        expect((await viewOf(reader, operationId)).state).toBe('succeeded');
      } finally {
        resume();
        // The stalled owner finishes before the stores close (its late answer is an observation).
        await run.catch(() => undefined);
      }
    });
  },
);
