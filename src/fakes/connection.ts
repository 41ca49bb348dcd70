// One client socket: parse a request, apply the armed fault at its phase, answer, and record the
// ground truth. Requests on a socket are served one at a time (pipelined bytes wait in the parser).
// Close kinds: `fin` = socket.end() (the peer reads EOF), `rst` = resetAndDestroy() (the peer reads
// ECONNRESET), `stall` = the socket stays open and silent, `keepalive` = ready for the next request,
// `client_closed` = the peer went away before the answer was complete.
import type net from 'node:net';
import { handle, type ApiContext, type ApiOutcome, type ApiRequest } from './api.js';
import type { ArmedFault, Fault, FaultRegistry } from './faults.js';
import type { StoredResponse } from './idempotency.js';
import { render, renderMalformed, type WireOptions, type WireResponse } from './response.js';
import type { CloseKind, TruthDetails, TruthEventKind, TruthLog } from './truth.js';
import { RequestParser, type ParseEvent, type RequestHead } from './wire.js';

export interface AdminRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  body: Buffer;
}

/**
 * What answers a request once its fault (if any) let it through: the reference API by default, the
 * OpenAPI emulation, or the proxy's upstream (asynchronous). `forwarded` is called when the request
 * has reached the service (the proxy: written to the upstream), which is where an `after_forward`
 * fault cuts the client off.
 */
export type RequestHandler = (
  req: ApiRequest,
  hooks: { forwarded(): void },
) => ApiOutcome | Promise<ApiOutcome>;

export interface ServiceContext {
  now(): number;
  handler?: RequestHandler;
  truth: TruthLog;
  faults: FaultRegistry;
  api: ApiContext;
  keepAliveTimeoutMs: number;
  nextRequestNo(): number;
  nextAnonId(): string;
  admin(req: AdminRequest): Promise<StoredResponse>;
  /** Schedules a configured delay; cancelled when the service closes. */
  later(ms: number, fn: () => void): void;
}

interface Current {
  head: RequestHead;
  path: string;
  query: URLSearchParams;
  admin: boolean;
  callId: string;
  correlationId: string | null;
  request: number;
  firstByteAt: number;
  armed: ArmedFault | undefined;
  /** A close kind has been recorded for this request. */
  closed: boolean;
}

type After =
  | { kind: 'normal' }
  | { kind: 'cut'; atByte: number; action: 'fin' | 'rst' | 'stall' }
  | { kind: 'stale'; mode: 'reset_on_reuse' | 'fin_after_response' };

