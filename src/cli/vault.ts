// The vault of a loaded candor.yaml, opened as `serve` opens it, for commands that run actions
// (`recover`, `probe mcp`): a problem at a place in the file is one FILE:LINE:COL line each and
// exit 2; a vault that cannot be opened is one line and exit 3.
import type { LoadedConfig } from '../config/load.js';
import { formatIssue } from '../config/locate.js';
import type { CompositionError } from '../config/open.js';
import { openConfiguredVault } from '../config/vault-open.js';
import type { Redactor } from '../core/redact.js';
import type { Vault } from '../vault/index.js';
import { Exit, type CommandIo } from './io.js';

export async function openVaultOrExit(
  command: string,
  loaded: LoadedConfig,
  redactor: Redactor,
  io: CommandIo,
): Promise<{ ok: true; vault: Vault | undefined } | { ok: false; exit: number }> {
  const opened = await openConfiguredVault(loaded, redactor);
  if (opened.ok) return { ok: true, vault: opened.vault };
  if (opened.failure.code === 'config') {
    for (const issue of opened.failure.issues) io.err(`${formatIssue(issue)}\n`);
    return { ok: false, exit: Exit.usage };
  }
  io.err(`candor ${command}: ${opened.failure.message} (vault: in ${loaded.file})\n`);
  return { ok: false, exit: Exit.environment };
}

/**
 * The exit of a command whose composition (config/open.ts) failed to start, said as `serve` says
 * it: problems in the file one FILE:LINE:COL line each (exit 2), an unusable vault, ledger or
 * upstream one line (exit 3). Any other failure is rethrown as the step threw it.
 */
export function openFailed(
  command: string,
  error: CompositionError,
  where: { io: CommandIo; file: string; ledgerUrl: string },
): number {
  const { io } = where;
  const f = error.failure;
  if (f.issues) {
    for (const issue of f.issues) io.err(`${formatIssue(issue)}\n`);
    return Exit.usage;
  }
  switch (error.step) {
    case 'vault':
      io.err(`candor ${command}: ${f.message} (vault: in ${where.file})\n`);
      return Exit.environment;
    case 'ledger':
      io.err(
        `candor ${command}: cannot open ledger ${where.ledgerUrl}: ${f.reason ?? f.message}\n`,
      );
      return Exit.environment;
    case 'upstreams':
      io.err(`candor ${command}: ${f.message}\n`);
      return Exit.environment;
    default:
      throw error.cause instanceof Error ? error.cause : error;
  }
}
