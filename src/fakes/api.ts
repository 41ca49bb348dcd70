// The reference API, served for every kind in RESOURCE_KINDS through the same routes:
//   POST   /v1/:kind                 create (201, Location)
//   GET    /v1/:kind[?client_ref=&correlation_id=&state=]   list / lookup  -> { items: [...] }
//   GET    /v1/:kind/:id             read
//   PUT    /v1/:kind/:id             replace mutable fields (set-state)
//   PATCH  /v1/:kind/:id             merge fields (set-state); `expected_state` mismatch -> 409
//   DELETE /v1/:kind/:id             delete (200 with the deleted resource; later reads 404)
//   POST   /v1/:kind/:id/:child      append a child (e.g. notes on records)
//   GET    /v1/:kind/:id/:child      list children
// Order of checks: route, token (401/403), idempotency key (400/422/409/replay), body, effect.
// Commits happen synchronously inside `handle`; the caller logs them as ground truth at once.
import type { Access, TokenBook } from './auth.js';
import type { IdempotencyStore, KeyTicket, StoredResponse } from './idempotency.js';
import type { IdempotencyMode, Json, Resource, ResourceStore } from './resources.js';
import type { TruthDetails, TruthEventKind } from './truth.js';

export interface ApiRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: Readonly<Record<string, string>>;
  body: Buffer;
  correlationId: string | null;
  request: number;
}

export interface Mutation {
  resource_kind: string;
  resource_id: string;
  mutation: 'create' | 'update' | 'delete' | 'append';
}

export interface ApiOutcome {
  response: StoredResponse;
  mutations: Mutation[];
  replayed: boolean;
  /** Idempotency key to settle with the final response once processing has finished. */
  ticket?: KeyTicket;
  /** Further ground truth of a handler (the proxy: forwarded, upstream_answered). */
  truth?: Array<{ event: TruthEventKind; details: TruthDetails }>;
}

export interface ApiContext {
  resources: ResourceStore;
  tokens: TokenBook;
  keys: IdempotencyStore;
  /** Mode for a route key (`deployments`, `records/notes`); defaults come from the kind table. */
  modeFor(routeKey: string): IdempotencyMode;
}

const LOOKUP_FILTERS = ['client_ref', 'correlation_id', 'state'] as const;

export function handle(ctx: ApiContext, req: ApiRequest): ApiOutcome {
  const segs = req.path.split('/').filter((s) => s !== '');
  if (segs[0] !== 'v1' || segs.length < 2 || segs.length > 4)
    return plain(404, { error: 'not_found' });
  const [, kind = '', id, child] = segs;
  const spec = ctx.resources.spec(kind);
  if (spec === undefined) return plain(404, { error: 'not_found' });
  if (child !== undefined && spec.children?.[child] === undefined)
    return plain(404, { error: 'not_found' });

  const method = req.method.toUpperCase();
  const allowed =
    id === undefined || child !== undefined ? ['GET', 'POST'] : ['GET', 'PUT', 'PATCH', 'DELETE'];
  if (!allowed.includes(method)) {
    return {
      response: {
        status: 405,
        headers: { allow: allowed.join(', ') },
        body: { error: 'method_not_allowed' },
      },
      mutations: [],
      replayed: false,
    };
  }
  const access: Access = method === 'GET' ? 'read' : 'write';
  const auth = ctx.tokens.check(req.headers['authorization'], kind, access);
  if (!auth.ok)
    return {
      response: { status: auth.status, headers: auth.headers, body: auth.body },
      mutations: [],
      replayed: false,
    };

  if (access === 'read') return read(ctx, req, kind, id, child);

  const routeKey = child === undefined ? kind : `${kind}/${child}`;
  const mode = ctx.modeFor(routeKey);
  const key = req.headers['idempotency-key'];
  let ticket: KeyTicket | undefined;
  if (mode !== 'ignored') {
    if (key === undefined || key === '') {
      if (mode === 'required') return plain(400, { error: 'idempotency_key_missing' });
    } else {
      const check = ctx.keys.check(`${method} ${req.path}`, key, req.body);
      if (check.kind === 'payload_mismatch') return plain(422, { error: 'idempotency_key_reused' });
      if (check.kind === 'in_progress') return plain(409, { error: 'idempotency_key_in_progress' });
      if (check.kind === 'replay') {
        const headers = { ...check.response.headers, 'idempotent-replayed': 'true' };
        return { response: { ...check.response, headers }, mutations: [], replayed: true };
      }
      ticket = check.ticket;
    }
  }
  const outcome = write(ctx, req, method, kind, id, child);
  return ticket === undefined ? outcome : { ...outcome, ticket };
}

