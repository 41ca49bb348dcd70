// The operations listing (what `candor ui` pages through): one summary row per operation, kept by
// the memory store in the same append as the events it derives from and by the SQLite and
// PostgreSQL projectors just after it (`fresh` reads wait for it), with the pure rules here —
// `foldListing` folds a batch of stored events into changed rows, per-(action, class, session,
// state) count deltas, session deltas and new remote-reference tags. Pages are keyset-paginated in
// triage order: duplicate effects, then unresolved operations, then the rest; newest first within
// each. Everything here is derived from the record bytes and can be rebuilt (`rebuildListing`).
import {
  OperationState,
  type ActionClass,
  type OperationState as State,
} from '../core/vocabulary.js';
import type { StoredEvent } from './events.js';
import { UNRESOLVED_STATES } from './projection.js';
import { foldEvent, stateOf, type OperationFold } from '../core/fold.js';

/** 0: a duplicate effect (confirmed or two remote records seen); 1: open or unknown; 2: the rest. */
export type Priority = 0 | 1 | 2;

export interface OperationRow {
  operation_id: string;
  /** Seq of the operation's first event: the tie-breaker of the order, never changes. */
  first_seq: number;
  last_seq: number;
  /** Time of `operation_opened` (of the first event until it is seen). */
  opened_at: number;
  last_at: number;
  state: State | null;
  priority: Priority;
  action: string | null;
  action_class: ActionClass | null;
  session_id: string | null;
  correlation_id: string | null;
  attempts: number;
  /** Attempts whose request may have reached the destination. */
  delivered: number;
  remote_refs: string[];
  /** Two or more remote records seen (responses, lookups or the resolution). */
  duplicate: boolean;
  /** The operation fold (core/fold.ts) that `state` is read from; null before any event. */
  fold: OperationFold | null;
}

/**
 * How far a listing answer is behind the events: a store that projects its listing after the
 * commit (SQLite schema 7, PostgreSQL schema 6) says so when the answer missed some events (`events` of them, the
 * oldest written `ms` ago). Absent when the answer covers every event.
 */
export interface ListingTrail {
  events: number;
  ms: number;
}

export interface ReadOptions {
  /**
   * Default true: the store first brings its listing up to every event stored at the call (a
   * reader that decides something, such as the duplicate guard or policy totals, must never be
   * answered from a stale listing). `false`: answer from the listing as it stands and say how far
   * it trails; for views that must never wait for, or take, the write lock (PostgreSQL, whose
   * projector has its own lock, projects what is pending first, waiting at most 250 ms for it). A store that cannot
   * write (opened read-only) answers as it stands either way.
   */
  fresh?: boolean;
}

export interface OperationsQuery extends ReadOptions {
  states?: readonly State[];
  action?: string;
  action_class?: string;
  session_id?: string;
  /** `opened_at` bounds, inclusive (ms since the epoch). */
  opened_from?: number;
  opened_to?: number;
  /** An operation id (or a prefix of at least 6 characters), a correlation id or a remote ref. */
  search?: string;
  /** Exactly these operations (other filters still apply). */
  operation_ids?: readonly string[];
  /** A `next` or `prev` cursor of an earlier page of the same query. */
  after?: string;
  before?: string;
  /** Rows per page, 1–500. Default 50. */
  limit?: number;
  /** `triage` (default): priority, newest first. `opened`: oldest first (a session's calls). */
  order?: 'triage' | 'opened';
}

export interface OperationsPage {
  rows: OperationRow[];
  /** Matches of the whole query (every page). */
  total: number;
  /** Matches of the query without its state part, per state (operations with a state only). */
  counts: Record<State, number>;
  /** Cursors of the neighbouring pages; null at either end. */
  next: string | null;
  prev: string | null;
  trails?: ListingTrail;
}

export interface SessionSummary {
  session_id: string;
  first_seq: number;
  first_at: number;
  /** From `session_started`, when recorded. */
  agent: string | null;
  operations: number;
}

export interface ListingFacets {
  actions: string[];
  action_classes: string[];
  /** Newest first, at most the requested number. */
  sessions: SessionSummary[];
  trails?: ListingTrail;
}

