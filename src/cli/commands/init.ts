// candor init [--out FILE] [--force]: a commented starter configuration (starter/template.ts)
// beside the small MCP server it proxies, and its vault (key file and empty vault), so that it
// serves as written.
// candor init --openapi SPEC [--out FILE] [--origin URL] [--server-var NAME=VALUE,...] [--deadline-ms N] [--force]
// Writes a gateway configuration with one action per operation of an OpenAPI 3.0/3.1 document.
// Problems where Candor does not read the document are warnings on stderr; long work reports its
// progress there too.
// The result is checked with the same loader `candor serve` uses before anything is written, and
// written whole (temporary file, then rename): a bad document leaves no file behind.
import { rename, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { parseConfig } from '../../config/load.js';
import { createKeyFile, initVault } from '../../vault/index.js';
import { cliCommand, shellWord } from '../invocation.js';
import { NOTES_SCRIPT, NOTES_SERVER, starterYaml } from '../starter/template.js';
import { buildActions, checkConfig } from '../../config/actions.js';
import { configSchema } from '../../config/schema.js';
import { loadOpenApi } from '../../fakes/openapi-doc.js';
import { declaredClassProblem, planActions } from '../../matrix/openapi-config.js';
import { Exit, parseFlags, CliUsageError, type CommandIo } from '../io.js';

export const USAGE =
  'usage: candor init [--out candor.yaml] [--force] | candor init --openapi SPEC [--out candor.yaml] [--origin URL] [--server-var NAME=VALUE,...] [--deadline-ms N] [--force]';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    openapi: 'string',
    out: 'string',
    origin: 'string',
    'server-var': 'string',
    'deadline-ms': 'string',
    force: 'boolean',
  });
  const spec = flags.openapi;
  if (positional.length > 0) throw new CliUsageError(USAGE);
  const out = typeof flags.out === 'string' ? flags.out : 'candor.yaml';
  if (typeof spec !== 'string') {
    if (flags.origin !== undefined || flags['deadline-ms'] !== undefined)
      throw new CliUsageError('--origin and --deadline-ms need --openapi SPEC');
    return starter(out, flags.force === true, io);
  }
  const deadline = typeof flags['deadline-ms'] === 'string' ? flags['deadline-ms'] : '5000';
  if (!/^\d{2,7}$/.test(deadline))
    throw new CliUsageError(`--deadline-ms must be a number of milliseconds, not "${deadline}"`);
  const origin = typeof flags.origin === 'string' ? flags.origin : undefined;
  if (origin !== undefined && !/^https?:\/\/[^/?#@\s]+(\/[^?#\s]*)?$/.test(origin))
    throw new CliUsageError(`--origin must be http(s)://host[:port][/prefix], not "${origin}"`);
  if (flags.force !== true && (await exists(out)))
    throw new CliUsageError(`${out} exists; pass --force to replace it`);

  const serverVars = parseServerVars(flags['server-var']);
  const progress = (line: string): void => io.err(`candor init: ${line}\n`);
  const loaded = await loadOpenApi(spec, { server_vars: serverVars, progress });
  if (!loaded.ok) {
    io.err(`candor init: ${loaded.failure.message}\n`);
    return loaded.failure.kind === 'unreadable' ? Exit.environment : Exit.usage;
  }
  for (const w of loaded.value.warnings) io.err(`candor init: warning: ${w}\n`);
  const classProblem = declaredClassProblem(loaded.value);
  if (classProblem !== null) {
    io.err(`candor init: ${classProblem}\n`);
    return Exit.usage;
  }
  const { yaml, plans, config } = planActions(loaded.value, {
    deadline_ms: Number(deadline),
    ...(origin !== undefined ? { origin } : {}),
    progress,
  });
  // The file must load exactly as `candor serve` would load it.
  const problem = checkGenerated(yaml, config, out);
  if (problem !== null) {
    io.err(`candor init: the generated configuration does not load: ${problem}\n`);
    return Exit.usage;
  }
  const tmp = `${out}.${process.pid}.tmp`;
  try {
    await writeFile(tmp, yaml, { flag: 'wx' });
    await rename(tmp, out);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    io.err(`candor init: cannot write ${out} (${(e as NodeJS.ErrnoException).code ?? 'error'})\n`);
    return Exit.environment;
  }
  const guessed = plans.filter((p) => p.choice.guessed).length;
  const todo = plans.filter((p) => p.choice.class !== 'read' && p.lookup === null).length;
  const renamed = plans.filter((p) => p.op.name_note !== null).length;
  io.out(
    `wrote ${plans.length} actions to ${out} (${guessed} classes guessed, ${todo} writes without a lookup: see the TODO comments${renamed ? `; ${renamed} names shortened or made up, the operationId kept as openapi_operation_id` : ''})\n`,
  );
  return Exit.ok;
}

async function starter(out: string, force: boolean, io: CommandIo): Promise<number> {
  const dir = dirname(out);
  const script = join(dir, NOTES_SCRIPT);
  const keyFile = join(dir, '.candor', 'vault.key');
  const vaultFile = join(dir, '.candor', 'vault.json');
  if (!force)
    for (const f of [out, script])
      if (await exists(f)) throw new CliUsageError(`${f} exists; pass --force to replace it`);
  const cli = cliCommand();
  const config = shellWord(out);
  const yaml = starterYaml(cli, config);
  const check = parseConfig(yaml, out);
  if (!check.ok)
    throw new Error(`the starter configuration does not load: ${check.failure.message}`);
  try {
    await writeWhole(script, NOTES_SERVER);
    // An existing vault (and its key) is kept: it may already hold credentials.
    if (!(await exists(vaultFile))) {
      if (!(await exists(keyFile))) {
        const made = await createKeyFile(keyFile);
        if (!made.ok) throw new Error(made.failure.message);
      }
      const vault = await initVault({ kind: 'key_file', path: keyFile }, { path: vaultFile });
      if (!vault.ok) throw new Error(vault.failure.message);
      vault.value.close();
    }
    await writeWhole(out, yaml);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    io.err(`candor init: cannot write the starter (${code ?? (e as Error).message})\n`);
    return Exit.environment;
  }
  const shown = (p: string): string => relative(process.cwd(), p) || p;
  io.out(
    [
      `wrote ${shown(out)} (2 HTTP actions, 1 proxied MCP server), ${shown(script)} (that server),`,
      `and the vault ${shown(vaultFile)} with its key ${shown(keyFile)} (keep both out of version control)`,
      '',
      'Next:',
      `  ${cli} fake serve --port 8787                    # another terminal: the service the actions call`,
      `  ${cli} serve --config ${config}                # the MCP gateway (stdio)`,
      `  ${cli} client-config --client claude-desktop --config ${config}`,
      '',
    ].join('\n'),
  );
  return Exit.ok;
}

/** Written whole (temporary file, then rename), replacing what was there. */
async function writeWhole(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    await writeFile(tmp, text, { flag: 'wx' });
    await rename(tmp, file);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
}

/** Above this size the text is not parsed back: the configuration value it renders is checked. */
const REPARSE_MAX = 1_000_000;

/**
 * Whether the generated file loads as `candor serve` loads it. A small one is parsed back from its
 * text; a large one (a 1,200-operation API) skips the YAML round trip, which the yaml library
 * guarantees and which would double the time, and runs the same checks on the value itself.
 */
function checkGenerated(yaml: string, config: unknown, out: string): string | null {
  if (yaml.length <= REPARSE_MAX) {
    const check = parseConfig(yaml, out);
    return check.ok ? null : (check.failure.message.split('\n')[0] ?? 'invalid');
  }
  const parsed = configSchema.safeParse(config);
  if (!parsed.success) return parseConfig(yaml, out).failure?.message.split('\n')[0] ?? 'invalid';
  const problems = checkConfig(parsed.data);
  if (problems.length > 0) return `${problems[0]!.path.join('.')}: ${problems[0]!.problem}`;
  try {
    buildActions(parsed.data);
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
  return null;
}

/** `--server-var region=eu,port=8443` → `{ region: 'eu', port: '8443' }`. */
export function parseServerVars(flag: unknown): Record<string, string> {
  if (typeof flag !== 'string') return {};
  const vars: Record<string, string> = {};
  for (const pair of flag.split(',')) {
    const m = /^([A-Za-z0-9_.-]+)=(.*)$/.exec(pair.trim());
    if (!m) throw new CliUsageError(`--server-var takes NAME=VALUE[,NAME=VALUE...], not "${pair}"`);
    vars[m[1]!] = m[2]!;
  }
  return vars;
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}
