// A JavaScript evaluator for a small, closed subset of Cedar, used instead of a call into Cedar's
// wasm when every policy that can match a request lies inside it. It gives Cedar's answer or none:
//
//   - A policy is compiled at load from Cedar's own JSON form (policyToJson) only when its scope
//     and every node of its conditions are in the subset; otherwise the evaluator is not used for
//     any request that policy can match (Cedar decides).
//   - At a call it is used only when what Cedar would be given (the pruned context and entity
//     attributes) is plain: booleans, well-formed strings, safe integers and records of them —
//     nothing Cedar would parse as an entity, an extension value or a set, no number Cedar might
//     read differently.
//   - Any evaluation error (a missing attribute, a type mismatch, an i64 overflow or a result past
//     2^53 that a JS number cannot carry exactly) in any policy gives up on the whole request:
//     Cedar decides it again and reports its own errors, so the fail-closed answer and its wording
//     stay Cedar's.
//
// The subset: literals (bool, integer, string); `context`, and `principal`/`resource` only as the
// target of `.attr`/`has attr`; `.attr`, `has attr` (one attribute); ==, !=, <, <=, >, >=, +, -, *,
// unary -, &&, ||, !, `like`, if-then-else. Scopes: unconstrained, ==, in (one entity or a list:
// Candor's entities have no parents), is, is … in entity. test/policy-fast.property.test.ts checks
// it against Cedar on random policy sets and requests.
import { policyToJson } from '@cedar-policy/cedar-wasm/nodejs';

/** Thrown inside an evaluation to give the request back to Cedar (one instance: no stack per throw). */
const GIVE_UP = new Error('the fast path gives the request to Cedar');

class Entity {
  constructor(readonly attrs: Record<string, unknown> | null) {}
}
type Value = boolean | number | string | Entity | Record<string, unknown>;

export interface Env {
  context: Record<string, unknown>;
  principal: Entity;
  resource: Entity;
}
type Expr = (env: Env) => Value;

/** The binary operators, replaceable for the differential test's teeth check only. */
export type BinaryOps = Record<'<' | '<=' | '>' | '>=', (a: number, b: number) => boolean> &
  Record<'+' | '-' | '*', (a: number, b: number) => number>;
export const FAST_OPS: BinaryOps = {
  '<': (a, b) => a < b,
  '<=': (a, b) => a <= b,
  '>': (a, b) => a > b,
  '>=': (a, b) => a >= b,
  '+': (a, b) => a + b,
  '-': (a, b) => a - b,
  '*': (a, b) => a * b,
};

type Json = unknown;
const isObject = (v: Json): v is Record<string, Json> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Not in the subset: the policy is left to Cedar. */
class Outside extends Error {}
const outside = (): never => {
  throw new Outside();
};

const giveUp = (): never => {
  throw GIVE_UP;
};

const isEntity = (v: Value): v is Entity => v instanceof Entity;

function bool(v: Value): boolean {
  return typeof v === 'boolean' ? v : giveUp();
}
function long(v: Value): number {
  return typeof v === 'number' ? v : giveUp();
}

function attrOf(v: Value, attr: string): Value {
  const rec = isEntity(v) ? v.attrs : typeof v === 'object' ? v : giveUp();
  if (rec === null || !Object.hasOwn(rec, attr)) return giveUp();
  return rec[attr] as Value;
}

function hasAttr(v: Value, attr: string): boolean {
  if (isEntity(v)) return v.attrs !== null && Object.hasOwn(v.attrs, attr);
  if (typeof v === 'object') return Object.hasOwn(v, attr);
  return giveUp();
}

/** Cedar's == over the values the fast path carries: primitives only, other types are unequal. */
function equal(a: Value, b: Value): boolean {
  if (typeof a === 'object' || typeof b === 'object') return giveUp();
  return a === b;
}

