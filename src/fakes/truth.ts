// The ground-truth log: what the fake actually received, committed and wrote, per request id.
// One JSON object per line. `seq` is global to the service (a total order across requests and
// sockets); `at` is milliseconds on a monotonic clock (injectable), comparable only with other
// readings of the same clock. `request` numbers requests in arrival order, so two attempts that
// share a correlation id stay apart. Nothing from request headers is recorded except the ids
// (call, correlation and W3C trace ids).
import { closeSync, openSync, writeSync } from 'node:fs';

export const TruthEventKind = {
  received: 'received',
  headers_complete: 'headers_complete',
  body_complete: 'body_complete',
  mutation_committed: 'mutation_committed',
  response_bytes_written: 'response_bytes_written',
  close_kind: 'close_kind',
  /** Proxy only: the request was written whole to the upstream. */
  forwarded: 'forwarded',
  /** Proxy only: the upstream's answer (`status`); absent when it never answered. */
  upstream_answered: 'upstream_answered',
  /** Proxy only: the upstream could not be reached or broke off (`detail`). */
  upstream_failed: 'upstream_failed',
} as const;
export type TruthEventKind = (typeof TruthEventKind)[keyof typeof TruthEventKind];

export const CloseKind = {
  fin: 'fin',
  rst: 'rst',
  stall: 'stall',
  keepalive: 'keepalive',
  client_closed: 'client_closed',
} as const;
export type CloseKind = (typeof CloseKind)[keyof typeof CloseKind];

export interface TruthEvent {
  /** Request id (`x-candor-call-id`, else `x-correlation-id`, else `anon-NNNN`). */
  call_id: string;
  seq: number;
  at: number;
  event: TruthEventKind;
  /** Arrival number of the request this event belongs to. */
  request: number;
  method?: string;
  path?: string;
  /** `x-correlation-id` when it differs from `call_id`. */
  correlation_id?: string;
  body_bytes?: number;
  /** `mutation_committed`: what changed. */
  resource_kind?: string;
  resource_id?: string;
  mutation?: 'create' | 'update' | 'delete' | 'append';
  /** `response_bytes_written`: bytes of this response handed to the kernel (head + body). */
  bytes?: number;
  status?: number;
  /** The response replayed a stored idempotent response (nothing new was committed). */
  replayed?: boolean;
  close_kind?: CloseKind;
  /** The armed fault that shaped this request, if any. */
  fault_id?: string;
  /** `close_kind` for a stale keep-alive socket: bytes of the next request that were never read. */
  unread_bytes?: number;
  /** `upstream_failed`: the error code. */
  detail?: string;
  /** `headers_complete`: the W3C trace context the client sent (ids only, never a secret). */
  traceparent?: string;
}

export type TruthDetails = Omit<TruthEvent, 'call_id' | 'seq' | 'at' | 'event' | 'request'>;

export class TruthLog {
  private events: TruthEvent[] = [];
  /** The same events by request id: a long campaign asks about one id thousands of times. */
  private byCall = new Map<string, TruthEvent[]>();
  private seq = 0;
  private fd: number | undefined;
  /** Waiters for an event not yet recorded (`when`). */
  private waiters = new Set<{
    match: (e: TruthEvent) => boolean;
    found: (e: TruthEvent) => void;
  }>();

  constructor(
    private readonly now: () => number,
    logFile?: string,
  ) {
    if (logFile !== undefined) this.fd = openSync(logFile, 'a');
  }

  /** `at` may be given for an event observed earlier than it could be attributed (first byte). */
  record(
    callId: string,
    request: number,
    event: TruthEventKind,
    details: TruthDetails = {},
    at?: number,
  ): TruthEvent {
    this.seq += 1;
    const entry: TruthEvent = {
      call_id: callId,
      seq: this.seq,
      at: at ?? this.now(),
      event,
      request,
      ...details,
    };
    this.events.push(entry);
    const mine = this.byCall.get(callId);
    if (mine) mine.push(entry);
    else this.byCall.set(callId, [entry]);
    // Appended synchronously so the file order is the event order even if the process dies next.
    if (this.fd !== undefined) writeSync(this.fd, `${JSON.stringify(entry)}\n`);
    for (const w of this.waiters) {
      if (!w.match(entry)) continue;
      this.waiters.delete(w);
      w.found(entry);
    }
    return entry;
  }

  /**
   * The first event (already recorded, or recorded later) that `match` accepts: tests wait on the
   * event itself instead of sleeping until it has probably happened.
   */
  when(match: (e: TruthEvent) => boolean): Promise<TruthEvent> {
    const seen = this.events.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((found) => this.waiters.add({ match, found }));
  }

  query(callId?: string): TruthEvent[] {
    return callId === undefined ? [...this.events] : [...(this.byCall.get(callId) ?? [])];
  }

  /** Clears memory; the file (an audit trail across resets) is left as written. */
  clear(): void {
    this.events = [];
    this.byCall.clear();
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

export function toJsonl(events: readonly TruthEvent[]): string {
  return events.map((e) => `${JSON.stringify(e)}\n`).join('');
}
