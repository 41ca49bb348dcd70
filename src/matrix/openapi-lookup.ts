// How `candor init --openapi` finds a lookup for a write: a read that can tell, after a lost reply,
// whether this operation's record exists. Two kinds, each stated with its reason in the comment:
//
// - get-by-id (`shape: one`): the caller chooses the record's id (a body field named like the
//   `{id}` of `GET /things/{id}`, or `id`) when it creates one, so reading that id finds it; `identify` binds the record found to the id this operation sent, and `created_at`
//   (when the record has one) lets the engine refuse a record older than the operation.
// - a list filter (`shape: list`): the body has a client-reference field (`client_ref`,
//   `external_id`, `idempotency_key`, `metadata[…]`, …) that Candor fills with the operation id,
//   and a list of the same collection filters by it (`x`, `x_eq`, `filter[x]`, `x[eq]`).
//
// Nothing is inferred from a filter that does not name the field, or from a server-assigned id:
// a lookup that could find someone else's record would turn "unknown" into a false "done".
import { objectShapeOf, type ApiModel, type ApiOperation } from '../fakes/openapi-doc.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Body fields that carry the caller's own reference; a list filtering by one can find a record. */
export const CLIENT_REF_FIELDS = [
  'client_ref',
  'clientRef',
  'client_reference',
  'clientReference',
  'client_reference_id',
  'external_id',
  'externalId',
  'external_ref',
  'externalRef',
  'external_reference',
  'request_id',
  'requestId',
  'idempotency_key',
  'idempotencyKey',
  'correlation_id',
  'correlationId',
] as const;

const CREATED_AT = ['created_at', 'createdAt', 'created', 'creation_time', 'inserted_at'];

export interface LookupPlan {
  kind: 'one' | 'list';
  /** The read operation the lookup calls. */
  read: ApiOperation;
  /** Path and query on the read's server, without the prefix; `{{…}}` templates. */
  path: string;
  items?: string;
  ref: string;
  identify?: Record<string, string>;
  created_at?: string;
  /** The body field set to `{{operation_id}}` (list lookups), or the field under `metadata`. */
  client_ref?: { field: string; under_metadata: boolean };
  /** The input field that carries the caller-chosen id (get-by-id). */
  id_input?: string;
  reason: string;
}

/** Query parameter names that filter a list by `field` equal to a value. */
export function filterNames(field: string): string[] {
  return [
    field,
    `${field}_eq`,
    `${field}[eq]`,
    `filter[${field}]`,
    `filter.${field}`,
    `${field}__eq`,
  ];
}

/** The record schema of a list response: the array's items (body or its first array property). */
function listItems(op: ApiOperation): { items: string; record: unknown } | null {
  const s = op.success.schema;
  if (isObj(s) && s.type === 'array') return { items: '.', record: s.items };
  const prop = Object.entries(objectShapeOf(s).props).find(
    ([, p]) => isObj(p) && p.type === 'array',
  );
  return prop ? { items: prop[0], record: (prop[1] as Obj).items } : null;
}

const fieldsOf = (schema: unknown): Obj => objectShapeOf(schema).props;

function createdAtOf(record: unknown): string | undefined {
  const props = fieldsOf(record);
  return CREATED_AT.find((f) => Object.hasOwn(props, f));
}

/** A model's reads by collection: get-by-id reads and lists, in document order. */
interface ReadIndex {
  byId: Map<string, ApiOperation>;
  lists: Map<string, ApiOperation[]>;
}

const readIndexes = new WeakMap<ApiModel, { size: number; value: ReadIndex }>();

/**
 * The reads of a model indexed once by collection: looking them up per write made a document of
 * 11,000 operations (Microsoft Graph) cost 11,000 × 11,000 comparisons.
 */
function readIndexOf(model: ApiModel): ReadIndex {
  let index = readIndexes.get(model);
  if (index !== undefined && index.size === model.operations.length) return index.value;
  const value: ReadIndex = { byId: new Map(), lists: new Map() };
  for (const g of model.operations) {
    if (g.method !== 'GET') continue;
    if (g.on_item && g.path_params.length > 0) {
      if (!value.byId.has(g.collection)) value.byId.set(g.collection, g);
    } else if (!g.on_item) {
      const list = value.lists.get(g.collection);
      if (list) list.push(g);
      else value.lists.set(g.collection, [g]);
    }
  }
  index = { size: model.operations.length, value };
  readIndexes.set(model, index);
  return value;
}

