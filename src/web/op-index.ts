// The operations table's in-memory index: one small summary per operation, folded from the ledger
// in seq order with the same `nextState` the stores use. It is built by reading the ledger through
// the LedgerStore port (so SQLite, PostgreSQL and memory behave alike) and kept current by tailing
// `read(lastSeq + 1)`; a page of the table is then one pass over the summaries, never a query per
// row. Only ids, names and a few flags are kept: the page of one operation reads its own events.
import {
  OperationState,
  type ActionClass,
  type EventKind,
  type OperationState as State,
} from '../core/vocabulary.js';
import type { StoredEvent } from '../ledger/events.js';
import { nextState, UNRESOLVED_STATES } from '../ledger/projection.js';
import type { LedgerStore } from '../ledger/store.js';

export interface OpSummary {
  readonly id: string;
  /** Position in the index's columns. */
  readonly idx: number;
  session: string | null;
  correlation: string | null;
  action: string | null;
  cls: ActionClass | null;
  state: State | null;
  opened_at: number;
  last_at: number;
  last_seq: number;
  attempts: number;
  /** Attempts whose request may have reached the destination. */
  delivered: number;
  refs: readonly string[];
  /** Two or more remote records seen (responses, lookups or the resolution). */
  duplicate: boolean;
}

export interface OpFilter {
  states?: readonly State[];
  action?: string;
  cls?: string;
  session?: string;
  /** Opened at or after / before (ms since the epoch). */
  from?: number;
  to?: number;
  /** An operation id (or its prefix), a correlation id or a remote reference. */
  q?: string;
}

export interface OpPage {
  rows: OpSummary[];
  /** Matches of the whole filter. */
  total: number;
  /** Matches of the filter without its state part, per state (the state chips). */
  counts: Record<State, number>;
}

export interface CheckpointSummary {
  seq: number;
  at: number;
  size: number;
  root_hash: string;
  witnessed: boolean | null;
  /** Names on the signature lines of the note: the log first, then witness cosigners. */
  signers: string[];
}

export interface LiveEvent {
  seq: number;
  at: number;
  kind: EventKind;
  operation_id: string | null;
  session_id: string | null;
}

const NO_REFS: readonly string[] = [];

/** State codes of the `state` column (0: no state yet). */
const STATE_CODES: readonly (State | null)[] = [
  null,
  'open',
  'succeeded',
  'failed',
  'unknown',
  'cancelled',
  'duplicate_effect_confirmed',
];
const codeOf = (s: State | null): number => STATE_CODES.indexOf(s);

/**
 * Filterable fields as typed columns, so that a page is one tight loop over a million numbers
 * instead of a million objects. Names (actions, classes, sessions) are numbered as first seen.
 */
class Columns {
  n = 0;
  state = new Uint8Array(1024);
  prio = new Uint8Array(1024);
  action = new Uint32Array(1024);
  cls = new Uint32Array(1024);
  session = new Uint32Array(1024);
  opened = new Float64Array(1024);

  add(): number {
    if (this.n === this.state.length) {
      const grow = <T extends Uint8Array | Uint32Array | Float64Array>(a: T): T => {
        const b = new (a.constructor as new (n: number) => T)(a.length * 2);
        b.set(a);
        return b;
      };
      this.state = grow(this.state);
      this.prio = grow(this.prio);
      this.action = grow(this.action);
      this.cls = grow(this.cls);
      this.session = grow(this.session);
      this.opened = grow(this.opened);
    }
    return this.n++;
  }
}

class Names {
  readonly ids = new Map<string, number>();
  readonly names: string[] = [''];
  /** 0 is "none". */
  id(name: string | null): number {
    if (name === null) return 0;
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.names.length;
      this.names.push(name);
      this.ids.set(name, id);
    }
    return id;
  }
  name(id: number): string {
    return this.names[id]!;
  }
}

/** Duplicates first, then unresolved operations, then the rest; newest first within each. */
export function priority(o: OpSummary): 0 | 1 | 2 {
  if (o.duplicate || o.state === OperationState.duplicate_effect_confirmed) return 0;
  if (o.state !== null && UNRESOLVED_STATES.has(o.state)) return 1;
  return 2;
}

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

export class OperationIndex {
  /** In order of first appearance (so, of `operation_opened`): reversed, newest first. */
  readonly #ops: OpSummary[] = [];
  readonly #byId = new Map<string, OpSummary>();
  /** Correlation ids and remote refs → operations (usually one). */
  readonly #byKey = new Map<string, OpSummary | OpSummary[]>();
  readonly #sessions = new Map<string, { first_at: number; ops: number; agent: string | null }>();
  readonly #cols = new Columns();
  readonly #actions = new Names();
  readonly #classes = new Names();
  readonly #sessionNames = new Names();
  readonly #checkpoints: CheckpointSummary[] = [];
  #lastSeq = 0;

