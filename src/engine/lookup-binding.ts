// Which looked-up records are *this* operation's effect (DESIGN.md §2, "Knowledge is monotone").
// A lookup answers "records like the one I would have made"; a record someone else made earlier
// (the same client-chosen id, an older order for the same recipient) is not evidence that this
// operation took effect. A record is bound to the operation only when
//   (a) it carries the operation's id, its idempotency key or its correlation value — exact string
//       equality with any field value of the record, nested ones included; or
//   (b) the action declares its identifying fields, every one of them equals, and — when the
//       action declares the record's creation time and the record has a parseable one — it is not
//       older than the operation's opening (less CLOCK_SKEW_MS: the service's clock is not ours).
// Records that match the lookup but bind by neither rule are counted, never taken.
import type { ReconciliationDeclaration, RequestContext } from './action.js';

/**
 * How far the destination's clock may run behind ours before a record it stamped "created before
 * the operation opened" is taken as older. Small on purpose: a record made just before the
 * operation by someone else must not pass as this operation's; one that is wrongly judged older
 * only leaves the outcome unknown.
 */
export const CLOCK_SKEW_MS = 60_000;

export interface LookupRecord {
  ref: string;
  record: unknown;
}

export interface Binding {
  bound: LookupRecord[];
  /** Records the lookup matched that are not bound to this operation (possibly another's). */
  unbound: LookupRecord[];
}

/** The values that mark a record as this operation's (rule a). */
function operationTokens(ctx: RequestContext): Set<string> {
  const out = new Set([ctx.operation_id, ctx.correlation_id]);
  if (ctx.idempotency_key !== null) out.add(ctx.idempotency_key);
  out.delete('');
  return out;
}

function carriesToken(value: unknown, tokens: Set<string>, depth = 0): boolean {
  if (typeof value === 'string') return tokens.has(value);
  if (depth > 32 || value === null || typeof value !== 'object') return false;
  const children = Array.isArray(value) ? value : Object.values(value);
  return children.some((v) => carriesToken(v, tokens, depth + 1));
}

function dig(value: unknown, dotPath: string): unknown {
  let v = value;
  for (const part of dotPath.split('.')) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

function identifies(record: unknown, fields: Record<string, string>): boolean {
  const entries = Object.entries(fields);
  return (
    entries.length > 0 &&
    entries.every(([path, want]) => {
      const v = dig(record, path);
      return (typeof v === 'string' || typeof v === 'number') && String(v) === want;
    })
  );
}

/** The named arguments of `bindRecords`. */
export interface BindRecordsOptions {
  input: unknown;
  openedAt: number | null;
}

/**
 * Splits a lookup's records into those bound to the operation and the rest. `openedAt` is the
 * operation's opening time (ms since the epoch), or null when unknown (then no record passes the
 * age check of rule b when the action declares a creation time and the record has one).
 */
export function bindRecords(
  declaration: Pick<ReconciliationDeclaration, 'identify' | 'createdAt'>,
  records: LookupRecord[],
  ctx: RequestContext,
  { input, openedAt }: BindRecordsOptions,
): Binding {
  const tokens = operationTokens(ctx);
  let fields: Record<string, string> | null = null;
  if (declaration.identify) {
    try {
      fields = declaration.identify(input, ctx);
    } catch {
      fields = null;
    }
  }
  const notOlder = (record: unknown): boolean => {
    if (!declaration.createdAt) return true;
    let at: number | null;
    try {
      at = declaration.createdAt(record);
    } catch {
      at = null;
    }
    if (at === null || !Number.isFinite(at)) return true;
    return openedAt !== null && at >= openedAt - CLOCK_SKEW_MS;
  };
  const bound: LookupRecord[] = [];
  const unbound: LookupRecord[] = [];
  for (const r of records) {
    const isOurs =
      carriesToken(r.record, tokens) ||
      (fields !== null && identifies(r.record, fields) && notOlder(r.record));
    (isOurs ? bound : unbound).push(r);
  }
  return { bound, unbound };
}

/** A creation time as the services write it: ISO 8601 text, or seconds / ms since the epoch. */
export function parseCreatedAt(value: unknown): number | null {
  if (typeof value === 'number' && Number.isFinite(value))
    // Ten digits of seconds reach the year 2286; anything smaller is seconds, larger is ms.
    return value < 1e11 ? value * 1000 : value;
  if (typeof value !== 'string' || value.trim() === '') return null;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return parseCreatedAt(Number(value));
  const t = Date.parse(value);
  return Number.isNaN(t) ? null : t;
}
