// Opens the vault a configuration names, the same way for every command that runs actions
// (`serve`, `recover`): every secret it yields goes to the redactor, and every `vault:` reference
// of the configuration (credentials, SSH keys and secrets) must name an entry of the right type and
// binding, or the command stops at start with FILE:LINE:COL instead of failing per call later.
// `serve` may ask for missing entries to be reported instead (`missing: 'report'`): the gateway
// then starts, and only the calls that need an absent entry fail (local_failure, nothing sent);
// an entry of the wrong type or binding stays fatal (storing it again is a deliberate act).
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
  | {
      ok: true;
      vault: Vault | undefined;
      /** With `missing: 'report'`: entries the configuration names and the vault lacks. */
      missing: ConfigIssue[];
    }
  | { ok: false; failure: VaultOpenFailure };

export interface VaultOpenOptions {
  /** What an entry the vault does not hold is: fatal (default) or reported and started anyway. */
  missing?: 'fatal' | 'report';
}

export async function openConfiguredVault(
  loaded: LoadedConfig,
  redactor: Pick<Redactor, 'addSecret'>,
  options: VaultOpenOptions = {},
): Promise<VaultOpenResult> {
  const { config } = loaded;
  if (!config.vault) return { ok: true, vault: undefined, missing: [] };
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
  const locate = (m: { path: Array<string | number>; problem: string }): ConfigIssue =>
    loaded.locate
      ? loaded.locate(m.path, m.problem)
      : { file: loaded.file, line: 1, col: 1, field: m.path.join('.'), problem: m.problem };
  const report = options.missing === 'report';
  const fatal = problems.filter((m) => !(report && m.missing === true));
  if (fatal.length === 0)
    return { ok: true, vault, missing: problems.filter((m) => m.missing === true).map(locate) };
  vault.close();
  // Every problem, in file order: the missing entries too, so one run names all of them.
  const issues = problems
    .map(locate)
    .sort((a, b) => (a.file === b.file ? a.line - b.line || a.col - b.col : 0));
  return {
    ok: false,
    failure: { code: 'config', message: issues.map(formatIssue).join('\n'), issues },
  };
}
