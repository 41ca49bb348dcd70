// The duplicate guard of proxied upstream tools, kept in the ledger (DESIGN.md §5). Upstream MCP
// servers honour no idempotency key, so a blind repeat of a write could apply its effect twice. A
// new call (no operation_id) of a non-read upstream tool is held, not forwarded, while the ledger
// holds an unresolved (open or unknown) operation of the same tool with the same intent digest —
// the canonical, redacted arguments `operation_opened` records. Because the answer comes from the
// ledger:
//   - it survives a gateway restart (the operation is in the ledger file, not in memory);
//   - it spans a fleet sharing one ledger, once the first call's opening is recorded;
//   - it holds a call identical to one still in flight: the operation is opened (durably) before
//     its call is forwarded, and identical calls in this process queue on one lock from the check
//     to that opening, so of two concurrent identical calls exactly one is forwarded.
// Undeclared fields are refused by the tool's inputSchema where it forbids them (upstream/
// input-schema.ts) and are part of the digest otherwise.
//
// Limit: two gateways of a fleet receiving the identical call within the few milliseconds between
// one's check and its opening can both forward it; the ledger has no conditional append to close
// that window.
import type { ConfiguredAction } from '../config/actions.js';
import type { Envelope } from '../core/envelope.js';
import { outcomeOf } from '../core/rule-table.js';
import type { RunOptions } from '../engine/context.js';
import type { Runtime } from '../engine/runtime.js';
import type { LedgerStore } from '../ledger/store.js';

/** Why a call was held (in the envelope's data as `refusal`). */
export type DuplicateRefusal = 'duplicate_in_flight' | 'duplicate_unresolved';

export interface DuplicateGuard {
  /**
   * Runs `forward(operationId)` for a call that is not a duplicate, after opening its operation;
   * answers a duplicate with the earlier operation's directive instead. Calls that are not guarded
   * (reads, continuations, non-MCP actions) go straight to `direct()`. `open` holds what the
   * opening records besides the input (who asked: the caller).
   */
  run(
    action: ConfiguredAction,
    input: Record<string, unknown>,
    direct: () => Promise<Envelope>,
    forward: (operationId: string) => Promise<Envelope>,
    open?: Pick<RunOptions, 'caller'>,
  ): Promise<Envelope>;
}

export function duplicateGuard(runtime: Runtime, ledger: LedgerStore): DuplicateGuard {
  /** The tail of each key's queue: a check waits until the previous identical call is opened. */
  const queues = new Map<string, Promise<void>>();

  async function earlier(
    action: string,
    digest: string,
  ): Promise<{ operationId: string; inFlight: boolean } | null> {
    let after: string | null = null;
    do {
      const page = await ledger.operations({
        action,
        states: ['open', 'unknown'],
        limit: 500,
        ...(after !== null ? { after } : {}),
      });
      for (const row of page.rows) {
        const events = await ledger.query({ operation_id: row.operation_id });
        const opened = events.find((e) => e.kind === 'operation_opened');
        if (opened?.kind !== 'operation_opened' || opened.data.intent.params_digest !== digest)
          continue;
        const finished = events.filter((e) => e.kind === 'attempt_finished').length;
        const started = events.filter((e) => e.kind === 'attempt_started').length;
        return { operationId: row.operation_id, inFlight: started === 0 || started > finished };
      }
      after = page.next;
    } while (after !== null);
    return null;
  }

  async function held(
    action: ConfiguredAction,
    prior: { operationId: string; inFlight: boolean },
  ): Promise<Envelope> {
    const found = await runtime.status(prior.operationId);
    const refusal: DuplicateRefusal = prior.inFlight
      ? 'duplicate_in_flight'
      : 'duplicate_unresolved';
    const base = found?.envelope;
    const inFlight = outcomeOf('duplicate_in_flight');
    // The earlier operation's own directive; one still in flight has no answer yet: its outcome
    // is unknown until it ends (then operation_status says what it was).
    const directive =
      base && !prior.inFlight
        ? { category: base.category, retry: base.retry, remote_effect: base.remote_effect }
        : {
            category: inFlight.category,
            retry: inFlight.retry,
            remote_effect: inFlight.remote_effect,
          };
    const next =
      directive.retry === 'escalate'
        ? 'a person must check it and decide before it is repeated'
        : prior.inFlight
          ? 'wait for it, then check operation_status (or reconcile_operation) with that operation_id'
          : 'call reconcile_operation with that operation_id before repeating it';
    return {
      ok: false,
      ...directive,
      operation: action.definition.name,
      operation_id: prior.operationId,
      correlation_id: base?.correlation_id ?? null,
      message: prior.inFlight
        ? `Not forwarded: an identical call (${prior.operationId}) is still in flight; ${next}.`
        : `Not forwarded: an identical call (${prior.operationId}) has an outcome that is not settled (${found?.view.state ?? 'unknown'}); ${next}.`,
      data: {
        refusal: {
          code: refusal,
          detail: `an identical call is ${prior.inFlight ? 'in flight' : 'not settled'}: ${next}`,
        },
        held_operation_id: prior.operationId,
        state: found?.view.state ?? null,
      },
      diagnostics_ref: null,
    };
  }

  return {
    async run(action, input, direct, forward, open = {}) {
      const d = action.definition;
      if (d.destination.kind !== 'mcp' || d.class === 'read') return direct();
      const digest = runtime.paramsDigest(d, input);
      const key = `${d.name}\n${digest}`;
      const before = queues.get(key) ?? Promise.resolve();
      let release!: () => void;
      const mine = new Promise<void>((r) => (release = r));
      const tail = before.then(() => mine);
      queues.set(key, tail);
      let operationId: string;
      try {
        await before;
        const prior = await earlier(d.name, digest);
        if (prior) return await held(action, prior);
        // Opened (durably) before the call is forwarded: the next identical call finds it.
        operationId = await runtime.open(d, input, open);
      } finally {
        release();
        if (queues.get(key) === tail) queues.delete(key);
      }
      return forward(operationId);
    },
  };
}
