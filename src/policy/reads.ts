// What a policy set can see of a request, found once at load from Cedar's own JSON form of each
// policy (policyToJson): the attributes of context, principal and resource its conditions read, and
// which principals, actions and resources each policy's scope can match. The evaluator sends Cedar
// only that (each value and entity crossing into wasm costs microseconds, on every call) and only
// the policies whose scope can match.
//
// Both cuts are exact, not approximations of Cedar:
//   - An attribute no policy reads cannot change any policy's result, so leaving it out changes
//     neither the decision nor the reasons nor the errors. Reads are over-approximated: a path read
//     as a value (compared, passed to a function) keeps its whole value, a variable used whole keeps
//     everything, and any attribute access whose target is not a plain path (an entity literal, an
//     `if` choosing between entities, a record literal) turns pruning of entities off. Only the
//     paths a policy reads attribute-by-attribute are narrowed.
//   - An entity of which no attribute is read is left out: Cedar gives an absent entity no
//     attributes and no ancestors, which is what the entities Candor builds have (no parents).
//   - A policy whose scope cannot match is neither satisfied nor erroring (Cedar evaluates the
//     scope first and skips the conditions), so a set without it decides the same with the same
//     reasons. Candor's entities have no parents, so `in E` in a scope is `== E`.
import { policyToJson } from '@cedar-policy/cedar-wasm/nodejs';

/** `true`: the whole value is read; a map: only these attributes (each with what is read of it). */
export type Need = true | Map<string, Need>;

export interface Reads {
  context: Need | null;
  principal: Need | null;
  resource: Need | null;
  /** Some attribute access Candor cannot attribute to a path: send entities whole. */
  opaque: boolean;
}

interface Uid {
  type: string;
  id: string;
}

/** Whether a policy's scope can match a request; null: it can (not narrowed). */
export interface Scope {
  principal: (u: Uid) => boolean;
  action: (u: Uid) => boolean;
  resource: (u: Uid) => boolean;
}

type Json = unknown;

const isObject = (v: Json): v is Record<string, Json> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const sameUid = (e: Json, u: Uid): boolean =>
  isObject(e) && e['type'] === u.type && e['id'] === u.id;

/** The matcher of one scope constraint (EST form); anything not understood matches everything. */
function matcherOf(c: Json): (u: Uid) => boolean {
  if (!isObject(c)) return () => true;
  switch (c['op']) {
    case 'All':
      return () => true;
    case '==':
      return 'entity' in c ? (u) => sameUid(c['entity'], u) : () => true;
    case 'in':
      // Candor's entities have no parents: `in E` holds exactly when the uid is E.
      if ('entity' in c) return (u) => sameUid(c['entity'], u);
      if (Array.isArray(c['entities'])) {
        const list = c['entities'];
        return (u) => list.some((e) => sameUid(e, u));
      }
      return () => true;
    case 'is': {
      const type = c['entity_type'];
      if (typeof type !== 'string') return () => true;
      const inside = c['in'];
      if (inside === undefined) return (u) => u.type === type;
      if (isObject(inside) && 'entity' in inside)
        return (u) => u.type === type && sameUid(inside['entity'], u);
      return (u) => u.type === type;
    }
    default:
      return () => true;
  }
}

function emptyReads(): Reads {
  return { context: null, principal: null, resource: null, opaque: false };
}

/** Adds `attrs` below `need` (null: nothing read yet). */
function addPath(need: Need | null, attrs: readonly string[]): Need {
  if (need === true) return true;
  if (attrs.length === 0) return true;
  const map = need ?? new Map<string, Need>();
  const [head, ...rest] = attrs as [string, ...string[]];
  map.set(head, addPath(map.get(head) ?? null, rest));
  return map;
}

function mergeNeed(a: Need | null, b: Need | null): Need | null {
  if (a === null) return b;
  if (b === null) return a;
  if (a === true || b === true) return true;
  const out = new Map(a);
  for (const [k, v] of b) out.set(k, mergeNeed(out.get(k) ?? null, v) ?? true);
  return out;
}

