// candor recover --config FILE [--ledger URL] [--json]: work through every unresolved operation
// after a crash or restart — look it up, retry it under an honoured idempotency key, make the first
// attempt of one that never sent anything, or mark it for a person — and say for each what was
// really done (SSH operations of `ssh.actions` are looked up through their remote markers, proxied
// MCP tools of `upstreams:` through their configured lookup tools, so the upstreams are started). Never
// mints a new operation id. Opens the vault as `serve` does. Exit 1 while any
// operation stays unresolved or needs a person.
import { formatIssue } from '../../config/locate.js';
import { loadConfig } from '../../config/load.js';
import type { RecoveryItem } from '../../engine/runtime.js';
import { composeRuntime } from '../../config/compose.js';
import { composition, CompositionError, openConfigured } from '../../config/open.js';
import { openFailed } from '../vault.js';
import { Exit, parseFlags, CliUsageError, type CommandIo } from '../io.js';

const LABEL: Readonly<Record<RecoveryItem['outcome'], string>> = {
  found_by_lookup: 'found by lookup',
  retried_under_key: 'retried',
  first_attempt_made: 'first attempt made',
  needs_person: 'needs a person',
  left_to_owner: 'left to its owner',
};

/** The outcome's label and the detail, the label once (some details already start with it). */
export function said(i: Pick<RecoveryItem, 'outcome' | 'detail'>): string {
  const label = LABEL[i.outcome];
  return i.detail.toLowerCase().startsWith(label) ? i.detail : `${label}: ${i.detail}`;
}

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    config: 'string',
    ledger: 'string',
    json: 'boolean',
  });
  if (positional.length > 0) throw new CliUsageError(`unexpected argument "${positional[0]}"`);
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
  // The composition root `serve` uses, without the MCP server around it: the vault as `serve` opens
  // it (`vault:` references are checked at start, credentials resolve, and its lock holds), the
  // ledger, and the upstreams when `upstreams:` names any (operations of proxied MCP tools are
  // looked up and retried through them; the MCP client is loaded only then).
  const c = composition((line) => io.err(`candor recover: ${line}\n`));
  try {
    const opened = await openConfigured(c, {
      loaded: loaded.value,
      ...(typeof flags.ledger === 'string' ? { ledgerUrl: flags.ledger } : {}),
      mustExist: true,
      log: (line) => io.err(`${line}\n`),
    });
    const { runtime } = await c.open(
      'runtime',
      () =>
        composeRuntime({
          agent: 'candor recover',
          requested_via: 'person',
          loaded: loaded.value,
          ledger: opened.ledger,
          env: process.env,
          redactor: opened.redactor,
          ...(opened.vault ? { vault: opened.vault } : {}),
          ...(opened.upstreams ? { upstreams: opened.upstreams } : {}),
        }),
      // A recovery that stopped half-way still ends its session (its lease released).
      async ({ runtime }) => {
        await runtime.endSession('recovery finished');
        await runtime.close();
      },
    );
    const items = await runtime.recover();
    await runtime.endSession('recovery finished');
    const open = items.filter((i) => i.outcome === 'needs_person' || i.unresolved);
    if (flags.json) {
      io.out(`${JSON.stringify(items, null, 2)}\n`);
    } else {
      for (const i of items) {
        io.out(
          `${i.operation_id}  ${i.action ?? '?'}  ${said(i)}  [${i.envelope.category} / ${i.envelope.retry}]\n`,
        );
      }
      io.out(
        `${items.length} unresolved operation(s) worked through: ${items.length - open.length} settled, ${open.length} need a person\n`,
      );
    }
    return open.length > 0 ? Exit.check_failed : Exit.ok;
  } catch (error) {
    if (!(error instanceof CompositionError)) throw error;
    return openFailed('recover', error, {
      io,
      file: loaded.value.file,
      ledgerUrl: typeof flags.ledger === 'string' ? flags.ledger : loaded.value.config.ledger,
    });
  } finally {
    await c.close();
  }
}