/** What a store adds to its LedgerStore for the listing. */
export interface OperationListing {
  operations(q: OperationsQuery): Promise<OperationsPage>;
  /** Filter values: distinct actions and classes, and the newest `sessions` sessions (default 200). */
  facets(sessions?: number, options?: ReadOptions): Promise<ListingFacets>;
}

export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 500;
export const STATES: readonly State[] = Object.values(OperationState);

export function emptyCounts(): Record<State, number> {
  return {
    open: 0,
    succeeded: 0,
    failed: 0,
    unknown: 0,
    cancelled: 0,
    duplicate_effect_confirmed: 0,
  };
}

export function priorityOf(state: State | null, duplicate: boolean): Priority {
  if (duplicate || state === OperationState.duplicate_effect_confirmed) return 0;
  if (state !== null && UNRESOLVED_STATES.has(state)) return 1;
  return 2;
}

/** Which priority buckets a state can sit in (a duplicate flag lifts any state into bucket 0). */
export function bucketsOf(state: State): Priority[] {
  if (state === OperationState.duplicate_effect_confirmed) return [0];
  return UNRESOLVED_STATES.has(state) ? [0, 1] : [0, 2];
}

// ---- cursors -------------------------------------------------------------------------------

export interface Cursor {
  priority: Priority;
  opened_at: number;
  first_seq: number;
}

export const cursorOf = (r: OperationRow): string => `${r.priority}.${r.opened_at}.${r.first_seq}`;

/** `null` for anything that is not a cursor this module wrote. */
export function parseCursor(text: string | undefined): Cursor | null {
  const m = /^([012])\.(-?\d{1,16})\.(\d{1,16})$/.exec(text ?? '');
  if (!m) return null;
  return { priority: Number(m[1]) as Priority, opened_at: Number(m[2]), first_seq: Number(m[3]) };
}

/** Triage order: priority ascending, then newest first (opened_at, first_seq descending). */
export function compareTriage(a: Cursor, b: Cursor): number {
  return a.priority - b.priority || b.opened_at - a.opened_at || b.first_seq - a.first_seq;
}

/** Opened order: oldest first. */
export function compareOpened(a: Cursor, b: Cursor): number {
  return a.opened_at - b.opened_at || a.first_seq - b.first_seq;
}

export function pageLimit(q: OperationsQuery): number {
  const n = Math.floor(q.limit ?? DEFAULT_PAGE);
  return Number.isFinite(n) ? Math.max(1, Math.min(MAX_PAGE, n)) : DEFAULT_PAGE;
}

// ---- folding -------------------------------------------------------------------------------

/** Key of the count table: action, class, session ('' for none) and state. */
export interface CountKey {
  action: string;
  action_class: string;
  session_id: string;
  state: State;
}

export interface ListingChanges {
  /** Final rows of the operations the batch touched (new ones included). */
  rows: OperationRow[];
  /** Count deltas (non-zero only). */
  counts: { key: CountKey; delta: number }[];
  /** Sessions seen: new operations to add, an agent name, first position when new. */
  sessions: {
    session_id: string;
    first_seq: number;
    first_at: number;
    agent: string | null;
    operations: number;
  }[];
  /** New (remote ref, operation) pairs, for `r:` tags. */
  refs: { ref: string; operation_id: string }[];
}

const countKey = (r: OperationRow): CountKey | null =>
  r.state === null
    ? null
    : {
        action: r.action ?? '',
        action_class: r.action_class ?? '',
        session_id: r.session_id ?? '',
        state: r.state,
      };

const keyText = (k: CountKey): string =>
  JSON.stringify([k.action, k.action_class, k.session_id, k.state]);

/**
 * Folds stored events (in seq order) into listing changes. `lookup` gives an operation's row as
 * stored before the batch (undefined: none yet); it is called at most once per operation.
 */
