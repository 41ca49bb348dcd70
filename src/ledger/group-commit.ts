// Group commit: append() calls made while a flush is pending or running are queued and written by
// the next flush in ONE transaction, so they share one commit (and one fsync in `power` mode).
// Each batch keeps its own outcome: a batch that cannot be written fails alone.
import type { NewEvent, StoredEvent } from './events.js';

/** Writes the batches in one transaction; returns, per batch, its stored events or its error. */
export type FlushBatches = (
  batches: readonly (readonly NewEvent[])[],
) => Promise<(StoredEvent[] | Error)[]>;

interface Pending {
  events: readonly NewEvent[];
  resolve: (stored: StoredEvent[]) => void;
  reject: (err: Error) => void;
}

export interface GroupCommit {
  submit(events: readonly NewEvent[]): Promise<StoredEvent[]>;
  /** Resolves once every submitted batch has been flushed (or failed). */
  drain(): Promise<void>;
}

export function createGroupCommit(flush: FlushBatches): GroupCommit {
  let queue: Pending[] = [];
  let running: Promise<void> | null = null;

  const run = async (): Promise<void> => {
    // Let every append() issued in the current turn of the event loop join this group.
    await new Promise<void>((r) => setImmediate(r));
    while (queue.length > 0) {
      const group = queue;
      queue = [];
      let results: (StoredEvent[] | Error)[];
      try {
        results = await flush(group.map((p) => p.events));
      } catch (err) {
        const e = err instanceof Error ? err : new Error(String(err));
        results = group.map(() => e);
      }
      group.forEach((p, i) => {
        const r = results[i] ?? new Error('ledger: flush returned no result for a batch');
        if (r instanceof Error) p.reject(r);
        else p.resolve(r);
      });
    }
    running = null;
  };

  return {
    submit(events) {
      return new Promise<StoredEvent[]>((resolve, reject) => {
        queue.push({ events, resolve, reject });
        running ??= run();
      });
    },
    async drain() {
      while (running) await running;
    },
  };
}
