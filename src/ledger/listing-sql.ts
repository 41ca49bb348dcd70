// The operations listing over SQL (SQLite and PostgreSQL share it; each passes its placeholder
// style and a query runner). Every page is a handful of index range scans, never an OFFSET: one
// scan per (priority bucket, state) pair the query can match, each `LIMIT page + 1`, merged here.
// Counts per state come from `ledger_op_counts` (kept on append) unless the query has a time range
// or a search, when they are counted over the matching rows.
import type { OperationState as State } from '../core/vocabulary.js';
import { decodeFold, encodeFold } from '../core/fold.js';
import {
  bucketsOf,
  compareOpened,
  compareTriage,
  cursorOf,
  emptyCounts,
  pageLimit,
  parseCursor,
  STATES,
  type Cursor,
  type ListingFacets,
  type OperationRow,
  type OperationsPage,
  type OperationsQuery,
  type Priority,
} from './listing.js';

export type SqlRow = Record<string, unknown>;

export interface SqlRunner {
  /** `?` (SQLite) or `$n` (PostgreSQL). */
  placeholder(n: number): string;
  run(sql: string, params: readonly unknown[]): Promise<SqlRow[]>;
}

export const ROW_COLUMNS =
  'operation_id, first_seq, last_seq, opened_at, last_at, state, priority, action, action_class, session_id, correlation_id, attempts, delivered, remote_refs, duplicate, fold';

export function rowFromSql(r: SqlRow): OperationRow {
  return {
    operation_id: String(r.operation_id),
    first_seq: Number(r.first_seq),
    last_seq: Number(r.last_seq),
    opened_at: Number(r.opened_at),
    last_at: Number(r.last_at),
    state: (r.state ?? null) as State | null,
    priority: Number(r.priority) as Priority,
    action: (r.action ?? null) as string | null,
    action_class: (r.action_class ?? null) as OperationRow['action_class'],
    session_id: (r.session_id ?? null) as string | null,
    correlation_id: (r.correlation_id ?? null) as string | null,
    attempts: Number(r.attempts),
    delivered: Number(r.delivered),
    remote_refs: JSON.parse(String(r.remote_refs)) as string[],
    duplicate: Number(r.duplicate) !== 0,
    fold: decodeFold(r.fold, (r.state ?? null) as State | null),
  };
}

/** Values of `ROW_COLUMNS` in order. */
export function rowValues(r: OperationRow): (string | number | null)[] {
  return [
    r.operation_id,
    r.first_seq,
    r.last_seq,
    r.opened_at,
    r.last_at,
    r.state,
    r.priority,
    r.action,
    r.action_class,
    r.session_id,
    r.correlation_id,
    r.attempts,
    r.delivered,
    JSON.stringify(r.remote_refs),
    r.duplicate ? 1 : 0,
    encodeFold(r.fold),
  ];
}

class Params {
  readonly values: unknown[] = [];
  constructor(private readonly runner: SqlRunner) {}
  add(v: unknown): string {
    this.values.push(v);
    return this.runner.placeholder(this.values.length);
  }
}

/** Operation ids a search names: exact id, correlation id or remote ref; else an id prefix. */
async function searchIds(
  db: SqlRunner,
  text: string,
  options: SqlListingOptions,
): Promise<string[]> {
  const p = new Params(db);
  const exact = await db.run(
    `SELECT operation_id FROM ledger_operations WHERE operation_id = ${p.add(text)}
     UNION SELECT operation_id FROM ledger_tags WHERE tag = ${p.add(`c:${text}`)} OR tag = ${p.add(`r:${text}`)}`,
    p.values,
  );
  if (exact.length > 0 || text.length < 6) return exact.map((r) => String(r.operation_id));
  const q = new Params(db);
  const prefixed = await db.run(
    `SELECT operation_id FROM ledger_operations
     WHERE operation_id${options.binary} >= ${q.add(text)}
       AND operation_id${options.binary} < ${q.add(text + options.prefixUpper)}
     ORDER BY operation_id${options.binary} LIMIT 1000`,
    q.values,
  );
  return prefixed.map((r) => String(r.operation_id)).filter((id) => id.startsWith(text));
}

