// A scripted approver for tests: answers from a queue and records every card it was shown. An empty
// queue answers `denied` (nobody said yes), so a missing script entry can never approve.
import type { ApprovalCard } from '../card.js';
import type { Approver, ApproverDecision, ApproverVerdict } from './approver.js';

export type ScriptedAnswer =
  ApproverDecision | ((card: ApprovalCard) => ApproverDecision | Promise<ApproverDecision>);

export interface ScriptedApprover extends Approver {
  /** Every card shown, in order. */
  readonly cards: ApprovalCard[];
  /** Appends answers to the queue. */
  push(...answers: ScriptedAnswer[]): void;
  /** Answers still queued. */
  pending(): number;
}

export function scriptedApprover(
  answers: readonly ScriptedAnswer[] = [],
  name = 'scripted',
): ScriptedApprover {
  const queue: ScriptedAnswer[] = [...answers];
  const cards: ApprovalCard[] = [];
  return {
    name,
    cards,
    push: (...more) => void queue.push(...more),
    pending: () => queue.length,
    async ask(card): Promise<ApproverVerdict> {
      cards.push(card);
      const next = queue.shift();
      const decision =
        next === undefined ? 'denied' : typeof next === 'function' ? await next(card) : next;
      return { decision, by: name };
    },
  };
}
