// The engine's side of telemetry (src/telemetry/port.ts): each operation call runs with its trace
// in async-local storage, every event the engine appends is handed to that trace, and HTTP
// requests leaving during the call carry its W3C `traceparent`. Without `telemetry` configured
// none of this allocates anything beyond one storage lookup per append.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Envelope } from '../core/envelope.js';
import type { Prepared } from '../core/transport.js';
import type { StoredEvent } from '../ledger/events.js';
import type { CallTrace, Telemetry } from '../telemetry/port.js';

const current = new AsyncLocalStorage<CallTrace>();

/** How `traced` reads a call's result and when it starts the trace. */
export interface TracedOptions<T> {
  /** Picks the caller's envelope from a result that is not one (a recovery item). */
  envelope?: (result: T) => Envelope | null;
  /**
   * The trace starts only once the call names its operation (recovery passes over operations it
   * leaves alone without a span).
   */
  lazy?: boolean;
}

/** Runs one operation call of `tool` inside its trace (or plainly, without telemetry). */
export async function traced<T = Envelope>(
  telemetry: Telemetry | undefined,
  tool: string,
  fn: () => Promise<T>,
  { envelope = (r) => r as Envelope, lazy = false }: TracedOptions<T> = {},
): Promise<T> {
  if (!telemetry) return fn();
  let started: CallTrace | null = lazy ? null : telemetry.call(tool);
  const start = (): CallTrace => (started ??= telemetry.call(tool));
  const trace: CallTrace = {
    identify: (op) => start().identify(op),
    record: (events) => start().record(events),
    traceparent: () => started?.traceparent() ?? null,
    // Asked only while an event of this call is being written: the trace starts then if lazy.
    context: () => start().context?.() ?? null,
    end: (outcome) => started?.end(outcome),
  };
  try {
    const result = await current.run(trace, fn);
    const env = envelope(result);
    if (env) trace.end({ envelope: env });
    else trace.end({ error: { code: 'left_alone' } });
    return result;
  } catch (error) {
    trace.end({ error });
    throw error;
  }
}

/** Tells the current call which operation it is about, and the earlier calls it links to. */
export function identifyCall(view: {
  operation_id: string;
  correlation_id: string | null;
  action: string | null;
  traceparents?: readonly string[];
}): void {
  const trace = current.getStore();
  if (!trace) return;
  const own = trace.context?.() ?? null;
  const links = (view.traceparents ?? []).filter((t) => t !== own);
  trace.identify({
    operation_id: view.operation_id,
    correlation_id: view.correlation_id,
    action: view.action,
    ...(links.length > 0 ? { links } : {}),
  });
}

/**
 * The current call's own `traceparent` as the ledger records it on `operation_opened` and
 * `attempt_started` (`{ traceparent }`), or nothing when the call is not traced.
 */
export function callContext(): { traceparent: string } | Record<string, never> {
  const tp = current.getStore()?.context?.() ?? null;
  return tp !== null && TRACEPARENT.test(tp) ? { traceparent: tp } : {};
}

/** A W3C traceparent of version 00 (what is recorded and linked; anything else is dropped). */
export const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** Hands stored events to the current call's trace. */
export function traceEvents(events: readonly StoredEvent[]): void {
  current.getStore()?.record(events);
}

/** The request with the current call's `traceparent` header (HTTP only; others unchanged). */
export function withTraceparent<P extends Prepared>(prepared: P): P {
  const trace = current.getStore();
  if (!trace || prepared.kind !== 'http') return prepared;
  const tp = trace.traceparent();
  if (!tp) return prepared;
  return { ...prepared, headers: { ...prepared.headers, traceparent: tp } };
}