/** `Var` or a chain of `.` over one: the variable and the attributes, outermost last. */
function pathOf(expr: Json): { root: string; attrs: string[] } | null {
  if (!isObject(expr)) return null;
  if (typeof expr['Var'] === 'string') return { root: expr['Var'], attrs: [] };
  const dot = expr['.'];
  if (isObject(dot) && typeof dot['attr'] === 'string') {
    const inner = pathOf(dot['left']);
    return inner ? { root: inner.root, attrs: [...inner.attrs, dot['attr']] } : null;
  }
  return null;
}

function markPath(r: Reads, root: string, attrs: readonly string[]): void {
  if (root === 'context') r.context = addPath(r.context, attrs);
  // A bare entity variable is its uid (compared, `in`, `is`): no attribute is read.
  else if (root === 'principal' && attrs.length > 0) r.principal = addPath(r.principal, attrs);
  else if (root === 'resource' && attrs.length > 0) r.resource = addPath(r.resource, attrs);
  // `action` has no entity in the request: nothing to keep.
}

function walk(expr: Json, r: Reads): void {
  if (Array.isArray(expr)) {
    for (const e of expr) walk(e, r);
    return;
  }
  if (!isObject(expr)) return;
  const path = pathOf(expr);
  if (path) {
    markPath(r, path.root, path.attrs);
    return;
  }
  const dot = expr['.'];
  if (isObject(dot)) {
    // Attribute of something that is not a plain path: it may be an entity's.
    r.opaque = true;
    walk(dot['left'], r);
    return;
  }
  const has = expr['has'];
  if (isObject(has)) {
    const left = pathOf(has['left']);
    const attr = has['attr'];
    const attrs = Array.isArray(attr)
      ? attr.filter((a): a is string => typeof a === 'string')
      : typeof attr === 'string'
        ? [attr]
        : null;
    if (left && attrs && attrs.length > 0) {
      if (left.root === 'principal' || left.root === 'resource' || left.root === 'context')
        markPath(r, left.root, [...left.attrs, ...attrs]);
      return;
    }
    r.opaque = true;
    walk(has['left'], r);
    return;
  }
  for (const op of ['getTag', 'hasTag']) {
    const tag = expr[op];
    if (isObject(tag)) {
      // Tags are not attributes: keep the entities as they are.
      r.opaque = true;
      walk(tag['left'], r);
      walk(tag['right'], r);
      return;
    }
  }
  // Any other node: whatever paths it holds are read whole (over-approximation).
  for (const v of Object.values(expr)) walk(v, r);
}

export interface PolicyShape {
  scope: Scope;
  reads: Reads;
}

/** Scope and reads of one policy's text; null when Cedar cannot give its JSON form. */
export function shapeOf(text: string): PolicyShape | null {
  const json = policyToJson(text);
  if (json.type === 'failure') return null;
  const est = json.json as unknown as Record<string, Json>;
  const reads = emptyReads();
  walk(est['conditions'], reads);
  return {
    scope: {
      principal: matcherOf(est['principal']),
      action: matcherOf(est['action']),
      resource: matcherOf(est['resource']),
    },
    reads,
  };
}

/** What a set of policies reads together; null shapes (not understood) read everything. */
export function readsOf(shapes: ReadonlyArray<PolicyShape | null>): Reads {
  const out = emptyReads();
  for (const s of shapes) {
    if (s === null) return { context: true, principal: true, resource: true, opaque: true };
    out.context = mergeNeed(out.context, s.reads.context);
    out.principal = mergeNeed(out.principal, s.reads.principal);
    out.resource = mergeNeed(out.resource, s.reads.resource);
    out.opaque ||= s.reads.opaque;
  }
  return out;
}

/** `value` with only what `need` reads; values that are not plain records are kept whole. */
export function prune<T>(value: T, need: Need): T {
  if (need === true || !isObject(value) || '__extn' in value || '__entity' in value) return value;
  const out: Record<string, unknown> = {};
  for (const [k, sub] of need) if (Object.hasOwn(value, k)) out[k] = prune(value[k], sub);
  return out as T;
}
