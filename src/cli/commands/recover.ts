// candor recover --config FILE [--ledger URL] [--json]: settle every unresolved operation after a
// crash or restart — reconcile it, retry it under an honoured idempotency key, or mark it for a
// person. Never mints a new operation id. Exit 1 when some operation needs a person.
import { formatIssue } from '../../config/locate.js';
import { loadConfig } from '../../config/load.js';
import { closeHttpPools } from '../../http/transport.js';
import { openLedger } from '../../ledger/open.js';
import { composeGateway } from '../../mcp/start.js';
import { Exit, parseFlags, UsageError, type CommandIo } from '../io.js';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    config: 'string',
    ledger: 'string',
    json: 'boolean',
  });
  if (positional.length > 0) throw new UsageError(`unexpected argument "${positional[0]}"`);
  const file = typeof flags.config === 'string' ? flags.config : 'candor.yaml';
  const loaded = await loadConfig(file);
  if (!loaded.ok) {
    if (loaded.failure.code === 'unreadable') {
      io.err(
        `candor recover: ${loaded.failure.message} (the actions come from --config FILE, default candor.yaml)\n`,
      );
      return Exit.environment;
    }
    for (const issue of loaded.failure.issues) io.err(`${formatIssue(issue)}\n`);
    return Exit.usage;
  }
  const url = typeof flags.ledger === 'string' ? flags.ledger : loaded.value.config.ledger;
  const opened = await openLedger(url, { mustExist: true });
  if (!opened.ok) {
    io.err(`candor recover: cannot open ledger ${url}: ${opened.failure.message}\n`);
    return Exit.environment;
  }
  const ledger = opened.value;
  try {
    const { runtime } = composeGateway({ loaded: loaded.value, ledger, env: process.env });
    const items = await runtime.recover();
    await runtime.endSession('recovery finished');
    if (flags.json) {
      io.out(`${JSON.stringify(items, null, 2)}\n`);
    } else {
      for (const i of items) {
        io.out(
          `${i.operation_id}  ${i.outcome.padEnd(12)} ${i.envelope.category} / ${i.envelope.retry}  ${i.envelope.message}\n`,
        );
      }
      const people = items.filter((i) => i.outcome === 'needs_person').length;
      io.out(
        `${items.length} unresolved operation(s): ${items.length - people} settled or retried, ${people} need a person\n`,
      );
    }
    return items.some((i) => i.outcome === 'needs_person') ? Exit.check_failed : Exit.ok;
  } finally {
    await ledger.close();
    await closeHttpPools();
  }
}