export interface SqlListingOptions {
  /** Appended to a prefix to bound it from above in binary text order. */
  prefixUpper: string;
  /** Makes a text comparison binary (PostgreSQL: ` COLLATE "C"`; SQLite compares bytes). */
  binary: string;
  /**
   * SQLite's partial listing indexes (schema 5), named for `INDEXED BY` on the triage queries
   * they answer: with a filter such as `action = ?` the planner would otherwise walk every row of
   * that action, newest first, looking for the few that need attention. A time range's counts
   * are then taken from them too (rangeCounts).
   */
  partialIndexes?: { attention: string; rare: string };
}

export async function listOperationsSql(
  db: SqlRunner,
  q: OperationsQuery,
  options: SqlListingOptions,
): Promise<OperationsPage> {
  const limit = pageLimit(q);
  let ids: string[] | null = q.operation_ids ? [...new Set(q.operation_ids)] : null;
  const search = q.search?.trim();
  if (search) {
    const hits = await searchIds(db, search, options);
    ids = ids === null ? hits : ids.filter((id) => hits.includes(id));
  }
  if (ids !== null && ids.length === 0) {
    return { rows: [], total: 0, counts: emptyCounts(), next: null, prev: null };
  }
  const where = (p: Params): string[] => {
    const c = ['state IS NOT NULL'];
    if (q.action !== undefined) c.push(`action = ${p.add(q.action)}`);
    if (q.action_class !== undefined) c.push(`action_class = ${p.add(q.action_class)}`);
    if (q.session_id !== undefined) c.push(`session_id = ${p.add(q.session_id)}`);
    if (q.opened_from !== undefined) c.push(`opened_at >= ${p.add(q.opened_from)}`);
    if (q.opened_to !== undefined) c.push(`opened_at <= ${p.add(q.opened_to)}`);
    if (ids !== null) c.push(`operation_id IN (${ids.map((id) => p.add(id)).join(', ')})`);
    return c;
  };

  // Counts per state (without the state filter).
  const counts = emptyCounts();
  const cp = new Params(db);
  let countRows: SqlRow[];
  if (ids === null && q.opened_from === undefined && q.opened_to === undefined) {
    countRows = await db.run(
      `SELECT state, SUM(n) AS n FROM ledger_op_counts WHERE ${[
        'n <> 0',
        ...(q.action !== undefined ? [`action = ${cp.add(q.action)}`] : []),
        ...(q.action_class !== undefined ? [`action_class = ${cp.add(q.action_class)}`] : []),
        ...(q.session_id !== undefined ? [`session_id = ${cp.add(q.session_id)}`] : []),
      ].join(' AND ')} GROUP BY state`,
      cp.values,
    );
  } else if (ids === null && options.partialIndexes) {
    countRows = await rangeCounts(db, where, options.partialIndexes);
  } else if (ids === null) {
    // A time range: one index range count per (state, bucket), never a pass over every row.
    countRows = [];
    for (const s of STATES) {
      for (const b of bucketsOf(s)) {
        const p = new Params(db);
        const c = [...where(p), `state = ${p.add(s)}`, `priority = ${p.add(b)}`];
        const [r] = await db.run(
          `SELECT COUNT(*) AS n FROM ledger_operations WHERE ${c.join(' AND ')}`,
          p.values,
        );
        countRows.push({ state: s, n: r?.n ?? 0 });
      }
    }
  } else {
    countRows = await db.run(
      `SELECT state, COUNT(*) AS n FROM ledger_operations WHERE ${where(cp).join(' AND ')} GROUP BY state`,
      cp.values,
    );
  }
  for (const r of countRows) {
    const s = r.state as State;
    if (s in counts) counts[s] += Number(r.n);
  }
  const chosen = q.states && q.states.length > 0 ? [...new Set(q.states)] : null;
  const total = (chosen ?? STATES).reduce((n, s) => n + counts[s], 0);

  const after = parseCursor(q.after);
  const before = after ? null : parseCursor(q.before);
  const backward = before !== null;
  const cursor = after ?? before;
  const want = limit + 1;
  let fetched: OperationRow[];
  if (total === 0) {
    // The counts are over the same rows as the page: nothing to scan for.
    fetched = [];
  } else if (q.order === 'opened') {
    const p = new Params(db);
    const c = where(p);
    if (chosen) c.push(`state IN (${chosen.map((s) => p.add(s)).join(', ')})`);
    if (cursor)
      c.push(
        `(opened_at, first_seq) ${backward ? '<' : '>'} (${p.add(cursor.opened_at)}, ${p.add(cursor.first_seq)})`,
      );
    const dir = backward ? 'DESC' : 'ASC';
    fetched = (
      await db.run(
        `SELECT ${ROW_COLUMNS} FROM ledger_operations WHERE ${c.join(' AND ')}
         ORDER BY opened_at ${dir}, first_seq ${dir} LIMIT ${want}`,
        p.values,
      )
    ).map(rowFromSql);
  } else {
    fetched = await triageRows(db, where, chosen, counts, cursor, backward, want, options);
  }
  return paginate(
    fetched,
    limit,
    q,
    backward,
    q.order === 'opened' ? compareOpened : compareTriage,
    {
      total,
      counts,
    },
  );
}

