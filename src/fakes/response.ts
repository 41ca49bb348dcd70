// Response bytes: correct HTTP/1.1 framing for normal replies, and the deliberately broken forms
// of the `malformed` fault. Each malformed variant is really malformed on the wire or in content,
// so a client library sees exactly what it would see from a misbehaving server.
import type { StoredResponse } from './idempotency.js';
import type { MalformedVariant } from './faults.js';

const REASONS: Readonly<Record<number, string>> = {
  200: 'OK',
  201: 'Created',
  204: 'No Content',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

export interface WireOptions {
  /** False: announce `Connection: close`. */
  keepAlive: boolean;
  /** Seconds announced in `Keep-Alive: timeout=`. */
  keepAliveTimeoutS: number;
  /** HEAD: the head announces the body length but no body bytes follow. */
  headOnly?: boolean;
}

export interface WireResponse {
  head: Buffer;
  body: Buffer;
  status: number;
  /** After writing: `keepalive` continues the connection, `fin` closes it. */
  after: 'keepalive' | 'fin';
}

/** Body bytes and default content type: JSON for values, bytes/strings as given. */
export function encodeBody(body: unknown): { bytes: Buffer; type: string | undefined } {
  if (body === undefined) return { bytes: Buffer.alloc(0), type: undefined };
  if (Buffer.isBuffer(body)) return { bytes: body, type: 'application/octet-stream' };
  if (typeof body === 'string')
    return { bytes: Buffer.from(body, 'utf8'), type: 'text/plain; charset=utf-8' };
  return { bytes: Buffer.from(JSON.stringify(body), 'utf8'), type: 'application/json' };
}

export function render(res: StoredResponse, opts: WireOptions): WireResponse {
  const { bytes, type } = encodeBody(res.body);
  const headers = baseHeaders(res, type, opts);
  headers.push(['content-length', String(bytes.length)]);
  return {
    head: headBytes(`HTTP/1.1 ${res.status} ${reason(res.status)}`, headers),
    body: opts.headOnly === true ? Buffer.alloc(0) : bytes,
    status: res.status,
    after: opts.keepAlive ? 'keepalive' : 'fin',
  };
}

export interface MalformedOptions {
  variant: MalformedVariant;
  status?: number | undefined;
  field?: string | undefined;
}

export function renderMalformed(
  res: StoredResponse,
  m: MalformedOptions,
  opts: WireOptions,
): WireResponse {
  switch (m.variant) {
    case 'bad_status_line': {
      const good = render(res, { ...opts, keepAlive: false });
      const head = Buffer.from(
        good.head.toString('latin1').replace(/^HTTP\/1\.1 \d{3}/, 'HTTP/1.1 2x0'),
        'latin1',
      );
      return { ...good, head };
    }
    case 'wrong_content_length': {
      // Announce more than is sent, then FIN: the client waits for bytes that never come.
      const { bytes, type } = encodeBody(res.body);
      const headers = baseHeaders(res, type, opts);
      headers.push(['content-length', String(bytes.length + 32)]);
      return {
        head: headBytes(statusLine(res.status), headers),
        body: bytes,
        status: res.status,
        after: 'fin',
      };
    }
    case 'unframed_truncation': {
      // No length and no chunking: the body runs to connection close, which comes mid-JSON.
      const { bytes, type } = encodeBody(res.body);
      const headers = baseHeaders(res, type, { ...opts, keepAlive: false });
      const cut = Math.max(1, Math.floor(bytes.length / 2));
      return {
        head: headBytes(statusLine(res.status), headers),
        body: bytes.subarray(0, cut),
        status: res.status,
        after: 'fin',
      };
    }
    case 'invalid_json': {
      const text = JSON.stringify(res.body ?? {});
      const broken = text.endsWith('}') ? `${text.slice(0, -1)},}` : `${text}}`;
      return render(
        {
          ...res,
          headers: { ...res.headers, 'content-type': 'application/json' },
          body: Buffer.from(broken),
        },
        opts,
      );
    }
    case 'html_error': {
      const status = m.status ?? 502;
      const page =
        `<!DOCTYPE html>\n<html><head><title>${status} ${reason(status)}</title></head>` +
        `<body><h1>${status} ${reason(status)}</h1><hr><p>upstream proxy</p></body></html>\n`;
      return render(
        {
          status,
          headers: { 'content-type': 'text/html; charset=utf-8' },
          body: Buffer.from(page),
        },
        opts,
      );
    }
    case 'error_body_2xx':
      return render(
        {
          status: 200,
          headers: {},
          body: { error: { code: 'internal_error', message: 'the operation failed' } },
        },
        opts,
      );
    default:
      return render({ ...res, body: violateContract(res.body, m.variant, m.field ?? 'id') }, opts);
  }
}

/** Contract violations on a JSON body: a single resource, or the first item of `{ items }`. */
export function violateContract(body: unknown, variant: MalformedVariant, field: string): unknown {
  const copy: unknown = structuredClone(body);
  if (typeof copy !== 'object' || copy === null || Array.isArray(copy)) return copy;
  const obj = copy as Record<string, unknown>;
  const items = Array.isArray(obj['items']) ? (obj['items'] as unknown[]) : undefined;
  if (variant === 'duplicated_items') {
    if (items !== undefined && items.length > 0)
      obj['items'] = [...items, structuredClone(items[0])];
    return obj;
  }
  if (variant === 'reordered_items') {
    if (items !== undefined) obj['items'] = [...items].reverse();
    return obj;
  }
  const first: unknown = items?.[0];
  const target =
    items === undefined
      ? obj
      : typeof first === 'object' && first !== null
        ? (first as Record<string, unknown>)
        : undefined;
  if (target === undefined) return obj;
  switch (variant) {
    case 'id_null':
      target['id'] = null;
      break;
    case 'id_number':
      target['id'] = 1;
      break;
    case 'id_object':
      target['id'] = { value: target['id'] ?? null };
      break;
    case 'missing_field':
      delete target[field];
      break;
    default:
      break;
  }
  return obj;
}

function baseHeaders(
  res: StoredResponse,
  type: string | undefined,
  opts: WireOptions,
): Array<[string, string]> {
  const out: Array<[string, string]> = [['server', 'candor-fake']];
  const given = Object.fromEntries(
    Object.entries(res.headers).map(([k, v]) => [k.toLowerCase(), v]),
  );
  if (type !== undefined && given['content-type'] === undefined) out.push(['content-type', type]);
  for (const [k, v] of Object.entries(given)) {
    if (
      k === 'content-length' ||
      k === 'transfer-encoding' ||
      k === 'connection' ||
      k === 'keep-alive'
    )
      continue;
    out.push([k, v]);
  }
  if (opts.keepAlive) {
    out.push(['connection', 'keep-alive']);
    // 0: the server keeps the connection but promises no idle time (see the stale-socket fault).
    if (opts.keepAliveTimeoutS > 0) out.push(['keep-alive', `timeout=${opts.keepAliveTimeoutS}`]);
  } else {
    out.push(['connection', 'close']);
  }
  return out;
}

function statusLine(status: number): string {
  return `HTTP/1.1 ${status} ${reason(status)}`;
}

function reason(status: number): string {
  return REASONS[status] ?? 'Unknown';
}

function headBytes(
  statusLineText: string,
  headers: ReadonlyArray<readonly [string, string]>,
): Buffer {
  const lines = [statusLineText, ...headers.map(([k, v]) => `${k}: ${v.replace(/[\r\n]/g, ' ')}`)];
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}
