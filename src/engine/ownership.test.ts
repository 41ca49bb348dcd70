// Ownership in a fleet: two runtimes (gateways) on one ledger, a fake clock. A live owner is never
// displaced; once its lease has lapsed another runtime's `recover` (or a `run` continuing the
// operation) takes it over with `owner_changed`, and of racing runtimes exactly one does.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Evidence } from '../core/evidence.js';
import {
  readHttpLookup,
  type Dispatched,
  type HttpPrepared,
  type Transport,
} from '../core/transport.js';
import { openMemoryLedger } from '../ledger/memory/store.js';
import type { LedgerStore } from '../ledger/store.js';
import { defineAction } from './action.js';
import { staticCredentials } from './ports.js';
import { createEngine, type Runtime } from './runtime.js';

const T0 = Date.UTC(2026, 10, 30, 12);
const LEASE = 30_000;

const createDeployment = defineAction({
  name: 'create_deployment',
  class: 'create',
  subject: 'the deployment',
  input: z.object({ service: z.string() }),
  request: (input, ctx) => ({
    method: 'POST',
    path: '/v1/deployments',
    body: { ...input, client_ref: ctx.correlation_id },
  }),
  response: z.object({ id: z.string() }),
  remoteRef: (d) => d.id,
  destination: {
    origin: 'http://deploy.test',
    authority_ref: 'vault:deploy',
    reconciliation: {
      lookup: (ctx) => ({
        method: 'GET',
        path: `/v1/deployments?client_ref=${ctx.correlation_id}`,
      }),
      matches: (body) =>
        (body as { items: Array<{ id: string }> }).items.map((r) => ({ ref: r.id, record: r })),
    },
  },
  attempt_budget: 2,
});

/** A destination that loses the answer to every POST and finds one record on every lookup. */
function destination() {
  const sent: string[] = [];
  const transport: Transport<HttpPrepared> = {
    kind: 'http',
    // The lookup is read from the same answers, as the HTTP adapter reads its exchanges.
    lookup: async (p, options) => readHttpLookup(p, await transport.dispatch(p, options)),
    dispatch(p): Promise<Dispatched> {
      sent.push(`${p.method} ${p.path}`);
      const lost: Evidence = { phase: 'request_sent', local_error: 'connection_reset' };
      // The record carries the client reference the create sent (the lookup's query).
      const ref = new URL(p.path, 'http://deploy.test').searchParams.get('client_ref');
      const body = Buffer.from(JSON.stringify({ items: [{ id: 'dep-1', client_ref: ref }] }));
      return Promise.resolve(
        p.method === 'POST'
          ? {
              evidence: lost,
              data: null,
              diagnostics: {},
              phases: { started_at: 1, finished_at: 2 },
            }
          : {
              evidence: { phase: 'response_complete', status: 200 },
              reply: {
                status: 200,
                headers: { 'content-type': 'application/json' },
                body,
                framing: 'length',
              },
              data: null,
              diagnostics: {},
              phases: { started_at: 1, finished_at: 2 },
            },
      );
    },
  };
  return { transport, sent };
}

function gateway(ledger: LedgerStore, owner: string, clock: { now(): number }) {
  const dest = destination();
  const runtime: Runtime = createEngine({
    ledger,
    owner,
    clock,
    lease: { ttl_ms: LEASE },
    actions: [createDeployment],
    credentials: staticCredentials({ 'vault:deploy': { authorization: 'Bearer t' } }),
    sleep: () => Promise.resolve(),
    transports: { http: dest.transport },
  });
  return { runtime, sent: dest.sent };
}

const ownerEvents = async (ledger: LedgerStore, op: string) =>
  (await ledger.query({ operation_id: op }))
    .filter((e) => e.kind === 'owner_changed')
    .map((e) => e.data);

