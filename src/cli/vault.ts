// The vault of a loaded candor.yaml, opened as `serve` opens it, for commands that run actions
// (`recover`, `probe mcp`): a problem at a place in the file is one FILE:LINE:COL line each and
// exit 2; a vault that cannot be opened is one line and exit 3.
import type { LoadedConfig } from '../config/load.js';
import { formatIssue } from '../config/locate.js';
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