  get lastSeq(): number {
    return this.#lastSeq;
  }

  get size(): number {
    return this.#ops.length;
  }

  get(id: string): OpSummary | undefined {
    return this.#byId.get(id);
  }

  /** Distinct actions and action classes seen (for the filter menus). */
  facets(): { actions: string[]; classes: string[] } {
    return {
      actions: this.#actions.names.slice(1).sort(),
      classes: this.#classes.names.slice(1).sort(),
    };
  }

  checkpoints(): readonly CheckpointSummary[] {
    return this.#checkpoints;
  }

  sessions(): { id: string; first_at: number; ops: number; agent: string | null }[] {
    return [...this.#sessions]
      .map(([id, s]) => ({ id, ...s }))
      .sort((a, b) => b.first_at - a.first_at);
  }

  /** Reads everything after `lastSeq`; returns the new events in short form. */
  async catchUp(store: LedgerStore, chunk = 5_000): Promise<LiveEvent[]> {
    const out: LiveEvent[] = [];
    for (;;) {
      const events = await store.read(this.#lastSeq + 1, chunk);
      for (const e of events) {
        this.apply(e);
        out.push({
          seq: e.seq,
          at: e.at,
          kind: e.kind,
          operation_id: e.operation_id,
          session_id: e.session_id,
        });
      }
      if (events.length < chunk) return out;
    }
  }

  #key(k: string, o: OpSummary): void {
    const seen = this.#byKey.get(k);
    if (seen === undefined) this.#byKey.set(k, o);
    else if (Array.isArray(seen)) {
      if (!seen.includes(o)) seen.push(o);
    } else if (seen !== o) this.#byKey.set(k, [seen, o]);
  }

  #addRefs(o: OpSummary, refs: readonly string[]): void {
    const fresh = refs.filter((r) => !o.refs.includes(r));
    if (fresh.length === 0) return;
    o.refs = [...o.refs, ...fresh];
    for (const r of fresh) this.#key(r, o);
    if (o.refs.length > 1) o.duplicate = true;
  }

