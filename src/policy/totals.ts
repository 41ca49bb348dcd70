// Rolling totals from the ledger: how many operations, and the sum of a declared numeric argument,
// per principal, session or action over a window. An operation counts while its effect may exist
// (core/fold.ts: `applied` or `unknown`) — an unknown outcome is spent money until a lookup proves
// otherwise; only `none` (never reached the destination, or proved absent) is left out. The
// operation being decided is never counted in its own totals.
import { effectOf } from '../core/fold.js';
import type { LedgerStore } from '../ledger/store.js';

export interface TotalSpec {
  argument: string;
  /** Actions counted; absent: every action. */
  actions?: readonly string[] | undefined;
  per: 'principal' | 'session' | 'action';
  /** `day` (since midnight in the zone) or a duration: 30m, 24h, 7d. */
  window: string;
}

export interface TotalsQuery {
  now: number;
  zone: string;
  operation_id: string;
  action: string;
  session_id: string | null;
  principal: string;
}

interface Facts {
  principal: string | null;
  counted: Record<string, number>;
  params: unknown;
}

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export const WINDOW = /^(day|[1-9][0-9]{0,5}[smhd])$/;

/** Start of the window ending at `now`. */
export function windowStart(window: string, now: number, zone: string): number {
  if (window === 'day') return startOfDay(now, zone);
  const unit = UNIT_MS[window.slice(-1)] ?? 86_400_000;
  return now - Number(window.slice(0, -1)) * unit;
}

/** Midnight of `now`'s calendar day in `zone`, as epoch ms. */
export function startOfDay(now: number, zone: string): number {
  const parts = zoneParts(now, zone);
  const asUtc = Date.UTC(
    parts.year,
    parts.month - 1,
    parts.day,
    parts.hour,
    parts.minute,
    parts.second,
  );
  const offset = asUtc - Math.floor(now / 1000) * 1000;
  return Date.UTC(parts.year, parts.month - 1, parts.day) - offset;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** One formatter per zone: building one costs more than a whole policy decision. */
function formatterOf(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      weekday: 'long',
    });
    formatters.set(zone, f);
  }
  return f;
}

export interface ZoneParts {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
  weekday: string;
}

/** The last second formatted per zone: formatting costs more than the rest of a request. */
const lastParts = new Map<string, { second: number; parts: Readonly<ZoneParts> }>();

/** Calendar parts of `at` in `zone` (second resolution, so one formatting serves a whole second). */
export function zoneParts(at: number, zone: string): Readonly<ZoneParts> {
  const second = Math.floor(at / 1000);
  const last = lastParts.get(zone);
  if (last && last.second === second) return last.parts;
  const f = formatterOf(zone);
  const parts = f.formatToParts(at);
  const get = (type: string): string => parts.find((p) => p.type === type)?.value ?? '0';
  const out: ZoneParts = {
    year: Number(get('year')),
    month: Number(get('month')),
    day: Number(get('day')),
    hour: Number(get('hour')) % 24,
    minute: Number(get('minute')),
    second: Number(get('second')),
    weekday: get('weekday').toLowerCase(),
  };
  lastParts.set(zone, { second, parts: out });
  return out;
}

/** Totals over one ledger; facts of an operation (who, how much) are read once and kept. */
export function createTotals(ledger: LedgerStore) {
  const facts = new Map<string, Facts>();

  async function factsOf(operationId: string): Promise<Facts> {
    const known = facts.get(operationId);
    if (known) return known;
    const events = await ledger.query({ operation_id: operationId });
    let principal: string | null = null;
    let counted: Record<string, number> = {};
    let params: unknown = undefined;
    for (const e of events) {
      if (e.kind === 'operation_opened') params = e.data.params;
      if (e.kind === 'policy_decided' && e.data.decision !== 'deny') {
        principal ??= e.data.principal;
        counted = { ...e.data.counted, ...counted };
      }
    }
    const f = { principal, counted, params };
    // Kept once a decision is on record: what it says never changes.
    if (principal !== null) facts.set(operationId, f);
    return f;
  }

  /** Remembers this process's own decisions so the next call need not read them back. */
  function remember(operationId: string, principal: string, counted: Record<string, number>): void {
    if (!facts.has(operationId)) facts.set(operationId, { principal, counted, params: undefined });
  }

  async function total(spec: TotalSpec, q: TotalsQuery): Promise<{ count: number; sum: number }> {
    const from = windowStart(spec.window, q.now, q.zone);
    const actions =
      spec.per === 'action' ? [q.action] : spec.actions ? [...spec.actions] : [undefined];
    if (spec.per === 'action' && spec.actions && !spec.actions.includes(q.action))
      return { count: 0, sum: 0 };
    let count = 0;
    let sum = 0;
    for (const action of actions) {
      let after: string | undefined;
      for (;;) {
        const page = await ledger.operations({
          ...(action !== undefined ? { action } : {}),
          ...(spec.per === 'session' && q.session_id !== null ? { session_id: q.session_id } : {}),
          opened_from: from,
          opened_to: q.now,
          limit: 500,
          order: 'opened',
          ...(after ? { after } : {}),
        });
        for (const row of page.rows) {
          if (row.operation_id === q.operation_id) continue;
          if (effectOf(row.fold) === 'none') continue;
          const f = await factsOf(row.operation_id);
          // An operation nobody's policy decided (older than the policy) counts for everyone.
          if (spec.per === 'principal' && f.principal !== null && f.principal !== q.principal)
            continue;
          const value = f.counted[spec.argument] ?? numberIn(f.params, spec.argument);
          if (value === undefined && !spec.actions) continue;
          if (value === undefined) {
            // Its amount cannot be read (sealed, or not a number): an unknown amount is not zero.
            throw new Error(
              `operation ${row.operation_id} counts toward ${spec.argument} but its amount cannot be read`,
            );
          }
          count += 1;
          sum += value;
        }
        if (!page.next) break;
        after = page.next;
      }
    }
    return { count, sum };
  }

  return { total, remember };
}

function numberIn(params: unknown, name: string): number | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  const v = (params as Record<string, unknown>)[name];
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}