function read(
  ctx: ApiContext,
  req: ApiRequest,
  kind: string,
  id?: string,
  child?: string,
): ApiOutcome {
  if (id === undefined) {
    const filter: Record<string, string> = {};
    for (const name of LOOKUP_FILTERS) {
      const v = req.query.get(name);
      if (v !== null) filter[name] = v;
    }
    return plain(200, { items: ctx.resources.list(kind, filter) });
  }
  if (child !== undefined) {
    const items = ctx.resources.children(kind, id, child);
    return items === undefined ? plain(404, { error: 'not_found' }) : plain(200, { items });
  }
  const r = ctx.resources.get(kind, id);
  return r === undefined ? plain(404, { error: 'not_found' }) : plain(200, r);
}

function write(
  ctx: ApiContext,
  req: ApiRequest,
  method: string,
  kind: string,
  id?: string,
  child?: string,
): ApiOutcome {
  let fields: Record<string, Json> = {};
  if (method !== 'DELETE' || req.body.length > 0) {
    const parsed = parseObject(req.body);
    if (parsed === undefined) return plain(400, { error: 'invalid_json_body' });
    fields = parsed;
  }
  const store = ctx.resources;
  if (id === undefined) {
    const missing =
      store.spec(kind)?.required.filter((f) => fields[f] === undefined || fields[f] === null) ?? [];
    if (missing.length > 0) return plain(422, { error: 'validation_failed', missing });
    const r = store.create(kind, fields, {
      correlation_id: req.correlationId,
      request: req.request,
    });
    return committed(
      201,
      r,
      { resource_kind: kind, resource_id: r.id, mutation: 'create' },
      `/v1/${kind}/${r.id}`,
    );
  }
  if (child !== undefined) {
    const childSpec = store.spec(kind)?.children?.[child];
    const missing =
      childSpec?.required.filter((f) => fields[f] === undefined || fields[f] === null) ?? [];
    if (missing.length > 0) return plain(422, { error: 'validation_failed', missing });
    const c = store.appendChild(kind, id, child, fields);
    if (c === undefined) return plain(404, { error: 'not_found' });
    return committed(201, c, {
      resource_kind: `${kind}/${child}`,
      resource_id: c.id,
      mutation: 'append',
    });
  }
  const current = store.get(kind, id);
  if (current === undefined) return plain(404, { error: 'not_found' });
  if (method === 'DELETE') {
    const r = store.remove(kind, id);
    return r === undefined
      ? plain(404, { error: 'not_found' })
      : committed(200, r, { resource_kind: kind, resource_id: id, mutation: 'delete' });
  }
  const expected = fields['expected_state'];
  if (expected !== undefined) {
    if (expected !== current.state)
      return plain(409, { error: 'state_conflict', state: current.state });
    delete fields['expected_state'];
  }
  const r = store.update(kind, id, fields, method === 'PUT');
  return r === undefined
    ? plain(404, { error: 'not_found' })
    : committed(200, r, { resource_kind: kind, resource_id: id, mutation: 'update' });
}

function committed(
  status: number,
  body: Resource,
  mutation: Mutation,
  location?: string,
): ApiOutcome {
  const headers: Record<string, string> = location === undefined ? {} : { location };
  return { response: { status, headers, body }, mutations: [mutation], replayed: false };
}

function plain(status: number, body: unknown): ApiOutcome {
  return { response: { status, headers: {}, body }, mutations: [], replayed: false };
}

function parseObject(body: Buffer): Record<string, Json> | undefined {
  if (body.length === 0) return {};
  try {
    const v: unknown = JSON.parse(body.toString('utf8'));
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, Json>)
      : undefined;
  } catch {
    return undefined;
  }
}