  apply(e: StoredEvent): void {
    this.#lastSeq = Math.max(this.#lastSeq, e.seq);
    if (e.kind === 'session_started' && e.session_id !== null) {
      const s = this.#sessions.get(e.session_id);
      if (s) s.agent = e.data.agent;
      else this.#sessions.set(e.session_id, { first_at: e.at, ops: 0, agent: e.data.agent });
    }
    if (e.kind === 'checkpoint') {
      this.#checkpoints.push({
        seq: e.seq,
        at: e.at,
        size: e.data.size,
        root_hash: e.data.root_hash,
        witnessed: e.data.witnessed ?? null,
        signers: e.data.note
          .split('\n')
          .filter((l) => l.startsWith('\u2014 '))
          .map((l) => l.split(' ')[1] ?? '?'),
      });
    }
    const id = e.operation_id;
    if (id === null) return;
    let o = this.#byId.get(id);
    if (!o) {
      const idx = this.#cols.add();
      o = {
        id,
        idx,
        session:
          e.session_id === null
            ? null
            : this.#sessionNames.name(this.#sessionNames.id(e.session_id)),
        correlation: e.correlation_id,
        action: null,
        cls: null,
        state: null,
        opened_at: e.at,
        last_at: e.at,
        last_seq: e.seq,
        attempts: 0,
        delivered: 0,
        refs: NO_REFS,
        duplicate: false,
      };
      this.#ops.push(o);
      this.#byId.set(id, o);
      this.#cols.session[idx] = this.#sessionNames.id(o.session);
      this.#cols.opened[idx] = e.at;
      if (e.correlation_id !== null) this.#key(e.correlation_id, o);
      if (o.session !== null) {
        const s = this.#sessions.get(o.session);
        if (s) s.ops += 1;
        else this.#sessions.set(o.session, { first_at: e.at, ops: 1, agent: null });
      }
    }
    o.state = nextState(o.state, e);
    o.last_at = e.at;
    o.last_seq = e.seq;
    this.#update(o, e);
    const c = this.#cols;
    c.state[o.idx] = codeOf(o.state);
    c.prio[o.idx] = priority(o);
  }

  #update(o: OpSummary, e: StoredEvent): void {
    switch (e.kind) {
      case 'operation_opened': {
        const a = this.#actions.id(e.data.action);
        const k = this.#classes.id(e.data.action_class);
        o.action = this.#actions.name(a);
        o.cls = this.#classes.name(k) as ActionClass;
        o.opened_at = e.at;
        this.#cols.action[o.idx] = a;
        this.#cols.cls[o.idx] = k;
        this.#cols.opened[o.idx] = e.at;
        return;
      }
      case 'attempt_started':
        o.attempts += 1;
        return;
      case 'attempt_finished':
        if (e.data.dispatch_state !== 'not_sent') o.delivered += 1;
        if (e.data.response?.remote_ref) this.#addRefs(o, [e.data.response.remote_ref]);
        return;
      case 'observation_recorded':
        this.#addRefs(o, e.data.remote_refs);
        if (e.data.matches > 1) o.duplicate = true;
        return;
      case 'operation_resolved':
        this.#addRefs(o, e.data.remote_refs);
        return;
      default:
        return;
    }
  }

  /** One page of the table: two passes over the columns (or over the search hits). */
  page(f: OpFilter, offset: number, limit: number): OpPage {
    const c = this.#cols;
    const code = (names: Names, v: string | undefined): number =>
      v === undefined ? -1 : (names.ids.get(v) ?? -2);
    const fa = code(this.#actions, f.action);
    const fc = code(this.#classes, f.cls);
    const fs = code(this.#sessionNames, f.session);
    const from = f.from ?? -Infinity;
    const to = f.to ?? Infinity;
    let mask = 0;
    for (const s of f.states ?? []) mask |= 1 << codeOf(s);
    const counts = new Uint32Array(STATE_CODES.length);
    const matches = (i: number, count: boolean): boolean => {
      if (fa !== -1 && c.action[i] !== fa) return false;
      if (fc !== -1 && c.cls[i] !== fc) return false;
      if (fs !== -1 && c.session[i] !== fs) return false;
      const t = c.opened[i]!;
      if (t < from || t > to) return false;
      const st = c.state[i]!;
      if (count) counts[st]! += 1;
      return mask === 0 || (mask & (1 << st)) !== 0;
    };
    const q = f.q?.trim();
    const candidates: number[] | null = q ? this.search(q).map((o) => o.idx) : null;
    const empty = fa === -2 || fc === -2 || fs === -2;
    const each = (visit: (i: number) => boolean | void): void => {
      if (empty) return;
      if (candidates) {
        for (const i of candidates) if (visit(i) === false) return;
      } else {
        for (let i = c.n - 1; i >= 0; i--) if (visit(i) === false) return;
      }
    };
    // Pass 1: counts and bucket sizes. Pass 2: only the rows of this page, so a deep page never
    // collects the rows before it.
    const size = [0, 0, 0];
    each((i) => {
      if (matches(i, true)) size[c.prio[i]!]! += 1;
    });
    const total = size[0]! + size[1]! + size[2]!;
    const end = Math.min(offset + limit, total);
    const want: [number, number][] = [0, 1, 2].map((p) => {
      const before = size.slice(0, p).reduce((a, b) => a + b, 0);
      return [Math.max(0, offset - before), Math.max(0, end - before)] as [number, number];
    });
    const picked: [number[], number[], number[]] = [[], [], []];
    const pos = [0, 0, 0];
    let left = Math.max(0, end - offset);
    if (left > 0)
      each((i) => {
        if (!matches(i, false)) return;
        const p = c.prio[i]! as 0 | 1 | 2;
        const at = pos[p]!++;
        const [lo, hi] = want[p]!;
        if (at >= lo && at < hi) {
          picked[p].push(i);
          left -= 1;
        }
        return left > 0;
      });
    const rows = [...picked[0], ...picked[1], ...picked[2]].map((i) => this.#ops[i]!);
    const out = emptyCounts();
    STATE_CODES.forEach((s, i) => {
      if (s !== null) out[s] = counts[i]!;
    });
    return { rows, total, counts: out };
  }

  /** Exact operation id, correlation id or remote ref; else operation ids with that prefix. */
  search(q: string): OpSummary[] {
    const hits = new Set<OpSummary>();
    const exact = this.#byId.get(q);
    if (exact) hits.add(exact);
    const keyed = this.#byKey.get(q);
    if (Array.isArray(keyed)) for (const o of keyed) hits.add(o);
    else if (keyed) hits.add(keyed);
    if (hits.size === 0 && q.length >= 6) {
      for (const o of this.#ops) if (o.id.startsWith(q)) hits.add(o);
    }
    return [...hits].sort((a, b) => b.opened_at - a.opened_at);
  }

  /** Every operation of one session, oldest first. */
  ofSession(session: string): OpSummary[] {
    return this.#ops.filter((o) => o.session === session);
  }
}
