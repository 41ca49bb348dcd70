// An operation's head: what an append needs of it (its state and fold, the seq of its last event),
// written in the commit by both durable stores (SQLite schema 7, PostgreSQL schema 6). The listing
// (listing.ts) is projected from the events after the commit; the heads never trail.
import type { StoredEvent } from './events.js';
import { foldEvent, stateOf, type OperationFold } from '../core/fold.js';
import type { OperationState } from '../core/vocabulary.js';

export interface HeadRow {
  state: OperationState | null;
  last_seq: number;
  fold: OperationFold | null;
}

export interface HeadChanges {
  /** Each touched operation's head after the records. */
  heads: Map<string, HeadRow>;
  /** The operations that had a head before the records (an update, not an insert). */
  existed: Set<string>;
}

/** Folds `records` into their operations' heads; `lookup` gives a head as stored before them. */
export function foldHeads(
  records: readonly StoredEvent[],
  lookup: (id: string) => HeadRow | undefined,
): HeadChanges {
  const heads = new Map<string, HeadRow>();
  const existed = new Set<string>();
  for (const e of records) {
    const id = e.operation_id;
    if (id === null) continue;
    let h = heads.get(id);
    if (!h) {
      const stored = lookup(id);
      if (stored) existed.add(id);
      h = stored ? { ...stored } : { state: null, last_seq: e.seq, fold: null };
      heads.set(id, h);
    }
    h.fold = foldEvent(h.fold, e);
    h.state = stateOf(h.fold);
    h.last_seq = e.seq;
  }
  return { heads, existed };
}