/**
 * Counts per state of a time range (and filters) from SQLite's schema-5 indexes, without a
 * per-row expression over the range: every listed row is in the attention index (priority 0/1),
 * in the rare index (priority 2, not `succeeded`), or a plain success. So the range is counted
 * once (the opened index covers it), the two partial indexes are counted by state, and
 * `succeeded` is what remains plus the succeeded rows of the attention index.
 */
async function rangeCounts(
  db: SqlRunner,
  where: (p: Params) => string[],
  partial: NonNullable<SqlListingOptions['partialIndexes']>,
): Promise<SqlRow[]> {
  const all = new Params(db);
  const [total] = await db.run(
    `SELECT COUNT(*) AS n FROM ledger_operations WHERE ${where(all).join(' AND ')}`,
    all.values,
  );
  const a = new Params(db);
  const attention = await db.run(
    `SELECT state, COUNT(*) AS n FROM ledger_operations INDEXED BY ${partial.attention}
     WHERE ${[...where(a), 'priority < 2'].join(' AND ')} GROUP BY state`,
    a.values,
  );
  const r = new Params(db);
  const rare = await db.run(
    `SELECT state, COUNT(*) AS n FROM ledger_operations INDEXED BY ${partial.rare}
     WHERE ${[...where(r), 'priority = 2', "state <> 'succeeded'"].join(' AND ')} GROUP BY state`,
    r.values,
  );
  const counts = emptyCounts();
  for (const row of [...attention, ...rare]) counts[row.state as State] += Number(row.n);
  counts.succeeded =
    Number(total?.n ?? 0) - STATES.reduce((n, s) => (s === 'succeeded' ? n : n + counts[s]), 0);
  return STATES.map((s) => ({ state: s, n: counts[s] }));
}

/**
 * Up to `want` rows in triage order (reversed when `backward`), bucket by bucket. The bucket is
 * written as a literal, and a query that can be answered from a partial index of SQLite's listing
 * (schema 5: `priority < 2`; `priority = 2 AND state <> 'succeeded'`) carries that index's WHERE
 * terms word for word, which is how SQLite's planner recognises it may use the index (the terms
 * are implied by the others, so every store gets the same rows).
 */