/** `like`: `*` matches any sequence; literal segments match exactly (well-formed strings). */
function likeOf(pattern: Json): (s: string) => boolean {
  if (!Array.isArray(pattern)) return outside();
  const segments: string[] = [''];
  for (const el of pattern) {
    if (el === 'Wildcard') segments.push('');
    else if (isObject(el) && typeof el['Literal'] === 'string')
      segments[segments.length - 1] += el['Literal'];
    else outside();
  }
  if (segments.length === 1) {
    const only = segments[0]!;
    return (s) => s === only;
  }
  const first = segments[0]!;
  const last = segments[segments.length - 1]!;
  const middle = segments.slice(1, -1);
  return (s) => {
    if (s.length < first.length + last.length) return false;
    if (!s.startsWith(first) || !s.endsWith(last)) return false;
    let at = first.length;
    const end = s.length - last.length;
    for (const m of middle) {
      const found = s.indexOf(m, at);
      if (found < 0 || found + m.length > end) return false;
      at = found + m.length;
    }
    return true;
  };
}

function safe(n: number): number {
  return Number.isSafeInteger(n) ? n : giveUp();
}

function compile(e: Json, ops: BinaryOps, asTarget = false): Expr {
  if (!isObject(e)) return outside();
  const keys = Object.keys(e);
  if (keys.length !== 1) return outside();
  const op = keys[0]!;
  const arg = e[op];
  switch (op) {
    case 'Value': {
      if (typeof arg === 'boolean' || typeof arg === 'string') return () => arg;
      if (typeof arg === 'number' && Number.isSafeInteger(arg)) return () => arg;
      return outside();
    }
    case 'Var':
      if (arg === 'context') return (env) => env.context;
      if (asTarget && arg === 'principal') return (env) => env.principal;
      if (asTarget && arg === 'resource') return (env) => env.resource;
      return outside();
    case '.': {
      if (!isObject(arg) || typeof arg['attr'] !== 'string') return outside();
      const left = compile(arg['left'], ops, true);
      const attr = arg['attr'];
      return (env) => attrOf(left(env), attr);
    }
    case 'has': {
      if (!isObject(arg) || typeof arg['attr'] !== 'string') return outside();
      const left = compile(arg['left'], ops, true);
      const attr = arg['attr'];
      return (env) => hasAttr(left(env), attr);
    }
    case '!':
    case 'neg': {
      if (!isObject(arg)) return outside();
      const inner = compile(arg['arg'], ops);
      return op === '!' ? (env) => !bool(inner(env)) : (env) => safe(-long(inner(env)));
    }
    case 'like': {
      if (!isObject(arg)) return outside();
      const left = compile(arg['left'], ops);
      const match = likeOf(arg['pattern']);
      return (env) => {
        const v = left(env);
        return typeof v === 'string' ? match(v) : giveUp();
      };
    }
    case 'if-then-else': {
      if (!isObject(arg)) return outside();
      const cond = compile(arg['if'], ops);
      const then = compile(arg['then'], ops);
      const other = compile(arg['else'], ops);
      return (env) => (bool(cond(env)) ? then(env) : other(env));
    }
    default:
      break;
  }
  if (!isObject(arg)) return outside();
  const left = compile(arg['left'], ops);
  const right = compile(arg['right'], ops);
  switch (op) {
    case '&&':
      return (env) => bool(left(env)) && bool(right(env));
    case '||':
      return (env) => bool(left(env)) || bool(right(env));
    case '==':
      return (env) => equal(left(env), right(env));
    case '!=':
      return (env) => !equal(left(env), right(env));
    case '<':
    case '<=':
    case '>':
    case '>=': {
      const f = ops[op];
      return (env) => f(long(left(env)), long(right(env)));
    }
    case '+':
    case '-':
    case '*': {
      const f = ops[op];
      return (env) => safe(f(long(left(env)), long(right(env))));
    }
    default:
      return outside();
  }
}

interface Uid {
  type: string;
  id: string;
}
const uidOf = (e: Json): Uid =>
  isObject(e) && typeof e['type'] === 'string' && typeof e['id'] === 'string'
    ? { type: e['type'], id: e['id'] }
    : outside();

