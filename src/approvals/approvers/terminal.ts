// The terminal approver: shows the card on a TTY and reads y/N. Anything but "y"/"yes" is a no.
// Without a terminal nobody can answer, so it answers `denied` without asking (never a silent yes).
// Prompts are shown one at a time; a prompt still open at the card's expiry answers `expired`.
import { createInterface } from 'node:readline/promises';
import type { Readable, Writable } from 'node:stream';
import { systemClock, type Clock } from '../../core/time.js';
import { cardLines } from '../card.js';
import type { Approver, ApproverVerdict } from './approver.js';

export interface TerminalApproverOptions {
  input?: Readable & { isTTY?: boolean };
  output?: Writable;
  /** Default: `input.isTTY`. Tests pass true with plain streams. */
  interactive?: boolean;
  clock?: Clock;
  /** Recorded as `approval_decided.approver`. */
  who?: string;
}

export function terminalApprover(options: TerminalApproverOptions = {}): Approver {
  const input = options.input ?? process.stdin;
  const output = options.output ?? process.stderr;
  const interactive = options.interactive ?? input.isTTY === true;
  const clock = options.clock ?? systemClock;
  const who = options.who ?? 'tty';
  let turn: Promise<unknown> = Promise.resolve();

  async function askOnce(card: Parameters<Approver['ask']>[0]): Promise<ApproverVerdict> {
    if (!interactive) return { decision: 'denied', by: `${who}:no_terminal` };
    const now = clock.now();
    const left = card.expires_at - now;
    if (left <= 0) return { decision: 'expired', by: who };
    const rl = createInterface({ input, output, terminal: false });
    const timer = new AbortController();
    const t = setTimeout(() => timer.abort(), left);
    try {
      output.write(`\n${cardLines(card, now).join('\n')}\n`);
      const answer = await rl.question('Approve? [y/N] ', { signal: timer.signal });
      const yes = /^\s*(y|yes)\s*$/i.test(answer);
      return { decision: yes ? 'approved' : 'denied', by: who };
    } catch (err) {
      if (timer.signal.aborted) return { decision: 'expired', by: who };
      // The terminal went away (closed input): nobody answered yes.
      void err;
      return { decision: 'denied', by: `${who}:closed` };
    } finally {
      clearTimeout(t);
      rl.close();
    }
  }

  return {
    name: 'terminal',
    ask(card) {
      const mine = turn.then(() => askOnce(card));
      turn = mine.catch(() => undefined);
      return mine;
    },
  };
}
