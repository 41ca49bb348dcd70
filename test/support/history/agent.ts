// One history, driven the way a careful agent drives an operation through the gateway: it runs the
// action, then follows each envelope's directive (the same operation_id again when `allowed`,
// after the delay when `after_delay`, reconcile_operation when `reconcile_first`, maybe when
// `escalate`), asks operation_status and list_unresolved_operations, and sometimes lives through
// a gateway restart. After every step the oracle checks every claim made so far about the
// operation against the fake's ground truth.
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { Envelope } from '../../../src/core/envelope.js';
import { projectOperation } from '../../../src/ledger/projection.js';
import type { LedgerStore } from '../../../src/ledger/store.js';
import {
  checkAgreement,
  checkEnvelope,
  checkSettled,
  checkView,
  Claim,
  duplicate,
  type Violation,
} from './oracle.js';
import { describePlan, type HistoryPlan, type Rng } from './plan.js';
import { actionName, type FaultedWorld, type GatewayProcess } from './world.js';

/** Where a history's gateway lives: one process that may restart, or a fleet member. */
export interface Host {
  /** The gateway the agent talks to now. */
  current(): Promise<GatewayProcess>;
  /** Stops the gateway (cleanly or as a crash) and starts a new one on the same ledger. */
  restart(clean: boolean): Promise<void>;
  /** A reader of the ledger, as `candor ops` opens one. */
  readonly reader: LedgerStore;
}

export interface HistoryResult {
  plan: HistoryPlan;
  trace: string[];
  violations: Violation[];
  /** Steps taken (a shorter history makes a better minimal example). */
  steps: number;
  /** Wall time of the history. */
  ms?: number;
}

export const MAX_STEPS = 7;

export function envelopeOf(r: CallToolResult): { envelope: Envelope; headline: string } {
  const envelope = r.structuredContent as Envelope;
  const first = r.content[0];
  const text = first && first.type === 'text' ? first.text : '';
  return { envelope, headline: text.split('\n')[0] ?? '' };
}

function brief(e: Envelope): string {
  return `${e.category}/${e.retry}/${e.remote_effect}${e.retry_after_ms !== undefined ? ` (${e.retry_after_ms} ms)` : ''} "${e.message}"`;
}

/** The running record of one history: trace lines, violations (each class once), settled flag. */
export class Recorder {
  readonly trace: string[];
  readonly violations: Violation[] = [];
  private seenKeys = new Set<string>();
  private requestsShown = 0;
  settled = false;
  steps = 0;

  constructor(
    readonly plan: HistoryPlan,
    private readonly world: FaultedWorld,
  ) {
    this.trace = [describePlan(plan)];
  }

  /** Appends what left for this history since the last call (attempts and lookups). */
  requests(): void {
    const all = this.world.requests(this.plan.id);
    for (const line of all.slice(this.requestsShown)) this.trace.push(`      ${line}`);
    this.requestsShown = all.length;
  }

  step(line: string): void {
    this.steps += 1;
    this.requests();
    this.trace.push(`  step ${this.steps}: ${line}`);
  }

  add(vs: readonly Violation[]): void {
    for (const v of vs) {
      if (this.seenKeys.has(v.key)) continue;
      this.seenKeys.add(v.key);
      this.violations.push(v);
      this.trace.push(`      ✗ ${v.claim} — ${v.source}: ${v.said}`);
    }
  }

  /**
   * A tool call as an MCP client makes it. A call that fails as a protocol error (the gateway
   * could not give an envelope) is itself a failure class: the agent is told nothing it can use.
   */
  async call(
    gw: GatewayProcess,
    tool: string,
    args: Record<string, unknown>,
  ): Promise<{ envelope: Envelope; headline: string } | null> {
    try {
      return envelopeOf(await gw.gateway.callTool(tool, args));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const shortTool = tool.startsWith('h_') ? 'an action (with operation_id)' : tool;
      this.add([
        {
          claim: Claim.exception,
          source: tool,
          said: message,
          key: `exception | ${shortTool} | ${message.replace(/op_\w+|h-\d+|\d+/g, '#')}`,
        },
      ]);
      return null;
    }
  }

  /** Checks one envelope the agent was given. */
  envelope(source: string, e: Envelope, headline?: string): void {
    const commits = this.world.commits(this.plan.id);
    this.add(checkEnvelope(source, e, commits, headline));
    if (this.settled && e.operation_id !== null) this.add(checkSettled(source, e, null));
  }