describe('ownership leases between gateways', () => {
  it('a live owner keeps its operation; after its lease lapses recovery takes it over and settles it', async () => {
    const ledger = openMemoryLedger();
    let now = T0;
    const clock = { now: () => now };
    const a = gateway(ledger, 'gw-a', clock);
    const b = gateway(ledger, 'gw-b', clock);
    const env = await a.runtime.run(createDeployment, { service: 'api' });
    expect(env).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    const op = env.operation_id!;

    now += LEASE - 1;
    // Left to its live owner: reported (still unresolved), nothing sent or taken over.
    const left = await b.runtime.recover();
    expect(left).toMatchObject([{ operation_id: op, outcome: 'left_to_owner', unresolved: true }]);
    expect(left[0]!.envelope).toMatchObject({ remote_effect: 'unknown' });
    expect(left[0]!.envelope.data).toMatchObject({ refusal: { code: 'not_owner' } });
    // Refused, and the envelope states the operation (unknown), not the refused call.
    const refused = await b.runtime.run(createDeployment, { service: 'api' }, { operationId: op });
    expect(refused).toMatchObject({
      ok: false,
      operation_id: op,
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      data: { refusal: { code: 'not_owner' } },
    });
    expect(refused.message).toMatch(/gw-a, whose lease is live/);
    expect(b.sent).toEqual([]);
    expect(await ownerEvents(ledger, op)).toEqual([]);

    now = T0 + LEASE; // gw-a stopped renewing (its process died)
    const items = await b.runtime.recover();
    expect(items).toMatchObject([{ operation_id: op, outcome: 'found_by_lookup' }]);
    expect(b.sent).toEqual([expect.stringMatching(/^GET \/v1\/deployments\?client_ref=/)]);
    expect(await ownerEvents(ledger, op)).toEqual([
      {
        from: 'gw-a',
        to: 'gw-b',
        reason: 'lease_expired',
        lease_expired_at: T0 + LEASE,
        by: 'recovery',
      },
    ]);
    const status = await b.runtime.status(op);
    expect(status?.view).toMatchObject({ owner: 'gw-b', state: 'succeeded' });

    // gw-a comes back (a stalled process): gw-b is live now, so gw-a cannot take it back.
    // The operation is settled (gw-b found it): gw-a's agent is told so, and nothing is sent.
    const back = await a.runtime.run(createDeployment, { service: 'api' }, { operationId: op });
    expect(back).toMatchObject({
      ok: true,
      category: 'succeeded',
      remote_effect: 'applied',
      data: { refusal: { code: 'already_settled' } },
    });
    expect(await ownerEvents(ledger, op)).toHaveLength(1);
  });

  it('a run continuing a lapsed owner’s operation takes it over first', async () => {
    const ledger = openMemoryLedger();
    let now = T0;
    const clock = { now: () => now };
    const a = gateway(ledger, 'gw-a', clock);
    const b = gateway(ledger, 'gw-b', clock);
    const op = (await a.runtime.run(createDeployment, { service: 'api' })).operation_id!;
    now += LEASE + 5;
    const env = await b.runtime.run(createDeployment, { service: 'api' }, { operationId: op });
    // The budget (2) allows one more attempt, but an unknown write is never blindly repeated.
    expect(b.sent.filter((s) => s.startsWith('POST'))).toEqual([]);
    expect(env.operation_id).toBe(op);
    expect(await ownerEvents(ledger, op)).toMatchObject([{ from: 'gw-a', to: 'gw-b', by: 'run' }]);
  });

  it('two gateways recovering one dead owner at once: each operation gets exactly one new owner', async () => {
    const ledger = openMemoryLedger();
    let now = T0;
    const clock = { now: () => now };
    const a = gateway(ledger, 'gw-a', clock);
    const ops: string[] = [];
    for (let i = 0; i < 8; i++)
      ops.push((await a.runtime.run(createDeployment, { service: `s${i}` })).operation_id!);
    now += LEASE;
    const b = gateway(ledger, 'gw-b', clock);
    const c = gateway(ledger, 'gw-c', clock);
    const [rbAll, rcAll] = await Promise.all([b.runtime.recover(), c.runtime.recover()]);
    // What the other gateway won is left to it (reported, nothing sent).
    const rb = rbAll.filter((i) => i.outcome !== 'left_to_owner');
    const rc = rcAll.filter((i) => i.outcome !== 'left_to_owner');
    expect(rb.length + rc.length).toBe(ops.length);
    for (const op of ops) {
      const changes = await ownerEvents(ledger, op);
      expect(changes).toHaveLength(1);
      const winner = changes[0]!.to === 'gw-b' ? rb : rc;
      expect(winner.map((i) => i.operation_id)).toContain(op);
    }
    // Each operation was looked up once, by its one new owner.
    expect(b.sent.length + c.sent.length).toBe(ops.length);
  });

  it('fences a stalled owner: after a takeover its retry is refused by the store and nothing is sent', async () => {
    const ledger = openMemoryLedger();
    let now = T0;
    const clock = { now: () => now };
    // gw-a: its first connect is refused (nothing sent), so it may retry; before the retry it
    // stalls (a GC pause, a paused VM) in its backoff sleep, longer than its lease.
    const aSent: string[] = [];
    const refused = (p: HttpPrepared): Promise<Dispatched> => {
      aSent.push(`${p.method} ${p.path}`);
      return Promise.resolve({
        evidence: { phase: 'not_sent', local_error: 'connect_refused' },
        data: null,
        diagnostics: {},
        phases: { started_at: 1, finished_at: 2 },
      });
    };
    let stall!: () => void;
    const stalled = new Promise<void>((r) => (stall = r));
    let wake!: () => void;
    const woken = new Promise<void>((r) => (wake = r));
    const a = createEngine({
      ledger,
      owner: 'gw-a',
      clock,
      lease: { ttl_ms: LEASE },
      actions: [createDeployment],
      credentials: staticCredentials({ 'vault:deploy': { authorization: 'Bearer t' } }),
      sleep: () => {
        stall();
        return woken;
      },
      transports: {
        http: {
          kind: 'http',
          dispatch: refused,
          lookup: async (p) => readHttpLookup(p, await refused(p)),
        },
      },
    });
    const b = gateway(ledger, 'gw-b', clock);
    const call = a.run(createDeployment, { service: 'api' });
    await stalled;
    expect(aSent).toEqual(['POST /v1/deployments']);
    const [op] = await ledger.unresolved();

    now = T0 + LEASE; // gw-a's lease has lapsed while it stalls: gw-b takes the operation over
    const items = await b.runtime.recover();
    expect(items).toMatchObject([{ operation_id: op }]);
    expect(await ownerEvents(ledger, op!)).toMatchObject([{ from: 'gw-a', to: 'gw-b' }]);

    wake(); // gw-a resumes and goes on with its retry
    const env = await call;
    // What the agent sees: nothing sent from here; gw-b's own attempt (its answer lost) may have
    // applied it, so the effect is unknown: the operation's state, with the refusal's code.
    expect(env).toMatchObject({
      ok: false,
      operation_id: op,
      category: 'outcome_unknown',
      retry: 'reconcile_first',
      remote_effect: 'unknown',
      data: { refusal: { code: 'owner_lost' } },
    });
    expect(env.message).toMatch(
      /no longer owns operation op_\S+ \(operation op_\S+ was taken over by gw-b/,
    );
    // gw-a sent nothing after the takeover, and the ledger holds no attempt of its after it.
    expect(aSent).toEqual(['POST /v1/deployments']);
    const events = await ledger.query({ operation_id: op! });
    const takeover = events.findIndex((e) => e.kind === 'owner_changed');
    const workers = (from: number, to?: number) =>
      events.slice(from, to).flatMap((e) => (e.kind === 'attempt_started' ? [e.data.worker] : []));
    expect(workers(0, takeover)).toEqual(['gw-a']);
    expect(workers(takeover)).toEqual(['gw-b']);
  });
});
