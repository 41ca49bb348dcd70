// What the view keeps in memory: only its position in the ledger. Pages ask the store's operations
// listing (kept by the store on append, src/ledger/listing.ts), so starting the view costs a few
// indexed reads however long the ledger is. New events are read from `position + 1` and pushed to
// open pages (Server-Sent Events); checkpoints are collected when the audit page asks for them.
import type { EventKind } from '../core/vocabulary.js';
import type { StoredEvent } from '../ledger/events.js';
import type { LedgerStore } from '../ledger/store.js';

export interface LiveEvent {
  seq: number;
  at: number;
  kind: EventKind;
  operation_id: string | null;
  session_id: string | null;
}

export interface CheckpointSummary {
  seq: number;
  at: number;
  size: number;
  root_hash: string;
  witnessed: boolean | null;
  /** Names on the signature lines of the note: the log first, then witness cosigners. */
  signers: string[];
  /** Why the configured witness did not cosign, and its code (`fork`: a possible fork/rollback). */
  witness_problem: string | null;
  witness_problem_code: string | null;
  /** With `fork`: the size of the tree of this log the witness had already cosigned. */
  witness_size: number | null;
}

/** The seq of the last stored event (0: empty), by doubling then bisecting `read(seq, 1)`. */
export async function headSeq(store: LedgerStore): Promise<number> {
  const exists = async (seq: number): Promise<boolean> => (await store.read(seq, 1)).length > 0;
  if (!(await exists(1))) return 0;
  let lo = 1;
  let hi = 2;
  while (await exists(hi)) {
    lo = hi;
    hi *= 2;
  }
  // exists(lo) and not exists(hi).
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await exists(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

const short = (e: StoredEvent): LiveEvent => ({
  seq: e.seq,
  at: e.at,
  kind: e.kind,
  operation_id: e.operation_id,
  session_id: e.session_id,
});

export class LiveTail {
  #lastSeq: number;

  constructor(lastSeq: number) {
    this.#lastSeq = lastSeq;
  }

  static async start(store: LedgerStore): Promise<LiveTail> {
    return new LiveTail(await headSeq(store));
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  /** Reads everything after `lastSeq`; returns the new events in short form. */
  async catchUp(store: LedgerStore, chunk = 5_000): Promise<LiveEvent[]> {
    const out: LiveEvent[] = [];
    for (;;) {
      const events = await store.read(this.#lastSeq + 1, chunk);
      for (const e of events) out.push(short(e));
      const last = events.at(-1);
      if (last) this.#lastSeq = Math.max(this.#lastSeq, last.seq);
      if (events.length < chunk) return out;
    }
  }
}

/** The checkpoints stored in the ledger, read on demand and then only from where it stopped. */
export class CheckpointScan {
  readonly #found: CheckpointSummary[] = [];
  #scanned = 0;

  async update(store: LedgerStore, chunk = 5_000): Promise<readonly CheckpointSummary[]> {
    for (;;) {
      const events = await store.read(this.#scanned + 1, chunk);
      for (const e of events) {
        if (e.kind !== 'checkpoint') continue;
        this.#found.push({
          seq: e.seq,
          at: e.at,
          size: e.data.size,
          root_hash: e.data.root_hash,
          witnessed: e.data.witnessed ?? null,
          witness_problem: e.data.witness_problem ?? null,
          witness_problem_code: e.data.witness_problem_code ?? null,
          witness_size: e.data.witness_size ?? null,
          signers: e.data.note
            .split('\n')
            .filter((l) => l.startsWith('\u2014 '))
            .map((l) => l.split(' ')[1] ?? '?'),
        });
      }
      const last = events.at(-1);
      if (last) this.#scanned = last.seq;
      if (events.length < chunk) return this.#found;
    }
  }
}
