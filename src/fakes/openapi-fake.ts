// The fake service emulating an OpenAPI document (`candor fake serve --openapi SPEC`): the same raw
// sockets, faults and ground truth as the reference fake (connection.ts, faults.ts, truth.ts), with
// stateful collections derived from the paths instead of the reference API. A POST on a collection
// creates (keeping an id the caller chose: a body `id`, or the field the item path is keyed by),
// GET lists (query parameters filter on equal fields) or reads one record, PUT replaces, PATCH
// merges, DELETE removes; a POST under a record appends to a child collection. A PUT, PATCH or
// DELETE on a path that ends in a fixed word (`/pulls/1/merge`, `/gists/g1/star`) sets or clears
// a setting stored at that path, so every documented method answers as documented. Bodies are
// the request's fields over a sample of the documented success schema (openapi-sampler), so they
// satisfy the document; statuses are the documented ones. Credentials are not checked (the
// matrix's 401/403 rows arm `status` faults). Idempotency keys are honoured or ignored per
// operation as configured (default: honoured where the document declares the header).
import OpenAPISampler from 'openapi-sampler';
import type { ApiContext, ApiOutcome, ApiRequest, Mutation } from './api.js';
import type { RequestHandler } from './connection.js';
import type { KeyTicket } from './idempotency.js';
import { objectShapeOf, type ApiModel, type ApiOperation, type JsonSchema } from './openapi-doc.js';
import { startFakeService, type FakeService, type FakeServiceOptions } from './service.js';

export type OpenApiIdempotency = 'honoured' | 'ignored';
type Rec = Record<string, unknown>;

export interface OpenApiFakeOptions extends Omit<FakeServiceOptions, 'handler' | 'kinds'> {
  /** Idempotency handling for every operation that declares a key (default honoured). */
  idempotency_mode?: OpenApiIdempotency;
}

export interface OpenApiStore {
  /** Live records of a collection (`/pet`), in creation order. */
  list(collection: string): Rec[];
  /** Every record ever created there, deleted ones marked `deleted: true`. */
  all(collection: string): Rec[];
  reset(): void;
}

export interface OpenApiFake extends FakeService {
  readonly model: ApiModel;
  readonly store: OpenApiStore;
  setOpenApiIdempotency(mode: OpenApiIdempotency): void;
}

interface Route {
  op: ApiOperation;
  re: RegExp;
}