export function foldListing(
  events: readonly StoredEvent[],
  lookup: (operationId: string) => OperationRow | undefined,
): ListingChanges {
  const rows = new Map<string, OperationRow>();
  const before = new Map<string, CountKey | null>();
  const sessions = new Map<string, ListingChanges['sessions'][number]>();
  const refs: ListingChanges['refs'] = [];
  const session = (id: string, e: StoredEvent): ListingChanges['sessions'][number] => {
    let s = sessions.get(id);
    if (!s) {
      s = { session_id: id, first_seq: e.seq, first_at: e.at, agent: null, operations: 0 };
      sessions.set(id, s);
    }
    return s;
  };
  for (const e of events) {
    if (e.kind === 'session_started' && e.session_id !== null) {
      session(e.session_id, e).agent = e.data.agent;
    }
    const id = e.operation_id;
    if (id === null) continue;
    let r = rows.get(id);
    if (!r) {
      const stored = lookup(id);
      before.set(id, stored ? countKey(stored) : null);
      r = stored
        ? { ...stored, remote_refs: [...stored.remote_refs] }
        : {
            operation_id: id,
            first_seq: e.seq,
            last_seq: e.seq,
            opened_at: e.at,
            last_at: e.at,
            state: null,
            priority: 2,
            action: null,
            action_class: null,
            session_id: e.session_id,
            correlation_id: e.correlation_id,
            attempts: 0,
            delivered: 0,
            remote_refs: [],
            duplicate: false,
            fold: null,
          };
      if (!stored && e.session_id !== null) session(e.session_id, e).operations += 1;
      rows.set(id, r);
    }
    const row = r;
    const addRefs = (list: readonly string[]): void => {
      for (const ref of list) {
        if (row.remote_refs.includes(ref)) continue;
        row.remote_refs.push(ref);
        refs.push({ ref, operation_id: id });
      }
      if (row.remote_refs.length > 1) row.duplicate = true;
    };
    row.fold = foldEvent(row.fold, e);
    row.state = stateOf(row.fold);
    row.last_seq = e.seq;
    row.last_at = e.at;
    switch (e.kind) {
      case 'operation_opened':
        row.action = e.data.action;
        row.action_class = e.data.action_class;
        row.opened_at = e.at;
        break;
      case 'attempt_started':
        row.attempts += 1;
        break;
      case 'attempt_finished':
        if (e.data.dispatch_state !== 'not_sent') row.delivered += 1;
        if (e.data.response?.remote_ref) addRefs([e.data.response.remote_ref]);
        break;
      case 'observation_recorded':
        addRefs(e.data.remote_refs);
        if (e.data.matches > 1) row.duplicate = true;
        break;
      case 'operation_resolved':
        addRefs(e.data.remote_refs);
        break;
      default:
        break;
    }
    row.priority = priorityOf(row.state, row.duplicate);
  }
  const deltas = new Map<string, { key: CountKey; delta: number }>();
  const bump = (k: CountKey | null, d: number): void => {
    if (k === null) return;
    const t = keyText(k);
    const seen = deltas.get(t);
    if (seen) seen.delta += d;
    else deltas.set(t, { key: k, delta: d });
  };
  for (const r of rows.values()) {
    bump(before.get(r.operation_id) ?? null, -1);
    bump(countKey(r), +1);
  }
  return {
    rows: [...rows.values()],
    counts: [...deltas.values()].filter((d) => d.delta !== 0),
    sessions: [...sessions.values()],
    refs,
  };
}

// ---- the in-memory listing (memory store; the reference the SQL stores must agree with) -------

export interface MemoryListing extends OperationListing {
  apply(events: readonly StoredEvent[]): void;
  /** The stored state of an operation. */
  state(operationId: string): State | undefined;
  /** The stored fold of an operation (for `foldStates`). */
  fold(operationId: string): OperationFold | null | undefined;
}

