// The HTTP transport: one attempt = one request on undici, with per-phase timeouts and phase
// evidence from diagnostics channels. It returns what happened; it never classifies and never
// retries. Which connection a request may use is the pool's rule (pool.ts): a write without an
// honoured idempotency key never meets a keep-alive socket the server may be closing.
import type { LookupFunction } from 'node:net';
import { request as undiciRequest } from 'undici';
import { HttpErrorCode, reportedCode, type ReportedCode } from '../core/error-code.js';
import type { LocalError, Phase } from '../core/evidence.js';
import { merged } from '../core/merge.js';
import type { HttpTimeouts } from '../core/transport.js';
import { ATTEMPT_HEADER, trackAttempt } from './channels.js';
import { createHttpPool, type HttpPool } from './pool.js';

export type { HttpTimeouts };

/** Body bytes kept for checks by default (bytes beyond are drained, or cut with `overLimit`). */
export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

/** The `error_code` of an answer cut off at its size limit (`overLimit: 'cut'`). */
export const BODY_OVER_LIMIT = HttpErrorCode.body_over_limit;

export const DEFAULT_TIMEOUTS: HttpTimeouts = {
  connect_ms: 5_000,
  write_ms: 10_000,
  first_byte_ms: 30_000,
  body_idle_ms: 30_000,
  total_ms: 60_000,
};

export interface HttpRequest {
  /** `http://host:port` */
  origin: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  attemptId: string;
  timeouts: HttpTimeouts;
  signal?: AbortSignal;
  /**
   * True: any pooled keep-alive connection will do (reads, lookups, writes under an honoured
   * idempotency key). False: only one that answered moments ago, well within the server's
   * announced keep-alive time, else a fresh connection (other writes).
   */
  reuseConnection: boolean;
  /** The runtime's connections; without one the request gets its own connection, closed after. */
  pool?: HttpPool;
  /** Cap on the response body kept for checks (default 4 MiB). */
  maxBodyBytes?: number;
  /**
   * What happens to body bytes beyond `maxBodyBytes`: `drain` (default: read and dropped, so the
   * exchange completes) or `cut` (reading stops there and the connection is closed: the outcome is
   * flagged `over_limit`). Lookups cut: a hostile answer costs at most the cap, not its length.
   */
  overLimit?: 'drain' | 'cut';
  /** Host name resolution (tests pass one that answers `.invalid` locally, without a DNS query). */
  lookup?: LookupFunction;
}

export interface HttpOutcome {
  phase: Phase;
  local_error?: LocalError;
  error_code?: HttpErrorCode;
  /** The response could not be parsed as HTTP (bad status line, bad framing before the body). */
  misframed?: boolean;
  status?: number;
  headers?: Record<string, string>;
  body?: Buffer;
  /** How the response body was delimited; `close` means only the connection's end framed it. */
  framing?: 'length' | 'chunked' | 'close' | 'none';
  /** With `overLimit: 'cut'`: the body went past `maxBodyBytes` and was cut off there. */
  over_limit?: boolean;
  phases: {
    started_at: number;
    request_sent_at?: number;
    headers_at?: number;
    finished_at: number;
  };
}

/**
 * The URL of `path` on `origin`, or null when it would not stay there. The path is appended, never
 * resolved against the origin: resolution reads `//host/x` (and `http://host/x`) as another host.
 */
export function urlOnOrigin(origin: string, path: string): URL | null {
  if (!path.startsWith('/') || path.startsWith('//') || path.includes('\\')) return null;
  try {
    const base = new URL(origin);
    const url = new URL(`${base.origin}${path}`);
    return url.origin === base.origin ? url : null;
  } catch {
    return null;
  }
}

type AbortCause = 'deadline' | 'write_timeout' | 'cancelled';

