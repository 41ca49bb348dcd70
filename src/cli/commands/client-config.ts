// candor client-config --client claude-desktop|cursor|vscode|claude-code [--config FILE]
// Prints the exact snippet that starts this Candor's gateway for an MCP client — absolute paths to
// Node.js, to this CLI and to the configuration, since clients start servers from a folder (and
// with a PATH) of their own — on stdout, and where it goes on stderr, so `> FILE` keeps only the
// snippet.
import { realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { formatIssue } from '../../config/locate.js';
import { loadConfig } from '../../config/load.js';
import { envNeeds } from '../../config/vault-needs.js';
import { Exit, parseFlags, CliUsageError, type CommandIo } from '../io.js';
import { cliCommand, shellWord } from '../invocation.js';
import { packageRoot } from '../version.js';

const CLIENTS = ['claude-desktop', 'cursor', 'vscode', 'claude-code'] as const;
type Client = (typeof CLIENTS)[number];

export const USAGE = `usage: candor client-config --client ${CLIENTS.join('|')} [--config candor.yaml] [--name candor]`;

export interface ServerCommand {
  command: string;
  args: string[];
}

/** Where each client reads its MCP servers, per OS (the documented default locations). */
export function whereItGoes(
  client: Client,
  platform: NodeJS.Platform = process.platform,
  home: string = homedir(),
  env: Readonly<Record<string, string | undefined>> = process.env,
): string {
  switch (client) {
    case 'claude-desktop':
      if (platform === 'darwin')
        return `${join(home, 'Library', 'Application Support', 'Claude', 'claude_desktop_config.json')} (merge into "mcpServers"; Claude > Settings > Developer > Edit Config opens it), then restart Claude Desktop`;
      if (platform === 'win32')
        return `${join(env.APPDATA ?? join(home, 'AppData', 'Roaming'), 'Claude', 'claude_desktop_config.json')} (merge into "mcpServers"; Claude > Settings > Developer > Edit Config opens it), then restart Claude Desktop`;
      return `${join(env.XDG_CONFIG_HOME ?? join(home, '.config'), 'Claude', 'claude_desktop_config.json')} (merge into "mcpServers"), then restart Claude Desktop`;
    case 'cursor':
      return `${join(home, '.cursor', 'mcp.json')} for every project, or .cursor/mcp.json in one project (merge into "mcpServers")`;
    case 'vscode':
      return '.vscode/mcp.json in the workspace (merge into "servers"), or the user configuration ("MCP: Open User Configuration" in the command palette)';
    case 'claude-code':
      return 'run this command (add --scope user to use it in every project)';
  }
}

export function snippet(client: Client, name: string, server: ServerCommand): string {
  switch (client) {
    case 'claude-desktop':
    case 'cursor':
      return `${JSON.stringify({ mcpServers: { [name]: server } }, null, 2)}\n`;
    case 'vscode':
      return `${JSON.stringify({ servers: { [name]: { type: 'stdio', ...server } } }, null, 2)}\n`;
    case 'claude-code':
      return `claude mcp add ${shellWord(name)} -- ${[server.command, ...server.args].map(shellWord).join(' ')}\n`;
  }
}

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    client: 'string',
    config: 'string',
    name: 'string',
  });
  if (positional.length > 0) throw new CliUsageError(`unexpected argument "${positional[0]}"`);
  const client = flags.client;
  if (typeof client !== 'string') throw new CliUsageError(USAGE);
  if (!(CLIENTS as readonly string[]).includes(client))
    throw new CliUsageError(`unknown --client "${client}"; expected ${CLIENTS.join(', ')}`);
  const name = typeof flags.name === 'string' ? flags.name : 'candor';
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name))
    throw new CliUsageError(`--name must be 1-64 of A-Z a-z 0-9 . _ -, not "${name}"`);
  const config = resolve(typeof flags.config === 'string' ? flags.config : 'candor.yaml');
  // The snippet must start a gateway: a configuration that does not load is said now, not by the
  // client's log later.
  const loaded = await loadConfig(config);
  if (!loaded.ok) {
    if (loaded.failure.code === 'unreadable') {
      io.err(
        `candor client-config: ${loaded.failure.message}; write one with: ${cliCommand()} init\n`,
      );
      return Exit.usage;
    }
    for (const issue of loaded.failure.issues) io.err(`${formatIssue(issue)}\n`);
    return Exit.usage;
  }
  const cli = realpathSync(join(packageRoot(), 'bin', 'candor.js'));
  const server: ServerCommand = {
    command: process.execPath,
    args: [cli, 'serve', '--config', config],
  };
  const c = client as Client;
  io.err(`${c}: ${whereItGoes(c)}:\n`);
  io.out(snippet(c, name, server));
  const vars = [...envNeeds(loaded.value.config).keys()];
  if (vars.length > 0)
    io.err(
      `the gateway reads ${vars.join(', ')} from its environment, which the client sets: add them under "env" (or use vault: references)\n`,
    );
  return Exit.ok;
}
