// candor ops follow [--ledger URL] [--from SEQ] [--poll-ms N] [--json]
// Prints every new ledger event as it is committed, from any gateway, until Ctrl-C (SIGINT or
// SIGTERM: exit 0). On PostgreSQL the follower LISTENs on the ledger's channel (each append
// transaction NOTIFYs when it commits) and reads what is new; it also re-reads every 30 s in case
// a notification was lost with its connection. On SQLite it reads every `--poll-ms` (default
// 1000 ms): SQLite has no notifications.
import type { StoredEvent } from '../../ledger/events.js';
import type { LedgerStore } from '../../ledger/store.js';
import { Exit, type CommandIo } from '../io.js';

export const FOLLOW_USAGE = 'candor ops follow [--ledger URL] [--from SEQ] [--poll-ms N] [--json]';

export const FOLLOW_HELP = `usage: ${FOLLOW_USAGE}
  Prints each new ledger event as it is committed (by any gateway on the ledger), one line each:
  #SEQ TIME KIND OPERATION SUMMARY (--json: the event as one JSON line). Ctrl-C stops (exit 0).
  --from SEQ    start at this sequence number (1: the whole ledger); default: only new events
  --poll-ms N   SQLite: how often to look for new events (default 1000); PostgreSQL needs no
                polling: it listens (LISTEN/NOTIFY) and re-reads every 30 s as a safety net
`;

/** SQLite has no notifications: how often the follower reads by default. */
export const DEFAULT_POLL_MS = 1_000;
/** PostgreSQL: a re-read in case a notification was lost (its connection dropped). */
const SAFETY_MS = 30_000;
const PAGE = 1_000;

export interface FollowOptions {
  /** First seq to print; default the one after the head when following starts. */
  from?: number;
  pollMs: number;
  json: boolean;
  /** Names the ledger in the first line (never the URL: it may hold a password). */
  ledgerKind: string;
}

/** Follows until `signal` aborts; prints a first line on stderr once it is listening. */
export async function follow(
  store: LedgerStore,
  options: FollowOptions,
  io: CommandIo,
  signal: AbortSignal,
): Promise<number> {
  let next = options.from ?? (await headSeq(store)) + 1;
  // Set by the callbacks below (a holder, so the checks after `await stopped` see their writes).
  const state: { draining: Promise<void> | null; failure: Error | null } = {
    draining: null,
    failure: null,
  };
  let dirty = false;
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  const drain = (): void => {
    if (state.draining) {
      dirty = true;
      return;
    }
    state.draining = (async () => {
      try {
        do {
          dirty = false;
          for (;;) {
            const page = await store.read(next, PAGE);
            for (const e of page) io.out(options.json ? `${JSON.stringify(e)}\n` : eventLine(e));
            next += page.length;
            if (page.length < PAGE) break;
          }
        } while (dirty && !signal.aborted);
      } catch (error) {
        state.failure = error instanceof Error ? error : new Error(String(error));
        stop();
      } finally {
        state.draining = null;
      }
    })();
  };
  const unwatch = store.watch ? await store.watch(drain) : null;
  const timer = setInterval(drain, unwatch ? SAFETY_MS : options.pollMs);
  signal.addEventListener('abort', () => stop(), { once: true });
  if (signal.aborted) stop();
  io.err(
    `candor ops: following the ${options.ledgerKind} ledger from #${next} (${
      unwatch ? 'LISTEN/NOTIFY' : `polling every ${options.pollMs} ms`
    }); Ctrl-C stops\n`,
  );
  drain();
  await stopped;
  clearInterval(timer);
  await unwatch?.();
  await state.draining;
  if (state.failure) {
    io.err(`candor ops: ledger read failed: ${state.failure.message}\n`);
    return Exit.environment;
  }
  return Exit.ok;
}

/** The newest seq (0: empty), found with O(log n) one-record reads (seqs are 1, 2, 3, …). */
async function headSeq(store: LedgerStore): Promise<number> {
  const has = async (seq: number) => (await store.read(seq, 1)).length > 0;
  if (!(await has(1))) return 0;
  let lo = 1;
  let hi = 2;
  while (await has(hi)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await has(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** One line per event: what an operator watching a fleet wants to see at a glance. */
export function eventLine(e: StoredEvent): string {
  return `#${e.seq} ${new Date(e.at).toISOString()} ${e.kind} ${e.operation_id ?? e.session_id ?? '-'}${summary(e)}\n`;
}

function summary(e: StoredEvent): string {
  switch (e.kind) {
    case 'session_started':
      return ` owner ${e.data.owner}`;
    case 'session_ended':
      return ` ${e.data.reason}`;
    case 'operation_opened':
      return ` ${e.data.action} (${e.data.action_class}), owner ${e.data.owner}`;
    case 'attempt_started':
      return ` attempt ${e.data.number} by ${e.data.worker}`;
    case 'attempt_finished':
      return ` ${e.data.category}, ${e.data.dispatch_state}, retry ${e.data.retry}`;
    case 'observation_recorded':
      return ` ${e.data.source}: ${e.data.matches} match(es), state ${e.data.state_after}`;
    case 'approval_requested':
      return ` ${e.data.scope}`;
    case 'approval_decided':
      return ` ${e.data.decision} by ${e.data.approver}`;
    case 'policy_decided':
      return ` ${e.data.decision}${e.data.policy_ids.length ? ` by ${e.data.policy_ids.join(', ')}` : ''} (attempt ${e.data.attempt})`;
    case 'operation_resolved':
      return ` ${e.data.state} (${e.data.category}) by ${e.data.by}`;
    case 'operation_superseded':
      return ` by ${e.data.superseded_by}`;
    case 'owner_changed':
      return ` ${e.data.from} -> ${e.data.to} (${e.data.reason}, by ${e.data.by})`;
    case 'gate_changed':
      return ` ${e.data.locked ? 'locked' : 'unlocked'} by ${e.data.by}`;
    case 'checkpoint':
      return ` size ${e.data.size}`;
  }
  return '';
}
