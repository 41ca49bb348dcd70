// The HTTP adapter of the transport port (src/core/transport.ts): a prepared request goes out on
// undici (transport.ts) and comes back as evidence, the reply as received and secret-free
// diagnostics. Reading the reply against the action's contract is the engine's step, not this one.
import type { LookupFunction } from 'node:net';
import type { HttpErrorCode } from '../core/error-code.js';
import { parseRetryAfter, type Evidence } from '../core/evidence.js';
import { SECRET_HEADERS } from '../core/fingerprint.js';
import { merged } from '../core/merge.js';
import { systemClock, type Clock } from '../core/time.js';
import {
  readHttpLookup,
  type HttpPrepared,
  type Reply,
  type Transport,
} from '../core/transport.js';
import { createHttpPool } from './pool.js';
import { DEFAULT_TIMEOUTS, sendHttp, type HttpOutcome, type HttpTimeouts } from './transport.js';

export interface HttpTransportOptions {
  /** Host name resolution for every request (tests resolve `.invalid` locally). */
  lookup?: LookupFunction | undefined;
  /** Time source for phase timestamps and `Retry-After` dates. */
  clock?: Clock | undefined;
}

export function httpTransport(options: HttpTransportOptions = {}): Transport<HttpPrepared> {
  const clock = options.clock ?? systemClock;
  const now = (): number => clock.now();
  // This transport's connections: they live as long as the runtime that owns it.
  const pool = createHttpPool();
  const dispatch: Transport<HttpPrepared>['dispatch'] = async (p, { signal }) => {
    const outcome = await sendHttp(
      {
        origin: p.origin,
        method: p.method,
        path: p.path,
        headers: p.headers,
        ...(p.body !== undefined ? { body: p.body } : {}),
        attemptId: p.id,
        timeouts: p.timeouts
          ? (merged(DEFAULT_TIMEOUTS, p.timeouts) as HttpTimeouts)
          : DEFAULT_TIMEOUTS,
        ...(signal ? { signal } : {}),
        reuseConnection: p.reuse_connection,
        ...(p.max_body_bytes !== undefined
          ? { maxBodyBytes: p.max_body_bytes, overLimit: 'cut' as const }
          : {}),
        pool,
        ...(options.lookup ? { lookup: options.lookup } : {}),
      },
      now,
    );
    return {
      evidence: evidenceOf(outcome, now()),
      data: null,
      reply: replyOf(outcome),
      diagnostics: {
        status: outcome.status ?? null,
        headers: outcome.headers ? withoutSecretHeaders(outcome.headers) : null,
        framing: outcome.framing ?? null,
        error_code: outcome.error_code ?? null,
      },
      phases: {
        started_at: outcome.phases.started_at,
        ...(outcome.phases.request_sent_at !== undefined
          ? { request_sent_at: outcome.phases.request_sent_at }
          : {}),
        ...(outcome.phases.headers_at !== undefined
          ? { headers_at: outcome.phases.headers_at }
          : {}),
        finished_at: outcome.phases.finished_at,
      },
    };
  };
  return {
    kind: 'http',
    close: () => pool.close(),
    dispatch,
    // A lookup is an exchange like any other (same pool, timeouts, signal), read as an answer.
    lookup: async (p, options) => readHttpLookup(p, await dispatch(p, options)),
  };
}

function replyOf(o: HttpOutcome): Reply {
  const r: Reply = {};
  if (o.status !== undefined) r.status = o.status;
  if (o.headers !== undefined) r.headers = o.headers;
  if (o.body !== undefined) r.body = o.body;
  if (o.framing !== undefined) r.framing = o.framing;
  if (o.over_limit) r.over_limit = true;
  return r;
}

/** What an HTTP outcome proves: its phase, local error, status and the headers that carry rules. */
export function evidenceOf(o: HttpOutcome, nowMs: number): Evidence<HttpErrorCode> {
  const e: Evidence<HttpErrorCode> = { phase: o.phase };
  if (o.local_error !== undefined) e.local_error = o.local_error;
  if (o.error_code !== undefined) e.error_code = o.error_code;
  if (o.misframed) e.response_misframed = true;
  if (o.status !== undefined) e.status = o.status;
  const h = o.headers ?? {};
  if (h['www-authenticate'] !== undefined) e.www_authenticate = true;
  const ra = parseRetryAfter(h['retry-after'], nowMs);
  if (ra !== undefined) e.retry_after_ms = ra;
  const replay =
    h['idempotent-replayed'] ?? h['idempotency-replayed'] ?? h['x-idempotent-replayed'];
  if (replay !== undefined && replay.toLowerCase() === 'true') e.idempotent_replay = true;
  return e;
}

/** Response headers safe to keep as diagnostics. */
export function withoutSecretHeaders(h: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) out[k] = SECRET_HEADERS.has(k) ? '[REDACTED]' : v;
  return out;
}
