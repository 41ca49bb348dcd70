// What the engine tells a tracing backend: one trace per operation call (a tool execution), fed
// with the ledger events of that call as they are written. The engine depends on this port only;
// src/telemetry/otel.ts implements it over @opentelemetry/api (an optional peer dependency), so a
// runtime without telemetry loads no OpenTelemetry code at all.
import type { Envelope } from '../core/envelope.js';
import type { StoredEvent } from '../ledger/events.js';

export interface Telemetry {
  /** Starts the trace of one operation call of the action `tool` (run, reconcile or recover). */
  call(tool: string): CallTrace;
}

export interface CallTrace {
  /** The operation the call is about (known once it is opened or loaded). */
  identify(operation: {
    operation_id: string;
    correlation_id: string | null;
    action: string | null;
    /**
     * The W3C `traceparent`s of earlier calls on this operation (the call that opened it and the
     * calls that started its attempts, as recorded in the ledger): a call that settles the
     * operation (reconcile, recover, a fleet sweep) links its span to them.
     */
    links?: readonly string[];
  }): void;
  /** Ledger events of the call, as stored: attempts become child spans, evidence span events. */
  record(events: readonly StoredEvent[]): void;
  /**
   * The W3C `traceparent` for a request leaving now (the open attempt's span, else the call's),
   * or null when nothing is being traced.
   */
  traceparent(): string | null;
  /**
   * The call's own W3C `traceparent` (its `execute_tool` span, never an attempt's), recorded on
   * `operation_opened` and `attempt_started` so that a later call settling the operation can link
   * to it; null when nothing is being traced. Optional for implementations written before links.
   */
  context?(): string | null;
  /** Ends the call with the envelope the caller gets (or the misuse/fault that was thrown). */
  end(outcome: { envelope: Envelope } | { error: unknown }): void;
}