  /** After every step: ground truth, the ledger as `ops` shows it, and operation_status. */
  async checkpoint(
    host: Host,
    operationId: string | null,
    gw: GatewayProcess | null,
    /** The envelope the step's call returned (status must agree with it), if any. */
    said: { source: string; envelope: Envelope } | null = null,
  ): Promise<void> {
    const commits = this.world.commits(this.plan.id);
    if (commits >= 2) this.add([duplicate(commits)]);
    if (operationId === null) return;
    // A successor's sweep or a resumed owner may commit while the ledger is read and the status
    // asked for: each claim is held to the counts from before it was asked and after it arrived.
    const view = projectOperation(await host.reader.query({ operation_id: operationId }));
    if (view) {
      if (this.settled) this.add(checkSettled('ledger (ops list)', null, view));
      const seen = { before: commits, after: this.world.commits(this.plan.id) };
      this.add(checkView('ledger (ops list)', view, seen));
      if (view.state === 'succeeded') this.settled = true;
    }
    const asked = this.world.commits(this.plan.id);
    const status = gw
      ? await this.call(gw, 'operation_status', { operation_id: operationId })
      : null;
    if (status) {
      const seen = { before: asked, after: this.world.commits(this.plan.id) };
      this.add(checkEnvelope('operation_status', status.envelope, seen, status.headline));
      if (this.settled) this.add(checkSettled('operation_status', status.envelope, null));
      if (said && said.envelope.operation_id === operationId)
        this.add(checkAgreement(said.source, said.envelope, status.envelope));
    }
    const now = this.world.commits(this.plan.id);
    this.trace.push(
      `      truth: ${commits === now ? commits : `${commits} → ${now}`} commit(s); ledger state ${view?.state ?? '-'}`,
    );
  }

  result(): HistoryResult {
    this.requests();
    return { plan: this.plan, trace: this.trace, violations: this.violations, steps: this.steps };
  }
}

/**
 * list_unresolved_operations once, at the end of a campaign: every listed operation's claims
 * against its ground truth (a listing per agent step would cost O(unresolved) each time).
 */
export async function checkListing(
  world: FaultedWorld,
  gw: GatewayProcess,
  results: readonly HistoryResult[],
): Promise<void> {
  const got = envelopeOf(await gw.gateway.callTool('list_unresolved_operations', {}));
  const ops = (got.envelope.data as { operations: Array<Record<string, unknown>> }).operations;
  const byId = new Map(results.map((r) => [r.plan.id, r]));
  for (const o of ops) {
    const result = byId.get(String(o['correlation_id']));
    if (!result) continue;
    const listed: Envelope = {
      ...got.envelope,
      ok: false,
      category: o['category'] as Envelope['category'],
      retry: o['retry'] as Envelope['retry'],
      remote_effect: o['remote_effect'] as Envelope['remote_effect'],
      message: '',
      operation_id: String(o['operation_id']),
    };
    const found = checkEnvelope(
      'list_unresolved_operations (end of campaign)',
      listed,
      world.commits(result.plan.id),
    );
    if (found.length === 0) continue;
    result.trace.push(`  end of campaign: list_unresolved_operations → ${JSON.stringify(o)}`);
    for (const v of found) {
      result.violations.push(v);
      result.trace.push(`      ✗ ${v.claim} — ${v.source}: ${v.said}`);
    }
  }
}

type Move = 'retry' | 'wait_retry' | 'reconcile' | 'status' | 'list' | 'restart' | 'stop';

/** A careful agent's next move after envelope `last`. */
export function nextMove(r: Rng, last: Envelope, restartsLeft: number): Move {
  if (restartsLeft > 0 && r.chance(0.12)) return 'restart';
  if (r.chance(0.1)) return 'status';
  if (r.chance(0.005)) return 'list';
  switch (last.retry) {
    case 'allowed':
      return 'retry';
    case 'after_delay':
      return 'wait_retry';
    case 'reconcile_first':
      return 'reconcile';
    case 'escalate':
      // A lookup is always safe; a person may ask for one.
      return r.chance(0.5) ? 'reconcile' : 'stop';
    case 'never':
      // Asking again about a settled operation with its id must answer its settled state.
      return last.ok && r.chance(0.4) ? 'retry' : 'stop';
    default:
      return 'stop';
  }
}

