// Opens the vault a configuration names, the same way for every command that runs actions
// (`serve`, `recover`): every secret it yields goes to the redactor, and every `vault:` reference
// of the configuration (credentials, SSH keys and secrets) must name an entry of the right type and
// binding, or the command stops at start with FILE:LINE:COL instead of failing per call later.
import type { Redactor } from '../engine/ports.js';
import { openVault, type Vault } from '../vault/index.js';
import { missingVaultRefs } from './credentials.js';
import type { LoadedConfig } from './load.js';
import { formatIssue, type ConfigIssue } from './locate.js';
import { sshVaultProblems } from './ssh-runtime.js';

export type VaultOpenFailure =
  /** The vault could not be opened or listed (environment: exit 3). */
  | { code: 'vault'; message: string }
  /** References in the configuration that the vault cannot satisfy (usage: exit 2). */
  | { code: 'config'; message: string; issues: ConfigIssue[] };

export type VaultOpenResult =
  { ok: true; vault: Vault | undefined } | { ok: false; failure: VaultOpenFailure };

export async function openConfiguredVault(
  loaded: LoadedConfig,
  redactor: Pick<Redactor, 'addSecret'>,
): Promise<VaultOpenResult> {
  const { config } = loaded;
  if (!config.vault) return { ok: true, vault: undefined };
  const v = await openVault(
    { kind: 'key_file', path: config.vault.key_file },
    {
      ...(config.vault.path ? { path: config.vault.path } : {}),
      onSecret: (s) => void redactor.addSecret(s),
    },
  );
  if (!v.ok)
    return { ok: false, failure: { code: 'vault', message: `vault: ${v.failure.message}` } };
  const vault = v.value;
  const listing = await vault.list();
  if (!listing.ok) {
    vault.close();
    return { ok: false, failure: { code: 'vault', message: `vault: ${listing.failure.message}` } };
  }
  const problems = [
    ...missingVaultRefs(config, new Set(listing.value.credentials.map((c) => c.name))),
    ...sshVaultProblems(config, listing.value.credentials),
  ];
  if (problems.length === 0) return { ok: true, vault };
  vault.close();
  const issues = problems.map((m) =>
    loaded.locate
      ? loaded.locate(m.path, m.problem)
      : { file: loaded.file, line: 1, col: 1, field: m.path.join('.'), problem: m.problem },
  );
  return {
    ok: false,
    failure: { code: 'config', message: issues.map(formatIssue).join('\n'), issues },
  };
}