export class Connection {
  private readonly parser = new RequestParser();
  private current: Current | undefined;
  private firstByteAt = 0;
  private busy = false;
  /** No more reading or answering on this socket. */
  private dead = false;
  /** Set by a `reset_on_reuse` stale-socket fault: the request whose socket is doomed. */
  private stale: Current | undefined;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly socket: net.Socket,
    private readonly ctx: ServiceContext,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.onPeerEnd());
    socket.on('error', () => undefined);
    socket.on('close', () => this.onClosed());
  }

  destroy(): void {
    this.dead = true;
    clearTimeout(this.idleTimer);
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    if (this.stale !== undefined) return this.resetStale(chunk.length);
    if (this.dead) return;
    clearTimeout(this.idleTimer);
    if (this.current === undefined && this.parser.idle) this.firstByteAt = this.ctx.now();
    this.parser.push(chunk);
    this.pump();
  }

  private pump(): void {
    while (!this.busy && !this.dead) {
      const ev = this.parser.pull();
      if (ev === null) return;
      if (ev.kind === 'head') this.onHead(ev.head);
      else if (ev.kind === 'body') this.onBody(ev.body);
      else this.onParseError(ev);
    }
  }

  private onHead(head: RequestHead): void {
    const q = head.target.indexOf('?');
    const path = q < 0 ? head.target : head.target.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : head.target.slice(q + 1));
    const callHeader = head.headers['x-candor-call-id'];
    const correlationId = head.headers['x-correlation-id'] ?? null;
    const admin = path.startsWith('/_candor/');
    const cur: Current = {
      head,
      path,
      query,
      admin,
      callId: admin ? '' : callHeader || correlationId || this.ctx.nextAnonId(),
      correlationId,
      request: admin ? 0 : this.ctx.nextRequestNo(),
      firstByteAt: this.firstByteAt,
      armed: undefined,
      closed: false,
    };
    this.current = cur;
    if (admin) return;
    const callIds = [callHeader, correlationId].filter(
      (v): v is string => v !== undefined && v !== '',
    );
    cur.armed = this.ctx.faults.take({ callIds, method: head.method, path });
    const fault_id = cur.armed?.id;
    const ids: TruthDetails =
      correlationId !== null && correlationId !== cur.callId
        ? { correlation_id: correlationId }
        : {};
    this.log(cur, 'received', { method: head.method, path, ...ids }, cur.firstByteAt);
    const traceparent = head.headers['traceparent'];
    this.log(cur, 'headers_complete', {
      ...(fault_id === undefined ? {} : { fault_id }),
      ...(traceparent === undefined ? {} : { traceparent }),
    });
    const fault = cur.armed?.fault;
    if (fault?.phase === 'after_request_headers') {
      this.closeWith(cur, fault.action);
      return;
    }
    if (head.headers['expect']?.toLowerCase() === '100-continue')
      this.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
  }

  private onBody(body: Buffer): void {
    const cur = this.current;
    if (cur === undefined) return;
    this.busy = true;
    if (!cur.admin) this.log(cur, 'body_complete', { body_bytes: body.length });
    if (cur.admin) {
      const answer = (res: StoredResponse): void => {
        if (!this.dead) this.send(cur, render(res, this.wireOptions(cur)), { kind: 'normal' });
      };
      this.ctx
        .admin({ method: cur.head.method, path: cur.path, query: cur.query, body })
        .then(answer, (e: unknown) =>
          answer({ status: 500, headers: {}, body: { error: 'admin_failed', message: String(e) } }),
        );
      return;
    }
    this.respond(cur, body);
  }

  private respond(cur: Current, body: Buffer): void {
    const fault = cur.armed?.fault;
    if (fault?.phase === 'after_request_body') return this.closeWith(cur, fault.action);
    if (fault?.phase === 'status' && fault.commit !== true) {
      const reply = render(statusResponse(fault), this.wireOptions(cur));
      if (!fault.delay_ms) return this.send(cur, reply, { kind: 'normal' });
      this.ctx.later(fault.delay_ms, () => {
        if (!this.dead && !cur.closed) this.send(cur, reply, { kind: 'normal' });
      });
      return;
    }
    if (fault?.phase === 'malformed' && fault.commit === false) {
      // Not processed: nothing is committed and the ground truth says so; the garbled reply is a
      // stand-in error answer (what a front proxy returns for a request it did not pass on).
      return this.send(cur, renderMalformed(unprocessed(fault), fault, this.wireOptions(cur)), {
        kind: 'normal',
      });
    }
    const req: ApiRequest = {
      method: cur.head.method,
      path: cur.path,
      query: cur.query,
      headers: cur.head.headers,
      body,
      correlationId: cur.correlationId,
      request: cur.request,
    };
    // Only an asynchronous handler (the proxy) reports forwarding; a synchronous one has already
    // processed the request when it returns, and `answer` applies an after_forward fault.
    const hooks = {
      forwarded: () => {
        this.log(cur, 'forwarded');
        if (fault?.phase === 'after_forward' && !cur.closed) this.closeWith(cur, fault.action);
      },
    };
    const result = this.ctx.handler ? this.ctx.handler(req, hooks) : handle(this.ctx.api, req);
    if (!(result instanceof Promise)) return this.answer(cur, result);
    result.then(
      (outcome) => this.answer(cur, outcome),
      () => this.answer(cur, { response: BAD_GATEWAY, mutations: [], replayed: false }),
    );
  }

  private answer(cur: Current, outcome: ApiOutcome): void {
    const fault = cur.armed?.fault;
    for (const e of outcome.truth ?? []) this.log(cur, e.event, e.details);
    for (const m of outcome.mutations) this.log(cur, 'mutation_committed', { ...m });
    const settle = (): void => {
      if (outcome.ticket !== undefined) this.ctx.api.keys.settle(outcome.ticket, outcome.response);
    };
    // The client is already gone (an after_forward fault): the service's answer is only evidence.
    if (cur.closed || this.dead) return settle();
    const res = fault?.phase === 'status' ? statusResponse(fault) : outcome.response;
    const opts = this.wireOptions(cur);
    const replayed = outcome.replayed;
    switch (fault?.phase) {
      case 'after_commit':
        if (fault.action === 'delay') {
          // The idempotency key stays in progress until the delayed reply is handed over.
          this.ctx.later(fault.delay_ms ?? 0, () => {
            settle();
            if (!this.dead && !cur.closed)
              this.send(cur, render(res, opts), { kind: 'normal' }, replayed);
          });
          return;
        }
        settle();
        return this.closeWith(cur, fault.action);
      case 'after_forward':
        settle();
        return this.closeWith(cur, fault.action);
      case 'malformed':
        settle();
        return this.send(cur, renderMalformed(res, fault, opts), { kind: 'normal' }, replayed);
      case 'during_response_body':
        settle();
        return this.send(
          cur,
          render(res, opts),
          { kind: 'cut', atByte: fault.at_byte, action: fault.action },
          replayed,
        );
      case 'stale_socket':
        settle();
        return this.send(
          cur,
          // The server is about to drop this socket: it keeps it open but announces no idle
          // time, as a server that closes idle sockets at will does. A client may trust an
          // announced keep-alive time for a write (Candor does, briefly, well below it); one
          // that reuses any idle socket for a write is caught by this fault.
          render(res, { ...opts, keepAlive: true, keepAliveTimeoutS: 0 }),
          { kind: 'stale', mode: fault.mode ?? 'reset_on_reuse' },
          replayed,
        );
      case 'status':
        if (fault.delay_ms) {
          // As a delayed after_commit reply: the key stays in progress until it is handed over.
          this.ctx.later(fault.delay_ms, () => {
            settle();
            if (!this.dead && !cur.closed)
              this.send(cur, render(res, opts), { kind: 'normal' }, replayed);
          });
          return;
        }
        settle();
        return this.send(cur, render(res, opts), { kind: 'normal' }, replayed);
      default:
        settle();
        return this.send(cur, render(res, opts), { kind: 'normal' }, replayed);
    }
  }

  private send(cur: Current, wire: WireResponse, after: After, replayed = false): void {
    const body = after.kind === 'cut' ? wire.body.subarray(0, after.atByte) : wire.body;
    const bytes = Buffer.concat([wire.head, body]);
    this.socket.write(bytes, (err) => {
      if (err) {
        if (!cur.admin && !cur.closed) this.closeKind(cur, 'client_closed');
        return;
      }
      if (!cur.admin) {
        this.log(cur, 'response_bytes_written', {
          bytes: bytes.length,
          status: wire.status,
          ...(replayed ? { replayed } : {}),
        });
      }
      if (after.kind === 'cut') return this.closeWith(cur, after.action);
      if (after.kind === 'stale') {
        if (after.mode === 'fin_after_response') return this.closeWith(cur, 'fin');
        this.stale = cur;
        this.finishRequest();
        return;
      }
      if (wire.after === 'fin') return this.closeWith(cur, 'fin');
      if (!cur.admin) this.closeKind(cur, 'keepalive');
      this.finishRequest();
    });
  }

  private finishRequest(): void {
    this.current = undefined;
    this.busy = false;
    this.parser.next();
    if (this.parser.buffered > 0) {
      if (this.stale !== undefined) return this.resetStale(this.parser.buffered);
      this.firstByteAt = this.ctx.now();
      this.pump();
      return;
    }
    this.idleTimer = setTimeout(() => {
      // Idle keep-alive sockets are closed quietly; the request before already has its close kind
      // (except a doomed stale socket, whose request learns its close kind only now).
      if (this.stale !== undefined) return this.closeWith(this.stale, 'fin');
      this.dead = true;
      this.socket.end();
    }, this.ctx.keepAliveTimeoutMs);
    this.idleTimer.unref();
  }

  /** The request reusing a doomed socket is never read: RST, as from an already closed socket. */
  private resetStale(unread: number): void {
    const doomed = this.stale;
    if (doomed === undefined) return;
    this.stale = undefined;
    this.closeKind(doomed, 'rst', { unread_bytes: unread });
    this.dead = true;
    clearTimeout(this.idleTimer);
    this.socket.resetAndDestroy();
  }

  private closeWith(cur: Current, kind: 'fin' | 'rst' | 'stall'): void {
    this.closeKind(cur, kind);
    this.dead = true;
    this.stale = undefined;
    clearTimeout(this.idleTimer);
    if (kind === 'fin') this.socket.end();
    else if (kind === 'rst') this.socket.resetAndDestroy();
  }

  private closeKind(cur: Current, kind: CloseKind, extra: TruthDetails = {}): void {
    if (cur.closed || cur.admin) return;
    cur.closed = true;
    this.log(cur, 'close_kind', { close_kind: kind, ...extra });
  }

  private onParseError(ev: Extract<ParseEvent, { kind: 'error' }>): void {
    const cur = this.current;
    this.busy = true;
    const res: StoredResponse = {
      status: 400,
      headers: {},
      body: { error: 'bad_request', code: ev.code },
    };
    const wire = render(res, { keepAlive: false, keepAliveTimeoutS: 0 });
    if (cur !== undefined) return this.send(cur, wire, { kind: 'normal' });
    this.dead = true;
    this.socket.end(Buffer.concat([wire.head, wire.body]));
  }

  private onPeerEnd(): void {
    // The peer half-closed. An answer in progress is abandoned; an idle socket is closed.
    if (this.stale !== undefined) {
      this.closeKind(this.stale, 'client_closed');
      this.stale = undefined;
    }
    const cur = this.current;
    if (cur !== undefined && !cur.closed) this.closeKind(cur, 'client_closed');
    this.dead = true;
    clearTimeout(this.idleTimer);
    this.socket.destroy();
  }

  private onClosed(): void {
    if (this.stale !== undefined) this.closeKind(this.stale, 'client_closed');
    const cur = this.current;
    if (cur !== undefined && !cur.closed && !this.dead) this.closeKind(cur, 'client_closed');
    this.dead = true;
    clearTimeout(this.idleTimer);
  }

  private wireOptions(cur: Current): WireOptions {
    const conn = (cur.head.headers['connection'] ?? '').toLowerCase();
    const keepAlive =
      cur.head.version === 'HTTP/1.1' ? !conn.includes('close') : conn.includes('keep-alive');
    return {
      keepAlive,
      keepAliveTimeoutS: Math.max(1, Math.floor(this.ctx.keepAliveTimeoutMs / 1000)),
      headOnly: cur.head.method.toUpperCase() === 'HEAD',
    };
  }

  private log(cur: Current, event: TruthEventKind, details: TruthDetails = {}, at?: number): void {
    if (cur.admin) return;
    this.ctx.truth.record(cur.callId, cur.request, event, details, at);
  }
}

const BAD_GATEWAY: StoredResponse = { status: 502, headers: {}, body: { error: 'bad_gateway' } };

function statusResponse(fault: Extract<Fault, { phase: 'status' }>): StoredResponse {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(fault.headers ?? {})) headers[k.toLowerCase()] = String(v);
  if (fault.retry_after !== undefined) headers['retry-after'] = String(fault.retry_after);
  if (fault.status === 401 && headers['www-authenticate'] === undefined) {
    headers['www-authenticate'] = 'Bearer realm="candor-fake", error="invalid_token"';
  }
  const body = fault.body === undefined ? { error: `status_${fault.status}` } : fault.body;
  return { status: fault.status, headers, body };
}

/** The reply a `malformed` fault with `commit: false` garbles: the request was not processed. */
function unprocessed(fault: { status?: number | undefined }): StoredResponse {
  const status = fault.status ?? 502;
  return {
    status,
    headers: {},
    body: { error: { code: 'not_processed', message: 'the request was not processed' } },
  };
}