/** The exact matcher of one scope constraint (no parents: `in E` is `== E`). */
function scopeOf(c: Json): (u: Uid) => boolean {
  if (!isObject(c)) return outside();
  const same = (a: Uid) => (u: Uid) => u.type === a.type && u.id === a.id;
  switch (c['op']) {
    case 'All':
      return () => true;
    case '==':
      return same(uidOf(c['entity']));
    case 'in':
      if ('entity' in c) return same(uidOf(c['entity']));
      if (Array.isArray(c['entities'])) {
        const list = c['entities'].map(uidOf);
        return (u) => list.some((a) => a.type === u.type && a.id === u.id);
      }
      return outside();
    case 'is': {
      const type = c['entity_type'];
      if (typeof type !== 'string') return outside();
      if (!('in' in c)) return (u) => u.type === type;
      const inside = c['in'];
      if (!isObject(inside) || !('entity' in inside)) return outside();
      const is = same(uidOf(inside['entity']));
      return (u) => u.type === type && is(u);
    }
    default:
      return outside();
  }
}

export interface FastPolicy {
  principal: (u: Uid) => boolean;
  action: (u: Uid) => boolean;
  resource: (u: Uid) => boolean;
  /** Scope matched: whether the conditions hold; throws GIVE_UP on any evaluation error. */
  holds: (env: Env) => boolean;
}

/** The fast form of one policy's text; null when any part of it is outside the subset. */
export function compileFast(text: string, ops: BinaryOps = FAST_OPS): FastPolicy | null {
  const json = policyToJson(text);
  if (json.type === 'failure') return null;
  const est = json.json as unknown as Record<string, Json>;
  try {
    const conditions = est['conditions'];
    if (!Array.isArray(conditions)) return null;
    // Cedar joins the conditions into one conjunction in order (`unless` negated): short-circuit.
    const parts = conditions.map((c): Expr => {
      if (!isObject(c)) return outside();
      const body = compile(c['body'], ops);
      if (c['kind'] === 'when') return body;
      if (c['kind'] === 'unless') return (env) => !bool(body(env));
      return outside();
    });
    return {
      principal: scopeOf(est['principal']),
      action: scopeOf(est['action']),
      resource: scopeOf(est['resource']),
      holds: (env) => {
        for (const p of parts) if (!bool(p(env))) return false;
        return true;
      },
    };
  } catch {
    return null; // outside the subset (or too deep for this evaluator): Cedar decides
  }
}

const LONE_SURROGATE = /\p{Surrogate}/u;
/** No lone surrogate (Cedar's strings are Unicode scalar values). */
export const wellFormed = (s: string): boolean => !LONE_SURROGATE.test(s);

/** Whether Cedar would read `v` exactly as the fast path does (see the header). */
export function plain(v: unknown): boolean {
  switch (typeof v) {
    case 'boolean':
      return true;
    case 'number':
      return Number.isSafeInteger(v) && !Object.is(v, -0);
    case 'string':
      return wellFormed(v);
    case 'object': {
      if (v === null || Array.isArray(v) || Object.getPrototypeOf(v) !== Object.prototype)
        return false;
      const rec = v as Record<string, unknown>;
      // `type` + `id` could be read as an entity reference by some Cedar JSON readers.
      if ('type' in rec && 'id' in rec) return false;
      for (const k in rec) if (k.startsWith('__') || !wellFormed(k) || !plain(rec[k])) return false;
      return true;
    }
    default:
      return false;
  }
}

export { Entity as FastEntity };

/** Which of `policies` hold in `env`; null: some policy errored (Cedar must decide). */
export function satisfied(
  policies: ReadonlyArray<{ fast: FastPolicy; index: number }>,
  principal: Uid,
  action: Uid,
  resource: Uid,
  env: Env,
): number[] | null {
  const out: number[] = [];
  try {
    for (const { fast, index } of policies) {
      if (!fast.action(action) || !fast.principal(principal) || !fast.resource(resource)) continue;
      if (fast.holds(env)) out.push(index);
    }
  } catch {
    return null; // GIVE_UP, or anything unforeseen (a stack overflow): Cedar decides
  }
  return out;
}
