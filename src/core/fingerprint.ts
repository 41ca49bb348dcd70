// Request fingerprints: sha256 over a canonical form of the request without secrets and without
// volatile transport headers. Two attempts of one operation must produce the same fingerprint;
// a different account, amount, host, path or permission gives a different one.
import { hash } from 'node:crypto';
import { canonicalJson } from './canonical.js';

/** Headers that carry secrets: never part of a fingerprint (or of anything stored in clear). */
export const SECRET_HEADERS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'api-key',
  'x-auth-token',
]);

/** Headers that change between attempts of the same intent, or are set by the transport. */
export const VOLATILE_HEADERS: ReadonlySet<string> = new Set([
  'date',
  'user-agent',
  'content-length',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'host',
  'traceparent',
  'tracestate',
  'x-request-id',
  'x-candor-call-id',
  'x-candor-attempt-id',
]);

export interface FingerprintInput {
  /** HTTP method or `SSH`. */
  method: string;
  /** Destination reference (e.g. `vault:identity-prod`, `ssh:web-1`), never a credential. */
  authority_ref: string;
  /** Path with query; for SSH the command. */
  target: string;
  headers?: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** Parsed JSON body, or raw bytes/text. */
  body?: unknown;
}

export function sha256Hex(data: string | Uint8Array): string {
  // One-shot: no Hash object per digest (a string is hashed as UTF-8, as `update` does).
  return hash('sha256', data, 'hex');
}

export function requestFingerprint(input: FingerprintInput): string {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    const key = name.toLowerCase();
    if (value === undefined || SECRET_HEADERS.has(key) || VOLATILE_HEADERS.has(key)) continue;
    headers[key] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  const body =
    input.body === undefined
      ? null
      : input.body instanceof Uint8Array
        ? { bytes_sha256: sha256Hex(input.body) }
        : typeof input.body === 'string'
          ? { text_sha256: sha256Hex(input.body) }
          : { json: input.body };
  const canonical = canonicalJson({
    v: 1,
    method: input.method.toUpperCase(),
    authority_ref: input.authority_ref,
    target: canonicalTarget(input.target),
    headers,
    body,
  });
  return `sha256:${sha256Hex(canonical)}`;
}

/** Sorts query parameters so that `?b=2&a=1` and `?a=1&b=2` fingerprint alike. */
function canonicalTarget(target: string): string {
  const q = target.indexOf('?');
  if (q < 0) return target;
  const params = target
    .slice(q + 1)
    .split('&')
    .filter((p) => p.length > 0)
    .sort();
  return params.length ? `${target.slice(0, q)}?${params.join('&')}` : target.slice(0, q);
}

/**
 * The idempotency key of an operation: derived from the operation id only, so every attempt of the
 * operation (including after a restart) sends the same key, and no attempt id ever leaks into it.
 */
export function idempotencyKeyFor(operationId: string): string {
  return `candor-${hash('sha256', `candor-idempotency-v1\0${operationId}`, 'base64url').slice(0, 32)}`;
}
