// candor serve --config FILE [--http PORT] [--ledger URL]: the MCP gateway (stdio by default).
// In stdio mode stdout carries only MCP messages; everything for people goes to stderr.
// At start it names every `env:` credential whose variable is unset and every `vault:` entry the
// vault does not hold, one FILE:LINE:COL line each, and serves anyway (the calls that need one fail
// as local_failure, nothing sent, and say which). `--strict` makes them fatal: an unset variable
// exits 3 before anything opens, a missing vault entry exits 2. A vault entry of the wrong type or
// binding is always fatal (exit 2).
import { formatIssue, type ConfigIssue } from '../../config/locate.js';
import { loadConfig, type LoadedConfig } from '../../config/load.js';
import { envNeeds } from '../../config/vault-needs.js';
import { startGateway } from '../../mcp/start.js';
import { Exit, parseFlags, CliUsageError } from '../io.js';
import { cliCommand, shellWord } from '../invocation.js';
import { version } from '../version.js';

export async function run(
  args: string[],
  io: { out: (s: string) => void; err: (s: string) => void },
): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    config: 'string',
    http: 'string',
    ledger: 'string',
    strict: 'boolean',
  });
  if (positional.length > 0) throw new CliUsageError(`unexpected argument "${positional[0]}"`);
  const file = flags['config'];
  if (typeof file !== 'string') throw new CliUsageError('--config FILE is required');
  let httpPort: number | undefined;
  if (typeof flags['http'] === 'string') {
    httpPort = Number(flags['http']);
    if (!Number.isInteger(httpPort) || httpPort < 0 || httpPort > 65535)
      throw new CliUsageError(`--http needs a port number (0-65535), not "${flags['http']}"`);
  }
  const loaded = await loadConfig(file);
  if (!loaded.ok) {
    if (loaded.failure.code === 'unreadable') {
      io.err(`candor serve: ${loaded.failure.message}\n`);
      return Exit.environment;
    }
    for (const issue of loaded.failure.issues) io.err(`${formatIssue(issue)}\n`);
    return Exit.usage;
  }
  const unset = unsetVariables(loaded.value, process.env);
  for (const line of unset) io.err(`${line}\n`);
  if (unset.length > 0 && flags.strict === true) {
    io.err(`candor serve: --strict: ${unset.length} credential(s) unavailable; not starting\n`);
    return Exit.environment;
  }
  const cli = cliCommand();
  const started = await startGateway({
    loaded: loaded.value,
    ...(flags.strict === true
      ? {}
      : {
          onMissingVaultEntries: (issues) => {
            for (const issue of issues)
              io.err(`${formatIssue(missingEntryIssue(issue, cli, loaded.value.file))}\n`);
          },
        }),
    ...(typeof flags['ledger'] === 'string' ? { ledgerUrl: flags['ledger'] } : {}),
    ...(httpPort !== undefined ? { httpPort } : {}),
    version: version(),
    log: (line) => io.err(`${line}\n`),
  });
  if (!started.ok) {
    if (started.failure.issues) {
      for (const issue of started.failure.issues) io.err(`${formatIssue(issue)}\n`);
      return Exit.usage;
    }
    io.err(`candor serve: ${started.failure.message}\n`);
    return Exit.environment;
  }
  const gw = started.value;
  const stop = (): void => void gw.close();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const tools = gw.gateway.tools.length;
  if (gw.url !== null) io.out(`candor serve: MCP on ${gw.url} (${tools} tools)\n`);
  else io.err(`candor serve: MCP on stdio (${tools} tools)\n`);
  await gw.closed;
  process.off('SIGINT', stop);
  process.off('SIGTERM', stop);
  return Exit.ok;
}

/** One line per `env:` credential whose variable is unset or empty, at its place in the file. */
export function unsetVariables(
  loaded: LoadedConfig,
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const out: string[] = [];
  for (const [variable, path] of envNeeds(loaded.config)) {
    if ((env[variable] ?? '') !== '') continue;
    const problem = `environment variable ${variable} is not set: calls that need this credential fail as local_failure until it is`;
    out.push(
      loaded.locate
        ? formatIssue(loaded.locate(path, problem))
        : `${loaded.file}: ${path.join('.')}: ${problem}`,
    );
  }
  return out;
}

/** A missing vault entry as serve names it: what fails until it is stored, and how to store it. */
function missingEntryIssue(issue: ConfigIssue, cli: string, file: string): ConfigIssue {
  const name = /named "([^"]+)"/.exec(issue.problem)?.[1];
  if (name === undefined) return issue;
  return {
    ...issue,
    problem: `the vault holds no credential named "${name}": calls that need it fail as local_failure until it is stored (${cli} vault set ${shellWord(name)} --config ${shellWord(file)})`,
  };
}
