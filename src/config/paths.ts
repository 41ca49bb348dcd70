// Every relative path in candor.yaml means "relative to this file's folder", never to the process's
// working directory: MCP clients start the gateway from a folder of their choosing, and the ledger,
// the vault and its key must be the same files whichever folder that is. `loadConfig` applies this
// once, so every command that opens a configuration sees absolute paths.
import { isAbsolute, join, resolve } from 'node:path';
import { DEFAULT_APPROVALS_DIR } from '../approvals/lock.js';
import { parseLedgerUrl } from '../ledger/open.js';
import { DEFAULT_VAULT_PATH } from '../vault/file.js';
import type { GatewayConfig } from './schema.js';

const under = (dir: string, path: string): string => (isAbsolute(path) ? path : resolve(dir, path));

/** The approvals queue (and lock file) of a configuration in `dir`, when it names none. */
export const defaultApprovalsDir = (dir: string): string => join(dir, DEFAULT_APPROVALS_DIR);

/**
 * The configuration with every local path absolute against `dir`: the SQLite ledger (default
 * `./.candor/ledger.db` too), the vault file (default `./.candor/vault.json`) and its key file, the
 * log signing key, the approvals queue, and the working folder of stdio upstreams (default: `dir`
 * itself, so that `args: [./server.js]` finds the script beside the configuration).
 */
export function resolveConfigPaths(config: GatewayConfig, dir: string): GatewayConfig {
  const out: GatewayConfig = { ...config };
  const ledger = parseLedgerUrl(config.ledger, dir);
  if (ledger.ok && ledger.value.kind === 'sqlite') out.ledger = `sqlite:${ledger.value.path}`;
  if (config.vault)
    out.vault = {
      path: under(dir, config.vault.path ?? DEFAULT_VAULT_PATH),
      key_file: under(dir, config.vault.key_file),
    };
  if (config.audit?.log_key_file)
    out.audit = { ...config.audit, log_key_file: under(dir, config.audit.log_key_file) };
  if (config.approvals)
    out.approvals = {
      ...config.approvals,
      dir: config.approvals.dir ? under(dir, config.approvals.dir) : defaultApprovalsDir(dir),
    };
  if (config.policy)
    out.policy = Array.isArray(config.policy)
      ? config.policy.map((f) => under(dir, f))
      : { ...config.policy, files: config.policy.files.map((f) => under(dir, f)) };
  if (config.upstreams)
    out.upstreams = Object.fromEntries(
      Object.entries(config.upstreams).map(([name, u]) => [
        name,
        u.command === undefined ? u : { ...u, cwd: under(dir, u.cwd ?? '.') },
      ]),
    );
  return out;
}