export function memoryListing(): MemoryListing {
  const rows = new Map<string, OperationRow>();
  const byKey = new Map<string, Set<string>>();
  const sessions = new Map<string, SessionSummary>();
  const tag = (k: string, id: string): void => {
    const set = byKey.get(k) ?? new Set<string>();
    set.add(id);
    byKey.set(k, set);
  };
  return {
    apply(events) {
      const c = foldListing(events, (id) => rows.get(id));
      for (const r of c.rows) {
        if (!rows.has(r.operation_id) && r.correlation_id !== null)
          tag(`c:${r.correlation_id}`, r.operation_id);
        rows.set(r.operation_id, r);
      }
      for (const { ref, operation_id } of c.refs) tag(`r:${ref}`, operation_id);
      for (const s of c.sessions) {
        const seen = sessions.get(s.session_id);
        if (seen) {
          seen.operations += s.operations;
          if (s.agent !== null) seen.agent = s.agent;
        } else sessions.set(s.session_id, { ...s });
      }
    },
    state: (id) => rows.get(id)?.state ?? undefined,
    fold: (id) => rows.get(id)?.fold,
    operations(q) {
      let pool = [...rows.values()];
      const search = q.search?.trim();
      if (search) {
        const hits = new Set<string>([
          ...(rows.has(search) ? [search] : []),
          ...(byKey.get(`c:${search}`) ?? []),
          ...(byKey.get(`r:${search}`) ?? []),
        ]);
        if (hits.size === 0 && search.length >= 6)
          for (const id of rows.keys()) if (id.startsWith(search)) hits.add(id);
        pool = pool.filter((r) => hits.has(r.operation_id));
      }
      if (q.operation_ids) {
        const ids = new Set(q.operation_ids);
        pool = pool.filter((r) => ids.has(r.operation_id));
      }
      pool = pool.filter(
        (r) =>
          r.state !== null &&
          (q.action === undefined || r.action === q.action) &&
          (q.action_class === undefined || r.action_class === q.action_class) &&
          (q.session_id === undefined || r.session_id === q.session_id) &&
          (q.opened_from === undefined || r.opened_at >= q.opened_from) &&
          (q.opened_to === undefined || r.opened_at <= q.opened_to),
      );
      const counts = emptyCounts();
      for (const r of pool) counts[r.state!] += 1;
      const states = q.states && q.states.length > 0 ? new Set(q.states) : null;
      if (states) pool = pool.filter((r) => states.has(r.state!));
      const cmp = q.order === 'opened' ? compareOpened : compareTriage;
      pool.sort(cmp);
      return Promise.resolve({ ...cutPage(pool, q, cmp), total: pool.length, counts });
    },
    facets(limit = 200) {
      const live = [...rows.values()].filter((r) => r.state !== null);
      const distinct = (f: (r: OperationRow) => string | null): string[] =>
        [...new Set(live.map(f).filter((v): v is string => v !== null))].sort();
      return Promise.resolve({
        actions: distinct((r) => r.action),
        action_classes: distinct((r) => r.action_class),
        sessions: [...sessions.values()]
          .sort((a, b) => b.first_seq - a.first_seq)
          .slice(0, Math.max(0, limit))
          .map((s) => ({ ...s })),
      });
    },
  };
}

/**
 * One page of an ordered, filtered list (the reference pagination of every store). A `next` page
 * starts after its cursor, a `prev` page ends before its cursor; a cursor never names a position,
 * so pages stay put while new operations are appended.
 */
function cutPage(
  sorted: OperationRow[],
  q: OperationsQuery,
  cmp: (a: Cursor, b: Cursor) => number,
): Pick<OperationsPage, 'rows' | 'next' | 'prev'> {
  const limit = pageLimit(q);
  const after = parseCursor(q.after);
  const before = parseCursor(q.before);
  let rows: OperationRow[];
  let next: string | null = null;
  let prev: string | null = null;
  if (before && !after) {
    const earlier = sorted.filter((r) => cmp(r, before) < 0);
    rows = earlier.slice(-limit);
    if (earlier.length > limit) prev = cursorOf(rows[0]!);
    next = rows.length > 0 ? cursorOf(rows.at(-1)!) : (q.before ?? null);
  } else {
    const later = after ? sorted.filter((r) => cmp(r, after) > 0) : sorted;
    rows = later.slice(0, limit);
    if (later.length > limit) next = cursorOf(rows.at(-1)!);
    if (after) prev = rows.length > 0 ? cursorOf(rows[0]!) : (q.after ?? null);
  }
  return { rows: rows.map((r) => ({ ...r, remote_refs: [...r.remote_refs] })), next, prev };
}