async function triageRows(
  db: SqlRunner,
  where: (p: Params) => string[],
  chosen: State[] | null,
  counts: Record<State, number>,
  cursor: Cursor | null,
  backward: boolean,
  want: number,
  options: SqlListingOptions,
): Promise<OperationRow[]> {
  const buckets: Priority[] = backward ? [2, 1, 0] : [0, 1, 2];
  const out: OperationRow[] = [];
  for (const b of buckets) {
    if (out.length >= want) break;
    if (cursor && (backward ? b > cursor.priority : b < cursor.priority)) continue;
    // No state that can sit in this bucket has a row (the counts are over the same rows).
    if (!(chosen ?? STATES).some((s) => counts[s] > 0 && bucketsOf(s).includes(b))) continue;
    const parts: OperationRow[] = [];
    for (const s of chosen ?? [null]) {
      if (s !== null && (counts[s] === 0 || !bucketsOf(s).includes(b))) continue;
      const p = new Params(db);
      const c = where(p);
      c.push(`priority = ${b}`);
      const rare = b === 2 && s !== null && s !== 'succeeded';
      if (b < 2) c.push('priority < 2');
      if (s !== null) c.push(`state = ${p.add(s)}`);
      if (rare) c.push("state <> 'succeeded'");
      const partial = options.partialIndexes;
      const from =
        partial && (b < 2 || rare)
          ? `ledger_operations INDEXED BY ${b < 2 ? partial.attention : partial.rare}`
          : 'ledger_operations';
      if (cursor && cursor.priority === b)
        c.push(
          `(opened_at, first_seq) ${backward ? '>' : '<'} (${p.add(cursor.opened_at)}, ${p.add(cursor.first_seq)})`,
        );
      const dir = backward ? 'ASC' : 'DESC';
      const rows = await db.run(
        `SELECT ${ROW_COLUMNS} FROM ${from} WHERE ${c.join(' AND ')}
         ORDER BY opened_at ${dir}, first_seq ${dir} LIMIT ${want - out.length}`,
        p.values,
      );
      parts.push(...rows.map(rowFromSql));
    }
    parts.sort((x, y) => (backward ? -compareTriage(x, y) : compareTriage(x, y)));
    out.push(...parts.slice(0, want - out.length));
  }
  return out;
}

function paginate(
  fetched: OperationRow[],
  limit: number,
  q: OperationsQuery,
  backward: boolean,
  cmp: (a: Cursor, b: Cursor) => number,
  rest: Pick<OperationsPage, 'total' | 'counts'>,
): OperationsPage {
  const more = fetched.length > limit;
  const rows = fetched.slice(0, limit);
  rows.sort(cmp);
  let next: string | null;
  let prev: string | null;
  if (backward) {
    prev = more && rows.length > 0 ? cursorOf(rows[0]!) : null;
    next = rows.length > 0 ? cursorOf(rows.at(-1)!) : (q.before ?? null);
  } else {
    next = more && rows.length > 0 ? cursorOf(rows.at(-1)!) : null;
    const from = parseCursor(q.after) === null ? null : (q.after ?? null);
    prev = from === null ? null : rows.length > 0 ? cursorOf(rows[0]!) : from;
  }
  return { rows, next, prev, ...rest };
}

export async function listingFacetsSql(db: SqlRunner, sessions: number): Promise<ListingFacets> {
  const actions = await db.run(
    "SELECT DISTINCT action AS v FROM ledger_op_counts WHERE n <> 0 AND action <> '' ORDER BY v",
    [],
  );
  const classes = await db.run(
    "SELECT DISTINCT action_class AS v FROM ledger_op_counts WHERE n <> 0 AND action_class <> '' ORDER BY v",
    [],
  );
  const p = new Params(db);
  const ses = await db.run(
    `SELECT session_id, first_seq, first_at, agent, operations FROM ledger_sessions
     ORDER BY first_seq DESC LIMIT ${p.add(Math.max(0, Math.floor(sessions)))}`,
    p.values,
  );
  return {
    actions: actions.map((r) => String(r.v)),
    action_classes: classes.map((r) => String(r.v)),
    sessions: ses.map((r) => ({
      session_id: String(r.session_id),
      first_seq: Number(r.first_seq),
      first_at: Number(r.first_at),
      agent: (r.agent ?? null) as string | null,
      operations: Number(r.operations),
    })),
  };
}