/**
 * Runs the agent's moves on `host` from envelope `first` (the answer to the first call) until it
 * stops or MAX_STEPS; `rec` holds the trace.
 */
export async function follow(
  rec: Recorder,
  host: Host,
  r: Rng,
  operationId: string,
  first: Envelope,
  restarts = 1,
  /** The step count at which the agent stops in any case. */
  limit = MAX_STEPS,
): Promise<Envelope> {
  let last = first;
  let restartsLeft = restarts;
  const name = actionName(rec.plan.contract);
  while (rec.steps < limit) {
    let said: { source: string; envelope: Envelope } | null = null;
    const move = nextMove(r, last, restartsLeft);
    if (move === 'stop') {
      rec.trace.push(`  (the agent stops: retry ${last.retry})`);
      break;
    }
    let gw = await host.current();
    switch (move) {
      case 'restart': {
        restartsLeft -= 1;
        const clean = r.chance(0.5);
        const before = gw.name;
        await host.restart(clean);
        gw = await host.current();
        rec.step(
          `gateway ${clean ? 'stopped cleanly' : 'crashed'} and restarted on the same ledger (${before} → ${gw.name})`,
        );
        break;
      }
      case 'status':
      case 'list': {
        if (move === 'status') {
          const got = await rec.call(gw, 'operation_status', { operation_id: operationId });
          rec.step(`operation_status → ${got ? brief(got.envelope) : 'a protocol error'}`);
          if (got) last = got.envelope;
        } else {
          const got = await rec.call(gw, 'list_unresolved_operations', {});
          if (!got) {
            rec.step('list_unresolved_operations → a protocol error');
            break;
          }
          const envelope = got.envelope;
          const ops = (envelope.data as { operations: Array<Record<string, unknown>> }).operations;
          const mine = ops.find((o) => o['operation_id'] === operationId);
          rec.step(`list_unresolved_operations → ${mine ? JSON.stringify(mine) : 'not listed'}`);
          if (mine) {
            rec.envelope('list_unresolved_operations', {
              ...envelope,
              ok: false,
              category: mine['category'] as Envelope['category'],
              retry: mine['retry'] as Envelope['retry'],
              remote_effect: mine['remote_effect'] as Envelope['remote_effect'],
              message: '',
              operation_id: operationId,
            });
          }
        }
        break;
      }
      case 'wait_retry':
      case 'retry': {
        if (move === 'wait_retry')
          await new Promise((res) => setTimeout(res, Math.min(last.retry_after_ms ?? 0, 50)));
        const got = await rec.call(gw, name, { name: rec.plan.id, operation_id: operationId });
        rec.step(
          `${name} again with operation_id (${move === 'wait_retry' ? `after ${last.retry_after_ms ?? 0} ms` : 'retry allowed'}${last.retry === 'never' ? ', already settled' : ''}) → ${got ? brief(got.envelope) : 'a protocol error'}`,
        );
        if (!got) return last;
        rec.envelope('retry envelope', got.envelope, got.headline);
        said = { source: 'retry envelope', envelope: got.envelope };
        last = got.envelope;
        break;
      }
      case 'reconcile': {
        const got = await rec.call(gw, 'reconcile_operation', { operation_id: operationId });
        rec.step(`reconcile_operation → ${got ? brief(got.envelope) : 'a protocol error'}`);
        if (!got) return last;
        rec.envelope('reconcile envelope', got.envelope, got.headline);
        said = { source: 'reconcile envelope', envelope: got.envelope };
        last = got.envelope;
        break;
      }
    }
    await rec.checkpoint(host, operationId, gw, said);
  }
  return last;
}

/** One single-gateway history: run, then follow. */
export async function runHistory(
  world: FaultedWorld,
  host: Host,
  plan: HistoryPlan,
  r: Rng,
): Promise<HistoryResult> {
  const rec = new Recorder(plan, world);
  world.track(plan);
  try {
    const gw = await host.current();
    const action = world.actions.find((a) => a.name === actionName(plan.contract))!;
    const env = await gw.runtime.run(action, { name: plan.id }, { correlationId: plan.id });
    rec.step(`run ${action.name} → ${brief(env)}`);
    rec.envelope('run envelope', env);
    await rec.checkpoint(host, env.operation_id, gw, { source: 'run envelope', envelope: env });
    if (env.operation_id !== null) await follow(rec, host, r, env.operation_id, env);
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
  }
  return rec.result();
}