export async function startOpenApiFake(
  model: ApiModel,
  options: OpenApiFakeOptions = {},
): Promise<OpenApiFake> {
  // Each operation under its own server's path prefix (a per-operation server may have another).
  const routes: Route[] = model.operations.map((op) => ({
    op,
    re: new RegExp(
      `^${escape(op.server.prefix)}${escape(op.path).replace(/\\\{[^}]+\\\}/g, '([^/]+)')}$`,
    ),
  }));
  // Literal paths win over templated ones (`/pet/findByStatus` over `/pet/{petId}`).
  routes.sort(
    (a, b) => (a.op.path.match(/\{/g)?.length ?? 0) - (b.op.path.match(/\{/g)?.length ?? 0),
  );
  const data = new Map<string, Rec[]>();
  /** Settings stored at a concrete path (`/gists/g1/star`): what a PUT there set. */
  const settings = new Map<string, Rec>();
  /**
   * The field a collection's records are found by: the item route's parameter when the records
   * carry a field of that name (`/variables/{name}` → name), else `id`.
   */
  const keyFields = new Map<string, string>();
  for (const op of model.operations) {
    if (!op.on_item || keyFields.has(op.collection)) continue;
    const param = op.path_params.at(-1)?.name;
    const creator = model.operations.find(
      (o) => o.method === 'POST' && !o.on_item && o.path === op.collection,
    );
    const fields = {
      ...objectShapeOf(op.success.schema).props,
      ...objectShapeOf(creator?.body).props,
    };
    keyFields.set(
      op.collection,
      param !== undefined &&
        param !== 'id' &&
        Object.hasOwn(fields, param) &&
        !Object.hasOwn(fields, 'id')
        ? param
        : 'id',
    );
  }
  const counters = new Map<string, number>();
  let mode: OpenApiIdempotency = options.idempotency_mode ?? 'honoured';
  const store: OpenApiStore = {
    list: (c) =>
      (data.get(c) ?? []).filter((r) => r.deleted !== true).map((r) => structuredClone(r)),
    all: (c) => (data.get(c) ?? []).map((r) => structuredClone(r)),
    reset: () => {
      data.clear();
      settings.clear();
      counters.clear();
    },
  };
  const handler =
    (api: ApiContext): RequestHandler =>
    (req) => {
      const method = req.method.toUpperCase();
      let route: Route | undefined;
      let params: string[] = [];
      for (const r of routes) {
        const m = r.re.exec(req.path);
        if (m && r.op.method === method) {
          route = r;
          params = m.slice(1).map(decodeURIComponent);
          break;
        }
      }
      if (!route) {
        const known = routes.some((r) => r.re.test(req.path));
        return plain(known ? 405 : 404, { error: known ? 'method_not_allowed' : 'not_found' });
      }
      const op = route.op;
      let ticket: KeyTicket | undefined;
      if (op.idempotency_header && mode === 'honoured' && method !== 'GET') {
        const key = req.headers[op.idempotency_header.toLowerCase()];
        if (key !== undefined && key !== '') {
          const check = api.keys.check(`${method} ${req.path}`, key, req.body);
          if (check.kind === 'payload_mismatch')
            return plain(422, { error: 'idempotency_key_reused' });
          if (check.kind === 'in_progress')
            return plain(409, { error: 'idempotency_key_in_progress' });
          if (check.kind === 'replay')
            return {
              response: {
                ...check.response,
                headers: { ...check.response.headers, 'idempotent-replayed': 'true' },
              },
              mutations: [],
              replayed: true,
            };
          ticket = check.ticket;
        }
      }
      const out = perform(op, req, params, method);
      return ticket === undefined ? out : { ...out, ticket };
    };

  function perform(
    op: ApiOperation,
    req: ApiRequest,
    params: string[],
    method: string,
  ): ApiOutcome {
    const collection = op.on_item ? op.collection : op.path;
    const itemId = op.on_item ? params.at(-1) : undefined;
    // A child collection is keyed by its parent record: `/pet/{petId}/photos` under pet 3.
    const key =
      params.length > (op.on_item ? 1 : 0)
        ? `${collection}#${params.slice(0, op.on_item ? -1 : undefined).join('/')}`
        : collection;
    let body: Rec = {};
    if (req.body.length > 0) {
      try {
        const parsed: unknown = JSON.parse(req.body.toString('utf8'));
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
          return plain(400, { error: 'invalid_json_body' });
        body = parsed as Rec;
      } catch {
        return plain(400, { error: 'invalid_json_body' });
      }
    }
    const missing = objectShapeOf(op.body).required.filter((f) => body[f] === undefined);
    if ((method === 'POST' || method === 'PUT') && op.body !== undefined && missing.length > 0)
      return plain(op.statuses.includes(400) ? 400 : 422, { error: 'validation_failed', missing });
    const list = data.get(key) ?? [];
    const keyField = keyFields.get(collection) ?? 'id';
    const find = (id: string): Rec | undefined =>
      list.find((r) => String(r[keyField]) === id && r.deleted !== true);
    // A PUT, PATCH or DELETE on a path that does not end in a record id (`/pulls/1/merge`) is a
    // setting; a GET reads it once one was set or cleared (before that, a sample as documented).
    const setting =
      !op.on_item && method !== 'POST' && (method !== 'GET' || settings.has(req.path));
    if (setting) return settingAt(op, req.path, method, body);
    const mutation = (kind: Mutation['mutation'], id: unknown): Mutation => ({
      resource_kind: collection,
      resource_id: String(id),
      mutation: kind,
    });
    if (method === 'GET') {
      if (itemId !== undefined) {
        const r = find(itemId);
        return r ? reply(op, r) : plain(404, { error: 'not_found' });
      }
      if (!data.has(key) && !isListing(op)) return reply(op, sample(op.success.schema));
      const filters = [...req.query.entries()].filter(([k]) =>
        op.query_params.some((q) => q.name === k),
      );
      const items = list
        .filter((r) => r.deleted !== true)
        .filter((r) => filters.every(([k, v]) => scalar(filterValue(r, k)) === v));
      return reply(op, listBody(op.success.schema, items));
    }
    if (method === 'POST' && itemId === undefined) {
      // An id the caller chose is kept (and a second record with it refused, as a service would).
      const chosen = scalar(body[keyField]);
      if (chosen !== undefined && find(chosen))
        return plain(op.statuses.includes(409) ? 409 : 422, {
          error: 'already_exists',
          [keyField]: chosen,
        });
      const id = chosen !== undefined ? body[keyField] : mint(key, op);
      const record: Rec = { ...objectSample(op.success.schema), ...body, [keyField]: id };
      if (keyField !== 'id' && record.id === undefined) record.id = id;
      list.push(record);
      data.set(key, list);
      return { ...reply(op, record), mutations: [mutation('create', record[keyField])] };
    }
    if (itemId === undefined) return plain(405, { error: 'method_not_allowed' });
    const r = find(itemId);
    if (!r) return plain(404, { error: 'not_found' });
    if (method === 'DELETE') {
      r.deleted = true;
      const answer = op.success.schema ? sample(op.success.schema) : undefined;
      return { ...reply(op, answer), mutations: [mutation('delete', r.id)] };
    }
    if (method === 'PUT')
      for (const k of Object.keys(r)) if (k !== 'id' && k !== keyField) delete r[k];
    Object.assign(r, body, { id: r.id, [keyField]: r[keyField] });
    return { ...reply(op, r), mutations: [mutation('update', r.id)] };
  }

  /** PUT sets, PATCH merges into, DELETE clears the setting at this path; GET reads it. */
  function settingAt(op: ApiOperation, path: string, method: string, body: Rec): ApiOutcome {
    const current = settings.get(path);
    const mutation = (kind: Mutation['mutation']): Mutation => ({
      resource_kind: op.path,
      resource_id: path,
      mutation: kind,
    });
    if (method === 'GET') {
      if (current !== undefined && current !== CLEARED) return reply(op, current);
      return op.statuses.includes(404)
        ? plain(404, { error: 'not_found' })
        : reply(op, sample(op.success.schema));
    }
    if (method === 'DELETE') {
      settings.set(path, CLEARED);
      const answer = op.success.schema ? sample(op.success.schema) : undefined;
      return { ...reply(op, answer), mutations: [mutation('delete')] };
    }
    const next: Rec = { ...(method === 'PATCH' && current !== CLEARED ? current : {}), ...body };
    settings.set(path, next);
    const answer = op.success.schema ? { ...objectSample(op.success.schema), ...next } : undefined;
    return { ...reply(op, answer), mutations: [mutation('update')] };
  }

  function mint(key: string, op: ApiOperation): unknown {
    const n = (counters.get(key) ?? 0) + 1;
    counters.set(key, n);
    const idSchema = objectShapeOf(op.success.schema).props.id as JsonSchema | undefined;
    return idSchema?.type === 'integer' || idSchema?.type === 'number'
      ? n
      : `${slug(key)}_${String(n).padStart(4, '0')}`;
  }

  const service = await startFakeService({ ...options, handler });
  return {
    ...service,
    model,
    store,
    setOpenApiIdempotency: (m) => {
      mode = m;
    },
    reset: () => {
      service.reset();
      store.reset();
    },
  };
}

const isObj = (v: unknown): v is Rec => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A GET whose success body is (or holds) an array lists the collection. */
function isListing(op: ApiOperation): boolean {
  const s = op.success.schema;
  if (!isObj(s)) return false;
  return (
    s.type === 'array' ||
    Object.values(objectShapeOf(s).props).some((p) => isObj(p) && p.type === 'array')
  );
}

function listBody(schema: JsonSchema | undefined, items: Rec[]): unknown {
  if (!isObj(schema) || schema.type === 'array') return items;
  const prop = Object.entries(objectShapeOf(schema).props).find(
    ([, p]) => isObj(p) && p.type === 'array',
  );
  return prop ? { ...objectSample(schema), [prop[0]]: items } : items;
}

function sample(schema: JsonSchema | undefined): unknown {
  if (!schema) return undefined;
  try {
    return OpenAPISampler.sample(schema, { skipReadOnly: false, quiet: true });
  } catch {
    return {};
  }
}

/** Creation-time fields a service stamps with its own clock (a sample's fixed date would not). */
const STAMPED = ['created_at', 'createdAt', 'created', 'creation_time', 'inserted_at'];

function objectSample(schema: JsonSchema | undefined): Rec {
  const s = sample(schema);
  if (!isObj(s)) return {};
  for (const f of STAMPED) if (typeof s[f] === 'string') s[f] = new Date().toISOString();
  return s;
}

function reply(op: ApiOperation, body: unknown): ApiOutcome {
  const status = op.success.status;
  const noBody = status === 204 || (body === undefined && op.success.schema === undefined);
  return {
    response: {
      status: noBody ? 204 : status,
      headers: {},
      body: noBody ? undefined : (body ?? {}),
    },
    mutations: [],
    replayed: false,
  };
}

/**
 * The record value a list filter compares: `x`, `x_eq`, `x__eq`, `x[eq]`, `filter[x]` and
 * `filter.x` name field x; `metadata[x]` names x inside the record's metadata.
 */
function filterValue(record: Rec, query: string): unknown {
  if (Object.hasOwn(record, query)) return record[query];
  const meta = /^metadata\[([^\]]+)\]$/.exec(query);
  if (meta) return isObj(record.metadata) ? record.metadata[meta[1]!] : undefined;
  const field =
    /^filter\[([^\]]+)\]$/.exec(query)?.[1] ??
    /^filter\.(.+)$/.exec(query)?.[1] ??
    /^(.+?)(?:__eq|_eq|\[eq\])$/.exec(query)?.[1];
  return field !== undefined ? record[field] : undefined;
}

/** What a DELETE leaves at a setting's path: GET then answers as for one never set (404). */
const CLEARED: Rec = Object.freeze({});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function plain(status: number, body: unknown): ApiOutcome {
  return { response: { status, headers: {}, body }, mutations: [], replayed: false };
}

function scalar(v: unknown): string | undefined {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean'
    ? String(v)
    : undefined;
}

function slug(s: string): string {
  return (
    s
      .replace(/[^A-Za-z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '')
      .toLowerCase() || 'rec'
  );
}