export async function sendHttp(
  req: HttpRequest,
  clock: () => number = Date.now,
): Promise<HttpOutcome> {
  const started_at = clock();
  const url = urlOnOrigin(req.origin, req.path);
  if (url === null) {
    // Refused before any connection: the request would leave its destination's origin.
    return {
      phase: 'not_sent',
      local_error: 'other',
      error_code: HttpErrorCode.path_leaves_origin,
      phases: { started_at, finished_at: clock() },
    };
  }
  const { tracker, release } = trackAttempt(req.attemptId);
  const controller = new AbortController();
  let cause: AbortCause | undefined;
  const abort = (why: AbortCause): void => {
    if (cause === undefined) cause = why;
    controller.abort(new Error(why));
  };
  const onExternalAbort = (): void => abort('cancelled');
  if (req.signal?.aborted) abort('cancelled');
  req.signal?.addEventListener('abort', onExternalAbort, { once: true });
  // One timer for both deadlines (the whole exchange, and the request write once it begins): it
  // first fires when the earliest write deadline could pass, and there finds what has expired or
  // sleeps on until the next deadline. An exchange that ends in time never re-arms it.
  const { total_ms, write_ms } = req.timeouts;
  const t0 = performance.now();
  let writeDeadline: number | undefined;
  const onTimer = (): void => {
    const t = performance.now();
    // Timers count whole milliseconds: within 1 ms of a deadline is past it.
    if (writeDeadline !== undefined && t >= writeDeadline - 1) return abort('write_timeout');
    if (t >= t0 + total_ms - 1) return abort('deadline');
    const next = Math.min(t0 + total_ms, writeDeadline ?? t + write_ms);
    timer = setTimeout(onTimer, Math.max(1, next - t));
  };
  let timer = setTimeout(onTimer, Math.min(total_ms, write_ms));
  let request_sent_at: number | undefined;
  tracker.on = (phase) => {
    if (phase === 'send_headers') {
      request_sent_at = clock();
      writeDeadline = performance.now() + write_ms;
    } else if (phase === 'body_sent' || phase === 'headers') {
      writeDeadline = undefined;
    }
  };

  const lease = (req.pool ?? createHttpPool({ maxIdle: 0 })).acquire(
    req.origin,
    req.timeouts,
    req.lookup,
    req.reuseConnection ? 'any' : 'recent',
  );

  let status: number | undefined;
  let headers: Record<string, string> | undefined;
  let headers_at: number | undefined;
  const chunks: Buffer[] = [];
  let kept = 0;
  let overLimit = false;
  let seen = 0;
  const max = req.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const cut = req.overLimit === 'cut';
  try {
    const res = await undiciRequest(url, {
      dispatcher: lease.client,
      method: req.method,
      headers: merged(req.headers, { [ATTEMPT_HEADER]: req.attemptId }),
      body: req.body ?? null,
      signal: controller.signal,
    });
    status = res.statusCode;
    headers_at = clock();
    headers = flattenHeaders(res.headers);
    // Read by events, not an async iterator (its promise per chunk costs more than the read).
    await new Promise<void>((resolve, reject) => {
      const body = res.body;
      body.on('data', (buf: Buffer) => {
        seen += buf.length;
        if (kept < max) {
          chunks.push(buf.subarray(0, max - kept));
          kept += Math.min(buf.length, max - kept);
        }
        if (cut && seen > max && !overLimit) {
          // Past the cap: stop reading at once; the connection is not reused (discarded below).
          overLimit = true;
          body.removeAllListeners('close');
          body.destroy();
          resolve();
        }
      });
      body.once('end', resolve);
      body.once('error', reject);
      // Closed without an end or an error: what an iterator reports as a premature close.
      body.once('close', () => {
        if (!body.readableEnded) reject(prematureClose());
      });
    });
    if (overLimit) {
      // Cut off by us: the status and head are the destination's, the body is its first `max`
      // bytes; the connection is discarded, never reused mid-body.
      return {
        phase: 'response_cut',
        local_error: 'other',
        error_code: BODY_OVER_LIMIT,
        over_limit: true,
        status,
        headers,
        body: Buffer.concat(chunks),
        phases: {
          started_at,
          request_sent_at: request_sent_at ?? started_at,
          headers_at,
          finished_at: clock(),
        },
      };
    }
    // A complete exchange: the connection may serve another request.
    lease.release(headers);
    return {
      phase: 'response_complete',
      status,
      headers,
      body: Buffer.concat(chunks),
      framing: framingOf(headers, req.method, status),
      phases: {
        started_at,
        request_sent_at: request_sent_at ?? started_at,
        headers_at,
        finished_at: clock(),
      },
    };
  } catch (error) {
    const code = errorCode(error);
    const sent = tracker.send_headers_at !== undefined;
    const gotHeaders = status !== undefined || tracker.headers_at !== undefined;
    // Response bytes arrived on the socket but no response head could be parsed from them: the
    // destination answered, misframed (undici's parser errors do not always carry a code).
    const bytesAfterSend = tracker.socket
      ? tracker.socket.bytesRead - (tracker.bytes_read_before ?? 0)
      : 0;
    const misframed =
      !gotHeaders && sent && (code?.startsWith('HPE_') === true || bytesAfterSend > 0);
    const phase: Phase =
      gotHeaders || misframed ? 'response_cut' : sent ? 'request_sent' : 'not_sent';
    const outcome: HttpOutcome = {
      phase,
      local_error:
        misframed && code === undefined ? 'parse_error' : localErrorOf(code, cause, sent),
      phases: {
        started_at,
        ...(request_sent_at !== undefined ? { request_sent_at } : {}),
        ...(headers_at !== undefined ? { headers_at } : {}),
        finished_at: clock(),
      },
    };
    if (code !== undefined) outcome.error_code = code;
    if (misframed) outcome.misframed = true;
    const st = status ?? tracker.status;
    if (st !== undefined) outcome.status = st;
    if (headers) outcome.headers = headers;
    if (chunks.length) outcome.body = Buffer.concat(chunks);
    return outcome;
  } finally {
    clearTimeout(timer);
    req.signal?.removeEventListener('abort', onExternalAbort);
    release();
    await lease.discard();
  }
}

