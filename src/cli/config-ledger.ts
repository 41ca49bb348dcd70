// The ledger a read-only command opens: `--ledger URL` when given, else the one `--config FILE`
// names (default ./candor.yaml, when it exists), else the default URL. So `candor ops list` beside a
// candor.yaml reads that gateway's ledger, wherever its path is relative to.
import { existsSync } from 'node:fs';
import { formatIssue } from '../config/locate.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import { DEFAULT_LEDGER_URL } from '../ledger/open.js';
import { CliUsageError } from './io.js';

/**
 * The configuration `--config FILE` names (default ./candor.yaml, when it exists), or null when
 * none is named and none is there. A configuration that does not load is a usage error.
 */
export async function configFrom(
  flags: Record<string, string | boolean>,
): Promise<LoadedConfig | null> {
  const explicit = typeof flags.config === 'string';
  const file = explicit ? (flags.config as string) : 'candor.yaml';
  if (!explicit && !existsSync(file)) return null;
  const loaded = await loadConfig(file);
  if (!loaded.ok)
    throw new CliUsageError(
      loaded.failure.code === 'unreadable'
        ? loaded.failure.message
        : loaded.failure.issues.map(formatIssue).join('\n'),
    );
  return loaded.value;
}

export async function ledgerUrlFrom(flags: Record<string, string | boolean>): Promise<string> {
  if (typeof flags.ledger === 'string') return flags.ledger;
  return (await configFrom(flags))?.config.ledger ?? DEFAULT_LEDGER_URL;
}
