// A transport that answers from a script: actions can be tested without sockets, since the
// transport port (core/transport.ts) is the only way bytes leave the engine. It keeps the port's
// promises — the shared contract suite (test/transport.case.ts) runs over it as over HTTP, SSH
// and MCP: a failed exchange is evidence, never a throw; phases are taken from its clock; an abort
// ends the exchange or lookup as `cancelled`; lookups answer found, absent or failed.
//
// Misuse is not an exchange: a script that runs out throws, naming the request it could not answer.
import type { Evidence } from '../core/evidence.js';
import {
  readHttpLookup,
  type DispatchOptions,
  type Dispatched,
  type HttpFound,
  type HttpLookupPrepared,
  type HttpPrepared,
  type Looked,
  type McpPrepared,
  type McpToolReply,
  type Phases,
  type Reply,
  type SshFound,
  type SshLookupPrepared,
  type SshPrepared,
  type Transport,
} from '../core/transport.js';

/**
 * One scripted answer, used by the next request in order:
 * - an exchange: the evidence, and the reply (HTTP) or data (SSH, MCP) as the real transport
 *   reports them; `phases` when a test pins them (else the transport's clock gives true ones);
 * - `{ looked }`: the answer to a lookup, as the real transport would report it;
 * - `{ hold: true }`: the destination never answers — only the caller's signal ends the request
 *   (evidence `request_sent`, `cancelled`: the bytes left and the answer is unknown).
 */
export type ScriptStep<F> =
  | { evidence: Evidence; reply?: Reply; data?: unknown; phases?: Phases }
  | { looked: Looked<F> }
  | { hold: true };

export interface ScriptedTransportOptions {
  /** The clock of the phases (default `Date.now`). */
  now?: () => number;
}

export interface ScriptedTransport<P extends HttpPrepared | SshPrepared | McpPrepared, L, F> {
  transport: Transport<P>;
  /** Every request that left, dispatched or looked up, in order (a request cancelled before it left is not here). */
  sent: Array<P | L>;
  /** The steps not used yet (tests may push more). */
  steps: Array<ScriptStep<F>>;
}

/** A scripted HTTP transport: an exchange step answers a lookup too, read as the adapter reads it. */
export function scriptedHttpTransport(
  steps: Array<ScriptStep<HttpFound>>,
  options: ScriptedTransportOptions = {},
): ScriptedTransport<HttpPrepared, HttpLookupPrepared, HttpFound> {
  return scripted<HttpPrepared, HttpLookupPrepared, HttpFound>('http', steps, {
    ...options,
    read: readHttpLookup,
  });
}

/** A scripted SSH transport (lookups answer from `{ looked }` steps). */
export function scriptedSshTransport(
  steps: Array<ScriptStep<SshFound>>,
  options: ScriptedTransportOptions = {},
): ScriptedTransport<SshPrepared, SshLookupPrepared, SshFound> {
  return scripted<SshPrepared, SshLookupPrepared, SshFound>('ssh', steps, {
    ...options,
    read: null,
  });
}

/** A scripted upstream MCP transport (lookups answer from `{ looked }` steps). */
export function scriptedMcpTransport(
  steps: Array<ScriptStep<McpToolReply>>,
  options: ScriptedTransportOptions = {},
): ScriptedTransport<McpPrepared, McpPrepared, McpToolReply> {
  return scripted<McpPrepared, McpPrepared, McpToolReply>('mcp', steps, {
    ...options,
    read: null,
  });
}

interface ScriptOptions<L, F> extends ScriptedTransportOptions {
  /** How an exchange step answers a lookup; null: only `{ looked }` steps do. */
  read: ((prepared: L, d: Dispatched) => Looked<F>) | null;
}

/** The port's members over one script; each exported maker pins the kinds, where the port's types meet. */
interface ScriptedPort<P, L, F> {
  kind: P extends { kind: infer K } ? K : never;
  dispatch(prepared: P, options: DispatchOptions): Promise<Dispatched>;
  lookup(prepared: L, options: DispatchOptions): Promise<Looked<F>>;
}

function scripted<P extends HttpPrepared | SshPrepared | McpPrepared, L, F>(
  kind: ScriptedPort<P, L, F>['kind'],
  steps: Array<ScriptStep<F>>,
  { now = Date.now, read }: ScriptOptions<L, F>,
): { transport: ScriptedPort<P, L, F>; sent: Array<P | L>; steps: Array<ScriptStep<F>> } {
  const sent: Array<P | L> = [];
  const cancelledBefore = (started_at: number): Dispatched => ({
    evidence: { phase: 'not_sent', local_error: 'cancelled' },
    data: null,
    diagnostics: { scripted: 'cancelled before sending' },
    phases: { started_at, finished_at: now() },
  });
  /** The next step for a request that is leaving now; held steps wait for the caller's abort. */
  const next = async (
    request: P | L,
    signal: AbortSignal | undefined,
  ): Promise<Exclude<ScriptStep<F>, { hold: true }> | Dispatched> => {
    sent.push(request);
    const step = steps.shift();
    if (!step) throw new Error(`the ${kind} script ran out at request ${sent.length}`);
    if (!('hold' in step)) return step;
    if (!signal) throw new Error(`a held step needs a signal (request ${sent.length})`);
    const started_at = now();
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', () => resolve(), { once: true });
    });
    return {
      evidence: { phase: 'request_sent', local_error: 'cancelled' },
      data: null,
      diagnostics: { scripted: sent.length },
      phases: { started_at, request_sent_at: started_at, finished_at: now() },
    };
  };
  const exchanged = (
    step: { evidence: Evidence; reply?: Reply; data?: unknown; phases?: Phases },
    started_at: number,
  ): Dispatched => ({
    evidence: { ...step.evidence },
    data: step.data ?? null,
    ...(step.reply ? { reply: step.reply } : {}),
    diagnostics: { scripted: sent.length },
    phases: step.phases ?? { started_at, finished_at: now() },
  });
  const transport: ScriptedPort<P, L, F> = {
    kind,
    async dispatch(prepared, { signal }) {
      const started_at = now();
      if (signal?.aborted) return cancelledBefore(started_at);
      const step = await next(prepared, signal);
      if ('looked' in step) throw new Error(`request ${sent.length} is an attempt, not a lookup`);
      return 'diagnostics' in step ? step : exchanged(step, started_at);
    },
    async lookup(prepared, { signal }) {
      const started_at = now();
      if (signal?.aborted) {
        const d = cancelledBefore(started_at);
        return { verdict: 'failed', evidence: d.evidence, phases: d.phases };
      }
      const step = await next(prepared, signal);
      if ('looked' in step) return step.looked;
      const d = 'diagnostics' in step ? step : exchanged(step, started_at);
      if (read) return read(prepared, d);
      // An exchange that is not read as a lookup here: only a held one (cancelled) is meaningful.
      if (d.evidence.local_error === 'cancelled')
        return { verdict: 'failed', evidence: d.evidence, phases: d.phases };
      throw new Error(`request ${sent.length} is a ${kind} lookup: script it as { looked }`);
    },
  };
  return { transport, sent, steps };
}
