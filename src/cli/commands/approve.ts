// candor approve list|show|yes|no|watch|lock|unlock [--dir D] — the approval console.
// Pending requests come from gates using the console approver (src/approvals/approvers/queue.ts);
// `yes`/`no` answer one by id (or a unique prefix of at least 8 characters). `lock`/`unlock` flip
// the lock file used when no vault is configured (with a vault, use `candor vault lock|unlock`).
// The decision is recorded with the local OS user as the approver (`--by NAME` names someone else)
// and `--reason` as the justification; under `approvals.four_eyes` the caller that asked for the
// call cannot approve it.
// Exit: 0 done, 1 no such pending request / already answered / expired / refused, 2 usage.
import {
  approvalQueue,
  cardLines,
  DEFAULT_APPROVALS_DIR,
  lockFile,
  type ApprovalCard,
} from '../../approvals/index.js';
import { approverLabel, localApprover } from '../../approvals/identity.js';
import { configFrom } from '../config-ledger.js';
import { defaultApprovalsDir } from '../../config/paths.js';
import { Exit, parseFlags, CliUsageError, type CommandIo } from '../io.js';

const USAGE =
  'usage: candor approve list [--json] | show ID | yes ID | no ID [--reason TEXT] | watch [--interval MS] | lock | unlock   [--config FILE | --dir DIR] [--by NAME]';

export async function run(
  args: string[],
  io: { out: (s: string) => void; err: (s: string) => void },
): Promise<number> {
  try {
    return await dispatch(args, io);
  } catch (err) {
    if (!(err instanceof CliUsageError)) throw err;
    io.err(`candor approve: ${err.message}\n`);
    return Exit.usage;
  }
}

async function dispatch(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    dir: 'string',
    config: 'string',
    by: 'string',
    reason: 'string',
    json: 'boolean',
    interval: 'string',
    help: 'boolean',
  });
  if (flags.help === true) {
    io.out(`${USAGE}\n`);
    return Exit.ok;
  }
  // `--dir` alone names a queue without reading any configuration (as before).
  const settings =
    typeof flags.dir === 'string' && typeof flags.config !== 'string'
      ? { dir: flags.dir, four_eyes: false }
      : await approvalsFrom(flags);
  const dir = typeof flags.dir === 'string' ? flags.dir : settings.dir;
  if (flags.by === '') throw new CliUsageError('--by needs a name');
  const identity = localApprover(typeof flags.by === 'string' ? flags.by : undefined);
  // `--by` is recorded as given (as before); otherwise `console:<OS user>`.
  const by = typeof flags.by === 'string' ? flags.by : approverLabel(identity);
  const queue = approvalQueue(dir);
  const [sub, ...rest] = positional;
  const wantArgs = (n: number): void => {
    if (rest.length !== n)
      throw new CliUsageError(`${sub ?? ''} takes ${n === 0 ? 'no argument' : 'one ID'}; ${USAGE}`);
  };
  switch (sub) {
    case 'list': {
      wantArgs(0);
      const now = Date.now();
      const cards = await queue.pending(now);
      if (flags.json === true) {
        io.out(`${JSON.stringify(cards, null, 2)}\n`);
      } else if (cards.length === 0) {
        io.out('no pending approval requests\n');
      } else {
        for (const c of cards) io.out(`${cardLines(c, now).join('\n')}\n\n`);
      }
      return Exit.ok;
    }
    case 'show': {
      wantArgs(1);
      const found = await queue.find(rest[0]!);
      if ('failure' in found) {
        io.err(`candor approve: no pending approval request "${rest[0]!}" (${found.failure})\n`);
        return Exit.check_failed;
      }
      io.out(`${JSON.stringify(found.card, null, 2)}\n`);
      return Exit.ok;
    }
    case 'yes':
    case 'no': {
      wantArgs(1);
      const result = await queue.decide(
        rest[0]!,
        sub === 'yes' ? 'approved' : 'denied',
        by,
        Date.now(),
        {
          identity,
          reason: typeof flags.reason === 'string' ? flags.reason : null,
          four_eyes: settings.four_eyes,
        },
      );
      if (!result.ok) {
        io.err(`candor approve: ${result.failure.message}\n`);
        return Exit.check_failed;
      }
      const c = result.value.card;
      io.out(
        `${sub === 'yes' ? 'approved' : 'denied'} ${c.approval_id}: ${c.action} (${c.scope}) for operation ${c.operation_id}\n`,
      );
      return Exit.ok;
    }
    case 'watch': {
      wantArgs(0);
      const interval = flags.interval === undefined ? 500 : Number(flags.interval);
      if (!Number.isInteger(interval) || interval < 50)
        throw new CliUsageError('--interval must be an integer of at least 50 (ms)');
      await watch(queue.pending.bind(queue), interval, io);
      return Exit.ok;
    }
    case 'lock':
    case 'unlock': {
      wantArgs(0);
      const lf = lockFile(dir);
      if (sub === 'lock') {
        const r = await lf.lock(by, Date.now());
        io.out(r.changed ? `gate locked (${lf.path})\n` : 'gate was already locked\n');
      } else {
        const r = await lf.unlock();
        io.out(
          r.changed
            ? `gate unlocked (was locked by ${r.by ?? 'unknown'})\n`
            : 'gate was not locked\n',
        );
      }
      return Exit.ok;
    }
    default:
      throw new CliUsageError(sub === undefined ? USAGE : `unknown subcommand "${sub}"; ${USAGE}`);
  }
}

/** Prints each new pending request once, until SIGINT/SIGTERM. */
async function watch(
  pending: (now: number) => Promise<ApprovalCard[]>,
  intervalMs: number,
  io: CommandIo,
): Promise<void> {
  const seen = new Set<string>();
  let stop = false;
  const onSignal = (): void => {
    stop = true;
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  io.out('watching for approval requests (Ctrl-C to stop); answer with candor approve yes|no ID\n');
  try {
    while (!stop) {
      const now = Date.now();
      for (const c of await pending(now)) {
        if (seen.has(c.approval_id)) continue;
        seen.add(c.approval_id);
        io.out(`${cardLines(c, now).join('\n')}\n\n`);
      }
      await new Promise<void>((r) => setTimeout(r, intervalMs));
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/**
 * The queue of the gateway `--config FILE` (default ./candor.yaml, when it exists) configures: its
 * approvals.dir, or .candor/approvals beside it; without a configuration ./.candor/approvals. With
 * it, whether the four-eyes rule holds.
 */
async function approvalsFrom(
  flags: Record<string, string | boolean>,
): Promise<{ dir: string; four_eyes: boolean }> {
  const loaded = await configFrom(flags);
  if (!loaded) return { dir: DEFAULT_APPROVALS_DIR, four_eyes: false };
  return {
    dir: loaded.config.approvals?.dir ?? defaultApprovalsDir(loaded.dir!),
    four_eyes: loaded.config.approvals?.four_eyes ?? false,
  };
}
