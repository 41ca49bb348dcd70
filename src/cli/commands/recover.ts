// candor recover --config FILE [--ledger URL] [--json]: work through every unresolved operation
// after a crash or restart — look it up, retry it under an honoured idempotency key, make the first
// attempt of one that never sent anything, or mark it for a person — and say for each what was
// really done (SSH operations of `ssh.actions` are looked up through their remote markers, proxied
// MCP tools of `upstreams:` through their configured lookup tools, so the upstreams are started). Never
// mints a new operation id. Opens the vault as `serve` does. Exit 1 while any
// operation stays unresolved or needs a person.
import { formatIssue } from '../../config/locate.js';
import { loadConfig } from '../../config/load.js';
import { openLedger } from '../../ledger/open.js';
import type { RecoveryItem, Runtime } from '../../engine/runtime.js';
import { createRedactor } from '../../core/redact.js';
import { composeRuntime } from '../../config/compose.js';
import type { StartedUpstreams } from '../../config/upstreams.js';
import { openVaultOrExit } from '../vault.js';
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
  const { config } = loaded.value;
  const redactor = createRedactor();
  // The vault as `serve` opens it: `vault:` references are checked at start, credentials
  // resolve, and its lock holds.
  const vaultOpened = await openVaultOrExit('recover', loaded.value, redactor, io);
  if (!vaultOpened.ok) return vaultOpened.exit;
  const vault = vaultOpened.vault;
  const url = typeof flags.ledger === 'string' ? flags.ledger : config.ledger;
  const opened = await openLedger(url, { mustExist: true });
  if (!opened.ok) {
    io.err(`candor recover: cannot open ledger ${url}: ${opened.failure.message}\n`);
    return Exit.environment;
  }
  const ledger = opened.value;
  // Operations of proxied MCP tools are looked up (and retried) through their upstreams; the MCP
  // client is loaded only when `upstreams:` names one.
  let upstreams: StartedUpstreams | undefined;
  if (Object.keys(config.upstreams ?? {}).length > 0) {
    const { startUpstreams } = await import('../../config/upstreams.js');
    const started = await startUpstreams(config, {
      ...(vault ? { vault } : {}),
      onSecret: (s) => void redactor.addSecret(s),
      log: (line) => io.err(`${redactor.redactString(line)}\n`),
    });
    if (!started.ok) {
      vault?.close();
      await ledger.close();
      io.err(`candor recover: ${loaded.value.file}: ${started.message}\n`);
      return Exit.environment;
    }
    upstreams = started.value;
  }
  let runtime: Runtime | undefined;
  try {
    // The composition root `serve` uses, without the MCP server around it.
    ({ runtime } = composeRuntime({
      agent: 'candor recover',
      requested_via: 'person',
      loaded: loaded.value,
      ledger,
      env: process.env,
      redactor,
      ...(vault ? { vault } : {}),
      ...(upstreams ? { upstreams } : {}),
    }));
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
  } finally {
    await ledger.close();
    await runtime?.close();
    await upstreams?.close();
  }
}