/** The lookup for a write, or the reason none was found (for the TODO comment). */
export function lookupFor(model: ApiModel, op: ApiOperation): LookupPlan | string {
  if (op.method === 'GET') return 'a read needs no lookup';
  const collection = op.on_item ? op.collection : op.path;
  const body = fieldsOf(op.body);
  const reads = readIndexOf(model);
  // 1. get-by-id: the caller chooses the id, so reading it back finds this operation's record.
  const byId = reads.byId.get(collection);
  // Only a create: a record that already exists says nothing about whether an update applied.
  if (byId && op.method === 'POST' && !op.on_item) {
    const param = byId.path_params.at(-1)!.name;
    const record = fieldsOf(byId.success.schema);
    // Only the field named exactly like the read's parameter: a body `id` next to `{item_id}` is
    // more likely a reference to something else than the new record's id.
    const idInput = Object.hasOwn(body, param) ? param : undefined;
    const where = `the body field "${param}"`;
    const recordField = param;
    if (idInput !== undefined && Object.hasOwn(record, recordField)) {
      // A creation time the caller sends in the body is the caller's word, not the service's clock:
      // it cannot tell an older record from this operation's.
      const stamped = createdAtOf(byId.success.schema);
      const created = stamped !== undefined && !Object.hasOwn(body, stamped) ? stamped : undefined;
      return {
        kind: 'one',
        read: byId,
        path: byId.path.replace(`{${param}}`, `{{input.${idInput}}}`),
        ref: Object.hasOwn(record, 'id') ? 'id' : recordField,
        identify: { [recordField]: `{{input.${idInput}}}` },
        ...(created ? { created_at: created } : {}),
        id_input: idInput,
        reason: `${byId.name} (GET ${byId.path}) reads the record by the id the caller chooses (${where}); a record counts only if its ${recordField} is the one sent${created ? ` and it is not older than the operation (${created})` : ''}`,
      };
    }
  }
  // 2. a list that filters by a client-reference field Candor sets to the operation id.
  const lists = reads.lists.get(collection) ?? [];
  const metadata = isObj(body.metadata) ? body.metadata : undefined;
  for (const list of lists) {
    const found = listItems(list);
    if (!found) continue;
    const query = new Set(list.query_params.map((q) => q.name));
    for (const field of CLIENT_REF_FIELDS) {
      if (!Object.hasOwn(body, field)) continue;
      const name = filterNames(field).find((n) => query.has(n));
      if (name === undefined) continue;
      const record = fieldsOf(found.record);
      const bound = Object.hasOwn(record, field);
      return {
        kind: 'list',
        read: list,
        path: `${list.path}?${encodeURIComponent(name).replace(/%5B/g, '[').replace(/%5D/g, ']')}={{operation_id}}`,
        items: found.items,
        ref: 'id',
        ...(bound ? { identify: { [field]: '{{operation_id}}' } } : {}),
        client_ref: { field, under_metadata: false },
        reason: `${list.name} (GET ${list.path}) filters by "${name}", and the body field "${field}" is set to the operation id on every request${bound ? '' : `; its records do not show ${field}, so the filter alone binds them`}`,
      };
    }
    if (metadata !== undefined)
      for (const q of query) {
        const m = /^metadata\[([A-Za-z0-9_]+)\]$/.exec(q);
        if (!m) continue;
        return {
          kind: 'list',
          read: list,
          path: `${list.path}?${q}={{operation_id}}`,
          items: found.items,
          ref: 'id',
          client_ref: { field: m[1]!, under_metadata: true },
          reason: `${list.name} (GET ${list.path}) filters by "${q}", and metadata.${m[1]!} is set to the operation id on every request`,
        };
      }
  }
  const named = CLIENT_REF_FIELDS.find((f) => Object.hasOwn(body, f));
  if (named !== undefined)
    return `the body has "${named}", but no list of ${collection} filters by it (as ${filterNames(named).join(', ')})`;
  if (byId)
    return `${byId.name} reads one record, but its id is assigned by the service, not chosen by the caller`;
  return `no list of ${collection} filters by a client reference in the body (${CLIENT_REF_FIELDS.slice(0, 6).join(', ')}, …), and no GET ${collection}/{id} reads an id the caller chooses`;
}
