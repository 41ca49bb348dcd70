// The world a history runs in: the fake service (real sockets, ground truth), the actions under
// test (one per declared contract, short deadlines so a lost reply costs little), and gateways —
// a runtime composed the way `candor serve` composes one (no explicit owner, no lease unless the
// fleet asks for one) behind the MCP gateway's tool calls, over a ledger the caller opens.
//
// Faults are armed lazily by a wrapping transport: when an attempt (a POST carrying the history's
// request id) or a lookup (a GET carrying `<id>.lookup`) is about to leave, the wrapper arms the
// fault the plan gives that attempt or lookup, so faults land on the request they are meant for
// however many attempts the engine makes on its own. A refused connect is a real refused
// connection (the request goes to a released port). A stalled owner (fleet) is held after its
// exchange completed: the answer arrived, the process has not yet acted on it.
import { z } from 'zod';
import {
  readHttpLookup,
  type DispatchOptions,
  type Dispatched,
  type HttpPrepared,
  type Transport,
} from '../../../src/core/transport.js';
import type { ConfiguredAction } from '../../../src/config/actions.js';
import { defineAction, type ActionDefinition } from '../../../src/engine/action.js';
import { staticCredentials } from '../../../src/engine/ports.js';
import type { LeaseOptions } from '../../../src/engine/context.js';
import type { FakeService, FaultSpec } from '../../../src/fakes/index.js';
import { httpTransport } from '../../../src/http/adapter.js';
import type { LedgerStore } from '../../../src/ledger/store.js';
import { createGateway, type Gateway } from '../../../src/mcp/gateway.js';
import { createRuntime, type Runtime } from '../../../src/runtime.js';
import type { Clock } from '../../../src/core/time.js';
import type { AttemptFault, Contract, HistoryPlan, LookupFault } from './plan.js';

export const AUTHORITY = 'vault:history-api';
/** The client deadline of every exchange; a delayed reply or a hanging lookup costs this much. */
export const DEADLINE_MS = Number(process.env['CANDOR_HISTORY_DEADLINE_MS'] ?? 400);
const TIMEOUTS = {
  total_ms: DEADLINE_MS,
  connect_ms: 100,
  first_byte_ms: DEADLINE_MS,
  body_idle_ms: 100,
};

const resource = z.looseObject({ id: z.string().min(1), state: z.string() });
const items = z.object({ items: z.array(resource) });

const KIND: Record<Contract, 'deployments' | 'issues' | 'builds'> = {
  keyed: 'deployments',
  keyed_no_lookup: 'deployments',
  unkeyed: 'issues',
  unkeyed_no_lookup: 'issues',
  key_not_honoured: 'builds',
};
const FIELD = { deployments: 'service', issues: 'title', builds: 'ref' } as const;

export function actionName(c: Contract): string {
  return `h_${c}`;
}

