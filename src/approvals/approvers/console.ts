// The console approver: the gate puts the card in the approval queue (queue.ts) and polls for the
// answer a person gives with `candor approve yes|no ID`, until the card expires.
import { systemClock, type Clock } from '../../core/time.js';
import type { Approver } from './approver.js';
import { approvalQueue, type ApprovalQueue } from './queue.js';

export interface ConsoleApproverOptions {
  /** Queue directory; default `./.candor/approvals`. */
  dir?: string;
  queue?: ApprovalQueue;
  clock?: Clock;
  /** Injected so tests never sleep for real. */
  sleep?: (ms: number) => Promise<void>;
  poll_ms?: number;
}

export function consoleApprover(options: ConsoleApproverOptions = {}): Approver & {
  readonly queue: ApprovalQueue;
} {
  const queue = options.queue ?? approvalQueue(options.dir);
  const clock = options.clock ?? systemClock;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const pollMs = options.poll_ms ?? 250;
  return {
    name: 'console',
    queue,
    async ask(card, askOptions = {}) {
      const { signal } = askOptions;
      await queue.submit(card);
      try {
        for (;;) {
          // Withdrawn: the card leaves the queue, so a late `candor approve` finds nothing to approve.
          if (signal?.aborted) return { decision: 'expired', by: 'withdrawn' };
          const d = await queue.decisionFor(card.approval_id);
          if (d) {
            // A decision for another request approves nothing (the queue refuses to write one;
            // this holds for a file written by hand too).
            const bound =
              d.request_fingerprint === undefined ||
              d.request_fingerprint === card.request_fingerprint;
            return {
              decision: d.decision === 'approved' && !bound ? 'denied' : d.decision,
              by: d.by,
              ...(d.identity ? { identity: d.identity } : {}),
              ...(d.reason !== undefined ? { reason: d.reason } : {}),
              ...(d.request_fingerprint !== undefined
                ? { request_fingerprint: d.request_fingerprint }
                : {}),
            };
          }
          if (clock.now() > card.expires_at) {
            const standing = await queue.expire(card.approval_id, clock.now());
            return { decision: standing.decision, by: standing.by };
          }
          await sleep(pollMs);
        }
      } finally {
        await queue.remove(card.approval_id);
      }
    },
  };
}