/** The error a stream iterator gives for a body closed before its end (same code). */
function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

/** The code undici or Node gave the error (or its cause), recorded as reported. */
function errorCode(error: unknown): ReportedCode | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return reportedCode(code);
  const inner = (error as { cause?: unknown }).cause;
  return inner === undefined ? undefined : errorCode(inner);
}

/** Error codes to local reasons: a table of codes, never message text. */
const CODE_TABLE: Readonly<Record<string, LocalError>> = {
  ENOTFOUND: 'dns',
  EAI_AGAIN: 'dns',
  EAI_FAIL: 'dns',
  ECONNREFUSED: 'connect_refused',
  EHOSTUNREACH: 'connect_refused',
  ENETUNREACH: 'connect_refused',
  UND_ERR_CONNECT_TIMEOUT: 'connect_timeout',
  ETIMEDOUT: 'connect_timeout',
  ECONNRESET: 'connection_reset',
  EPIPE: 'connection_reset',
  UND_ERR_SOCKET: 'connection_closed',
  UND_ERR_CLOSED: 'connection_closed',
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: 'connection_closed',
  UND_ERR_HEADERS_TIMEOUT: 'deadline',
  UND_ERR_BODY_TIMEOUT: 'deadline',
  UND_ERR_HEADERS_OVERFLOW: 'parse_error',
  UND_ERR_INFO: 'parse_error',
};

function localErrorOf(
  code: string | undefined,
  cause: AbortCause | undefined,
  sent: boolean,
): LocalError {
  if (cause === 'deadline' || cause === 'write_timeout') return 'deadline';
  if (cause === 'cancelled') return 'cancelled';
  if (code === undefined) return sent ? 'execution_error' : 'other';
  if (code.startsWith('HPE_')) return 'parse_error';
  if (
    code.startsWith('ERR_TLS') ||
    code.startsWith('CERT_') ||
    code.includes('SELF_SIGNED') ||
    code.startsWith('UNABLE_TO_')
  ) {
    return 'tls';
  }
  return CODE_TABLE[code] ?? 'other';
}

function flattenHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

function framingOf(
  h: Record<string, string>,
  method: string,
  status: number,
): 'length' | 'chunked' | 'close' | 'none' {
  if (method.toUpperCase() === 'HEAD' || status === 204 || status === 304) return 'none';
  if ((h['transfer-encoding'] ?? '').toLowerCase().includes('chunked')) return 'chunked';
  if (h['content-length'] !== undefined) return 'length';
  return 'close';
}
