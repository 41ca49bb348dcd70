// Stateful reference resources. Kinds are data (one table row each), not one handler per kind: the
// API in api.ts serves every kind through the same create / read / list / set-state / delete /
// append-child routes. Ids are per-kind counters (`dep_0001`), so a replayed run assigns the same
// ids; generated values (payment confirmations) come from the seeded generator.
import type { Random } from '../core/time.js';

export const IdempotencyMode = {
  required: 'required',
  honoured: 'honoured',
  ignored: 'ignored',
} as const;
export type IdempotencyMode = (typeof IdempotencyMode)[keyof typeof IdempotencyMode];

export interface ResourceKindSpec {
  /** Id prefix: `dep` gives `dep_0001`. */
  prefix: string;
  /** Body fields a create must carry (else 422). */
  required: readonly string[];
  /** `state` of a new resource. */
  initial_state: string;
  /** Default handling of `Idempotency-Key` on this kind's mutating routes. */
  idempotency: IdempotencyMode;
  /** Append-only child collections, e.g. notes on records. */
  children?: Readonly<
    Record<string, { prefix: string; required: readonly string[]; idempotency: IdempotencyMode }>
  >;
  /** Body fields never stored or echoed: only a `<field>_set: true` marker is kept. */
  secret_fields?: readonly string[];
}

export const RESOURCE_KINDS = {
  issues: { prefix: 'iss', required: ['title'], initial_state: 'open', idempotency: 'ignored' },
  deployments: {
    prefix: 'dep',
    required: ['service'],
    initial_state: 'pending',
    idempotency: 'honoured',
  },
  releases: {
    prefix: 'rel',
    required: ['version'],
    initial_state: 'draft',
    idempotency: 'honoured',
  },
  builds: { prefix: 'bld', required: ['ref'], initial_state: 'queued', idempotency: 'ignored' },
  records: {
    prefix: 'rec',
    required: [],
    initial_state: 'active',
    idempotency: 'ignored',
    children: { notes: { prefix: 'note', required: ['text'], idempotency: 'ignored' } },
  },
  payments: {
    prefix: 'pay',
    required: ['amount', 'currency'],
    initial_state: 'captured',
    idempotency: 'required',
  },
  permissions: {
    prefix: 'perm',
    required: ['principal', 'role'],
    initial_state: 'granted',
    idempotency: 'honoured',
  },
  credentials: {
    prefix: 'cred',
    required: ['name'],
    initial_state: 'active',
    idempotency: 'ignored',
    secret_fields: ['secret', 'token', 'password', 'value'],
  },
} as const satisfies Record<string, ResourceKindSpec>;
export type ResourceKind = keyof typeof RESOURCE_KINDS;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Resource = { id: string; state: string; version: number } & Record<string, Json>;

/** Fields set by the fake; a request body cannot overwrite them. */
const RESERVED = new Set([
  'id',
  'version',
  'correlation_id',
  'created_by_request',
  'deleted',
  'confirmation',
]);

export interface CreateMeta {
  correlation_id: string | null;
  request: number;
}

export class ResourceStore {
  private items = new Map<string, Resource[]>();
  private counters = new Map<string, number>();

  constructor(
    readonly kinds: Readonly<Record<string, ResourceKindSpec>>,
    private readonly random: Random,
  ) {}

  reset(): void {
    this.items.clear();
    this.counters.clear();
  }

  spec(kind: string): ResourceKindSpec | undefined {
    return Object.hasOwn(this.kinds, kind) ? this.kinds[kind] : undefined;
  }

  /** Every stored resource of a kind, deleted ones included (the admin view). */
  all(kind: string): Resource[] {
    return (this.items.get(kind) ?? []).map((r) => structuredClone(r));
  }

  get(kind: string, id: string): Resource | undefined {
    const r = this.find(kind, id);
    return r === undefined ? undefined : structuredClone(r);
  }

