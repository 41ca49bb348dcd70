// What an attempt sends and what its answer proves: the prepared request with its fingerprint, the
// evidence read from an HTTP outcome, and response headers safe to keep as diagnostics.
import { parseRetryAfter, type Evidence } from '../core/evidence.js';
import { requestFingerprint, SECRET_HEADERS } from '../core/fingerprint.js';
import type { OperationView } from '../ledger/projection.js';
import type { HttpOutcome } from '../http/transport.js';
import type { ActionDefinition, RequestContext } from './action.js';

/** The request of the next attempt and its fingerprint (secrets and volatile headers excluded). */
export function prepare<I, O>(action: ActionDefinition<I, O>, input: I, view: OperationView) {
  const ctx: RequestContext = {
    operation_id: view.operation_id,
    correlation_id: view.correlation_id ?? view.operation_id,
    idempotency_key: view.idempotency_key,
  };
  const spec = action.request(input, ctx);
  const dest = action.destination;
  const headers: Record<string, string> = {
    accept: 'application/json',
    'x-correlation-id': ctx.correlation_id,
    'x-candor-call-id': ctx.correlation_id,
    ...(spec.headers ?? {}),
  };
  let body: string | undefined;
  if (spec.body !== undefined) {
    body = JSON.stringify(spec.body);
    headers['content-type'] ??= 'application/json';
  }
  if (dest.idempotency && view.idempotency_key)
    headers[dest.idempotency.header.toLowerCase()] = view.idempotency_key;
  const fingerprint = requestFingerprint({
    method: spec.method,
    authority_ref: dest.authority_ref,
    target: spec.path,
    headers,
    body: spec.body,
  });
  return { spec, headers, body, fingerprint };
}

export function evidenceOf(o: HttpOutcome, nowMs: number): Evidence {
  const e: Evidence = { phase: o.phase };
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

export function withoutSecretHeaders(h: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) out[k] = SECRET_HEADERS.has(k) ? '[REDACTED]' : v;
  return out;
}