/** One action per contract, all against the fake's reference API. */
export function historyActions(origin: string): ActionDefinition[] {
  return (Object.keys(KIND) as Contract[]).map((c) => {
    const kind = KIND[c];
    const keyed = c === 'keyed' || c === 'keyed_no_lookup';
    const lookup = c === 'keyed' || c === 'unkeyed' || c === 'key_not_honoured';
    return defineAction({
      name: actionName(c),
      class: 'create',
      subject: `the ${kind.slice(0, -1)}`,
      input: z.object({ name: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: `/v1/${kind}`,
        body: { [FIELD[kind]]: i.name, client_ref: ctx.correlation_id },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: {
        origin,
        authority_ref: AUTHORITY,
        default_retry_after_ms: 20,
        ...(keyed || c === 'key_not_honoured'
          ? {
              idempotency: { header: 'Idempotency-Key', honoured: keyed, retention_ms: 86_400_000 },
            }
          : {}),
        ...(lookup
          ? {
              reconciliation: {
                lookup: (ctx) => ({
                  method: 'GET',
                  path: `/v1/${kind}?client_ref=${encodeURIComponent(ctx.correlation_id)}`,
                }),
                matches: (body) => items.parse(body).items.map((r) => ({ ref: r.id, record: r })),
              },
            }
          : {}),
      },
      timeouts: TIMEOUTS,
      attempt_budget: 4,
    });
  });
}

/** Per history: its plan and how far the world has got through it. */
interface Tracked {
  plan: HistoryPlan;
  posts: number;
  lookups: number;
  /** Fleet: the owner that stalls, and the hooks of its stall. */
  stall?: { owner: string; paused: () => void; resume: Promise<void> };
  /** Every request that left, in order, for the trace. */
  log: string[];
}

export class FaultedWorld {
  private readonly tracked = new Map<string, Tracked>();
  readonly actions: ActionDefinition[];

  constructor(
    readonly fake: FakeService,
    private readonly refusedOrigin: string,
  ) {
    this.actions = historyActions(fake.url);
  }

  static async start(fake: FakeService): Promise<FaultedWorld> {
    const refused = new URL(await fake.unreachableUrl('refused')).origin;
    return new FaultedWorld(fake, refused);
  }

  track(plan: HistoryPlan): Tracked {
    const t: Tracked = { plan, posts: 0, lookups: 0, log: [] };
    this.tracked.set(plan.id, t);
    return t;
  }

  untrack(id: string): void {
    this.tracked.delete(id);
  }

  /** Holds `owner`'s exchange of attempt plan.pauseAt after its answer arrived, until `resume`. */
  stall(id: string, owner: string, resume: Promise<void>): Promise<void> {
    const t = this.tracked.get(id)!;
    return new Promise<void>((paused) => (t.stall = { owner, paused, resume }));
  }

  /** How many times the fake applied this history's write (its ground truth). */
  commits(id: string): number {
    return this.fake.groundTruth(id).filter((e) => e.event === 'mutation_committed').length;
  }

  /** The wrapping HTTP transport of one runtime (`owner()` names it once the runtime exists). */
  transport(owner: () => string, clock?: Clock): Transport<HttpPrepared> {
    const inner = httpTransport(clock ? { clock } : {});
    const dispatch = async (p: HttpPrepared, opts: DispatchOptions): Promise<Dispatched> => {
      const callId = p.headers['x-candor-call-id'] ?? '';
      const corr = p.headers['x-correlation-id'] ?? '';
      const lookupOf = corr.endsWith('.lookup') ? corr.slice(0, -'.lookup'.length) : null;
      const t = this.tracked.get(lookupOf ?? callId);
      if (!t) return inner.dispatch(p, opts);
      let spec: FaultSpec | null = null;
      let prepared = p;
      let n: number;
      if (lookupOf !== null && p.method === 'GET') {
        n = ++t.lookups;
        const f: LookupFault = t.plan.lookups[n - 1] ?? { kind: 'ok' };
        spec = lookupSpec(`${t.plan.id}.lookup`, f);
        t.log.push(`lookup #${n} by ${owner()}: ${f.kind}`);
      } else if (p.method === 'POST') {
        n = ++t.posts;
        const f: AttemptFault = t.plan.attempts[n - 1] ?? { kind: 'ok' };
        if (f.kind === 'refused') prepared = { ...p, origin: this.refusedOrigin };
        else spec = attemptSpec(t.plan.id, f);
        t.log.push(`attempt #${n} by ${owner()}: ${f.kind}`);
      } else {
        return inner.dispatch(p, opts);
      }
      const armed = spec ? this.fake.arm(spec) : null;
      let out: Dispatched;
      try {
        out = await inner.dispatch(prepared, opts);
      } finally {
        // A fault the request never met (it did not reach the fake) must not hit the next one;
        // a spent one is dropped too (the fake scans its armed faults on every request).
        if (armed) this.fake.disarm(armed.id);
      }
      const stall = t.stall;
      if (stall && lookupOf === null && n === t.plan.pauseAt && stall.owner === owner()) {
        t.log.push(`${owner()} stalls past its lease holding the answer to attempt #${n}`);
        stall.paused();
        await stall.resume;
        t.log.push(`${owner()} resumes and acts on the late answer to attempt #${n}`);
      }
      return out;
    };
    return {
      kind: 'http',
      close: () => inner.close?.() ?? Promise.resolve(),
      dispatch,
      // Lookups meet the planned faults too: read from the same wrapped exchange as the adapter does.
      lookup: async (p, opts) => readHttpLookup(p, await dispatch(p, opts)),
    };
  }

  /** The trace lines the world wrote for a history so far. */
  requests(id: string): readonly string[] {
    return this.tracked.get(id)?.log ?? [];
  }
}

function attemptSpec(id: string, f: AttemptFault): FaultSpec | null {
  const match = { call_id: id, method: 'POST' };
  switch (f.kind) {
    case 'ok':
    case 'refused':
      return null;
    case 'reset_before_commit':
      return { match, phase: f.phase, action: 'rst' };
    case 'reset_after_commit':
      return { match, phase: 'after_commit', action: f.action };
    case 'delayed_past_deadline':
      return { match, phase: 'after_commit', action: 'delay', delay_ms: DEADLINE_MS + 60 };
    case 'cut_body':
      return { match, phase: 'during_response_body', action: f.action, at_byte: f.at_byte };
    case 'status':
      return {
        match,
        phase: 'status',
        status: f.status,
        commit: f.commit,
        ...(f.status === 429 || f.status === 503 ? { retry_after: 0 } : {}),
        body: { error: `status_${f.status}` },
      };
  }
}

function lookupSpec(callId: string, f: LookupFault): FaultSpec | null {
  const match = { call_id: callId, method: 'GET' };
  switch (f.kind) {
    case 'ok':
      return null;
    case 'status':
      return { match, phase: 'status', status: f.status, body: { error: 'unavailable' } };
    case 'hang':
      return { match, phase: 'after_request_body', action: 'stall' };
    case 'reset':
      return { match, phase: 'after_request_headers', action: 'rst' };
  }
}

/** A gateway process: runtime + MCP gateway over one ledger handle. */
export interface GatewayProcess {
  readonly runtime: Runtime;
  readonly gateway: Gateway;
  readonly ledger: LedgerStore;
  readonly name: string;
  /** Stops it: `clean` as `candor serve` stops (session ended), else as a crash would. */
  stop(clean: boolean): Promise<void>;
}

export interface GatewayOptions {
  ledger: LedgerStore;
  /** Fleet members hold a lease; a lone gateway does not (as `candor serve` without `fleet:`). */
  lease?: LeaseOptions;
  clock?: Clock;
  /** Only fleet tests name their gateways; a lone gateway gets the default owner id. */
  owner?: string;
  /** Closes the ledger handle on stop (a process owns its handle). */
  ownsLedger: boolean;
}

export function startGateway(world: FaultedWorld, o: GatewayOptions): GatewayProcess {
  let rt: Runtime | null = null;
  const runtime = createRuntime({
    ledger: o.ledger,
    credentials: staticCredentials({ [AUTHORITY]: { authorization: 'Bearer history-token' } }),
    actions: world.actions,
    // The engine's own waits between automatic retries would only slow the campaign down.
    sleep: () => Promise.resolve(),
    backoff_ms: () => 0,
    ...(o.lease ? { lease: o.lease } : {}),
    ...(o.clock ? { clock: o.clock } : {}),
    ...(o.owner ? { owner: o.owner } : {}),
    transports: { http: world.transport(() => rt?.owner ?? '?', o.clock) },
  });
  rt = runtime;
  const configured: ConfiguredAction[] = world.actions.map((a) => ({
    definition: a,
    description: `history action ${a.name}`,
    title: undefined,
    input_schema: {
      type: 'object',
      properties: { name: { type: 'string' } },
      required: ['name'],
      additionalProperties: false,
    },
  }));
  const gateway = createGateway({ runtime, ledger: o.ledger, actions: configured });
  return {
    runtime,
    gateway,
    ledger: o.ledger,
    name: runtime.owner,
    async stop(clean) {
      await gateway.idle();
      if (clean) await runtime.endSession('gateway stopped');
      if (o.ownsLedger) await o.ledger.close();
      await runtime.close();
    },
  };
}