  /** Live resources of a kind in creation order, optionally filtered by top-level fields. */
  list(kind: string, filter: Readonly<Record<string, string>> = {}): Resource[] {
    return (this.items.get(kind) ?? [])
      .filter((r) => r.deleted !== true)
      .filter((r) => Object.entries(filter).every(([k, v]) => scalarText(r[k]) === v))
      .map((r) => structuredClone(r));
  }

  create(kind: string, fields: Record<string, Json>, meta: CreateMeta): Resource {
    const spec = this.mustSpec(kind);
    const resource: Resource = {
      id: this.mint(spec.prefix),
      state: spec.initial_state,
      version: 1,
      client_ref: null,
      ...this.clean(spec, fields),
      correlation_id: meta.correlation_id,
      created_by_request: meta.request,
    };
    if (kind === 'payments')
      resource.confirmation = `conf_${Buffer.from(this.random.bytes(6)).toString('hex')}`;
    const list = this.items.get(kind) ?? [];
    list.push(resource);
    this.items.set(kind, list);
    return structuredClone(resource);
  }

  /** PUT (`replace`) or PATCH (merge) of the mutable fields. Undefined when absent or deleted. */
  update(
    kind: string,
    id: string,
    fields: Record<string, Json>,
    replace: boolean,
  ): Resource | undefined {
    const spec = this.mustSpec(kind);
    const r = this.find(kind, id);
    if (r === undefined) return undefined;
    const cleaned = this.clean(spec, fields);
    if (replace) {
      for (const key of Object.keys(r)) if (!RESERVED.has(key) && key !== 'state') delete r[key];
    }
    Object.assign(r, cleaned);
    r.version += 1;
    return structuredClone(r);
  }

  remove(kind: string, id: string): Resource | undefined {
    const r = this.find(kind, id);
    if (r === undefined) return undefined;
    r.deleted = true;
    r.state = 'deleted';
    r.version += 1;
    return structuredClone(r);
  }

  appendChild(
    kind: string,
    id: string,
    child: string,
    fields: Record<string, Json>,
  ): Resource | undefined {
    const spec = this.mustSpec(kind);
    const childSpec = spec.children?.[child];
    const parent = this.find(kind, id);
    if (childSpec === undefined || parent === undefined) return undefined;
    const entry: Resource = {
      id: this.mint(childSpec.prefix),
      state: 'created',
      version: 1,
      ...this.clean(spec, fields),
      parent_id: parent.id,
    };
    const existing = parent[child];
    parent[child] = [...(Array.isArray(existing) ? existing : []), entry];
    parent.version += 1;
    return structuredClone(entry);
  }

  children(kind: string, id: string, child: string): Resource[] | undefined {
    const parent = this.find(kind, id);
    const list = parent?.[child];
    if (parent === undefined || this.spec(kind)?.children?.[child] === undefined) return undefined;
    return (Array.isArray(list) ? list : []).map((r) => structuredClone(r) as Resource);
  }

  private find(kind: string, id: string): Resource | undefined {
    return (this.items.get(kind) ?? []).find((r) => r.id === id && r.deleted !== true);
  }

  private mustSpec(kind: string): ResourceKindSpec {
    const spec = this.spec(kind);
    if (spec === undefined) throw new TypeError(`unknown resource kind ${kind}`);
    return spec;
  }

  private mint(prefix: string): string {
    const n = (this.counters.get(prefix) ?? 0) + 1;
    this.counters.set(prefix, n);
    return `${prefix}_${String(n).padStart(4, '0')}`;
  }

  private clean(spec: ResourceKindSpec, fields: Record<string, Json>): Record<string, Json> {
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries(fields)) {
      if (RESERVED.has(k)) continue;
      if (spec.secret_fields?.includes(k)) {
        out[`${k}_set`] = true;
        continue;
      }
      out[k] = v;
    }
    return out;
  }
}

/** Lookup filters compare scalar fields by their text; objects and arrays never match. */
function scalarText(v: Json | undefined): string | undefined {
  return v === undefined || (typeof v === 'object' && v !== null) ? undefined : String(v);
}
