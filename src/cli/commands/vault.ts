// candor vault init|set|list|lock|unlock|rotate — argv to vault calls to an exit code.
// The passphrase comes from --key-file F, else CANDOR_VAULT_PASSPHRASE, else io.readSecret (which
// must not echo). Values come from --value-env VAR, --value-file F or io.readSecret, never from
// argv (visible to other users in the process list), and no command ever prints a value.
// `rotate NAME` replaces one value; `rotate --rekey` re-encrypts the whole vault under a new
// passphrase (CANDOR_VAULT_NEW_PASSPHRASE or the prompt) or a new key file (--new-key-file F).
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { loadConfig, type LoadedConfig } from '../../config/load.js';
import { vaultNeeds } from '../../config/vault-needs.js';
import type { Clock, Random } from '../../core/time.js';
import {
  createKeyFile,
  DEFAULT_VAULT_PATH,
  formatBinding,
  initVault,
  listCredentials,
  lockVault,
  openVault,
  parseBinding,
  type Binding,
  type CredentialType,
  type GateChange,
  type KeySource,
  type ScryptParams,
  type Vault,
  type VaultFailure,
  type VaultListing,
  type VaultOptions,
} from '../../vault/index.js';
import { Exit, parseFlags, CliUsageError, type CommandIo } from '../io.js';

export interface VaultIo extends CommandIo {
  /** Reads one line without echo (a TTY prompt); absent when there is no terminal. */
  readSecret?: (prompt: string) => Promise<string>;
}

export interface VaultCommandDeps {
  env?: Readonly<Record<string, string | undefined>>;
  clock?: Clock;
  random?: Random;
  scrypt?: ScryptParams;
  allowWeakKdf?: boolean;
  /** Receives lock/unlock transitions so the caller can record `gate_changed`. */
  onGateChange?: (change: GateChange) => void;
}

const USAGE =
  'usage: candor vault init|set|list|lock|unlock|rotate [--config candor.yaml | --vault PATH --key-file F] (see candor vault --help)';
const TYPES: readonly CredentialType[] = ['bearer', 'basic', 'api_key', 'ssh_key', 'ssh_secret'];
const COMMON = { vault: 'string', 'key-file': 'string' } as const;

/** Expected failures that are not the caller's typing: say so in one line with exit 3 or 1. */
class Stop extends Error {
  constructor(
    readonly exit: number,
    message: string,
  ) {
    super(message);
  }
}

export async function run(
  args: string[],
  io: VaultIo,
  deps: VaultCommandDeps = {},
): Promise<number> {
  try {
    return await dispatch(args, io, deps);
  } catch (error) {
    if (error instanceof CliUsageError || error instanceof Stop) {
      io.err(`candor vault: ${error.message}\n`);
      return error instanceof Stop ? error.exit : Exit.usage;
    }
    throw error;
  }
}

async function dispatch(args: string[], io: VaultIo, deps: VaultCommandDeps): Promise<number> {
  const [sub, ...rest] = args;
  if (rest.some((a) => a === '--value' || a.startsWith('--value='))) {
    throw new CliUsageError(
      'values are never taken from the command line; use --value-env VAR, --value-file F or the prompt',
    );
  }
  if (sub === undefined || sub.startsWith('-')) throw new CliUsageError(USAGE);
  const env = deps.env ?? process.env;
  const { config, args: configured } = await fromConfig(rest);
  const { binds, others } = takeRepeated(configured, 'bind');
  switch (sub) {
    case 'init': {
      const { flags } = parse(others, {}, 0);
      const options = vaultOptions(flags, deps);
      const key = await keyForInit(flags, io, env, deps);
      const made = await initVault(key, options);
      const vault = check(made);
      vault.close();
      io.out(`vault created at ${options.path} (unlocked)\n`);
      return Exit.ok;
    }
    case 'set': {
      const { flags, positional } = parse(
        others,
        { type: 'string', username: 'string', header: 'string', ...VALUE_FLAGS },
        1,
      );
      const name = positional[0]!;
      // With a configuration, what it references as vault:NAME says the type and bindings.
      const needed = config ? vaultNeeds(config.config).get(name) : undefined;
      if (config && !needed && (flags.type === undefined || binds.length === 0))
        throw new CliUsageError(
          `${config.file} references no vault:${name}; pass --type and --bind to store it anyway`,
        );
      const type = typeof flags.type === 'string' ? flags.type : needed?.type;
      if (typeof type !== 'string')
        throw new CliUsageError(
          'set needs --type bearer|basic|api_key|ssh_key|ssh_secret (or --config FILE that references it)',
        );
      if (!(TYPES as readonly string[]).includes(type)) {
        throw new CliUsageError(`unknown --type "${type}"; expected ${TYPES.join(', ')}`);
      }
      const bindings: Binding[] = binds.map((spec) => {
        const parsed = parseBinding(spec);
        if (!parsed.ok) throw new CliUsageError(parsed.failure.message);
        return parsed.value;
      });
      if (bindings.length === 0 && needed) bindings.push(...needed.bindings);
      if (bindings.length === 0)
        throw new CliUsageError('set needs at least one --bind URL|ssh:HOST');
      const username = typeof flags.username === 'string' ? flags.username : needed?.username;
      const header =
        typeof flags.header === 'string'
          ? flags.header
          : type === 'api_key'
            ? needed?.header_name
            : undefined;
      const vault = await open(flags, io, env, deps);
      const secret = await readValue(flags, io, env, name, type === 'ssh_key');
      const result = await vault.set({
        name,
        type: type as CredentialType,
        secret,
        bindings,
        ...(username !== undefined ? { username } : {}),
        ...(header !== undefined ? { header_name: header } : {}),
      });
      vault.close();
      const info = check(result);
      io.out(`stored ${info.name} (${info.type}) for ${describe(info.bindings)}\n`);
      return Exit.ok;
    }
    case 'list': {
      const { flags } = parse(others, { json: 'boolean' }, 0, binds);
      const listing = check(await listCredentials(vaultOptions(flags, deps)));
      const verified = await gateVerifies(flags, env, deps);
      io.out(
        flags.json === true
          ? `${JSON.stringify({ ...listing, gate: { ...listing.gate, verified } }, null, 2)}\n`
          : formatListing(listing, verified),
      );
      return Exit.ok;
    }
    case 'lock': {
      const { flags } = parse(others, { by: 'string' }, 0, binds);
      const by = typeof flags.by === 'string' ? flags.by : defaultActor(env);
      const t = check(await lockVault(by, vaultOptions(flags, deps)));
      io.out(
        t.changed ? `vault locked by ${by} at ${iso(t.gate.at)}\n` : 'vault was already locked\n',
      );
      return Exit.ok;
    }
    case 'unlock': {
      const { flags } = parse(others, { by: 'string' }, 0, binds);
      const by = typeof flags.by === 'string' ? flags.by : defaultActor(env);
      const vault = await open(flags, io, env, deps);
      const t = check(await vault.unlock(by));
      vault.close();
      io.out(
        t.changed
          ? `vault unlocked by ${by} at ${iso(t.gate.at)}\n`
          : 'vault was already unlocked\n',
      );
      return Exit.ok;
    }
    case 'rotate': {
      const { flags, positional } = parse(
        others,
        { rekey: 'boolean', 'new-key-file': 'string', ...VALUE_FLAGS },
        flags0(others).rekey ? 0 : 1,
        binds,
      );
      const vault = await open(flags, io, env, deps);
      if (flags.rekey === true) {
        const next = await keyForRekey(flags, io, env, deps);
        check(await vault.rekey(next));
        vault.close();
        io.out('vault re-keyed; every value is now encrypted under the new key\n');
        return Exit.ok;
      }
      const name = positional[0]!;
      const listing = check(await vault.list());
      const current = listing.credentials.find((c) => c.name === name);
      if (current === undefined) throw new Stop(Exit.check_failed, `no credential named "${name}"`);
      const secret = await readValue(flags, io, env, name, current.type === 'ssh_key');
      const info = check(await vault.rotate(name, secret));
      vault.close();
      io.out(`rotated ${info.name}\n`);
      return Exit.ok;
    }
    default:
      throw new CliUsageError(
        `unknown vault command "${sub}"; expected init, set, list, lock, unlock or rotate`,
      );
  }
}

const VALUE_FLAGS = { 'value-env': 'string', 'value-file': 'string' } as const;

/**
 * `--config FILE` (default `./candor.yaml` when neither --vault nor --key-file is given and the
 * file exists): its `vault:` section supplies --vault and --key-file, which an explicit flag
 * overrides. Returns the arguments without --config, with those flags added.
 */
async function fromConfig(
  args: string[],
): Promise<{ config: LoadedConfig | undefined; args: string[] }> {
  const rest: string[] = [];
  let file: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--config') {
      file = args[++i];
      if (file === undefined || file.startsWith('--'))
        throw new CliUsageError('option --config needs a value');
    } else if (arg.startsWith('--config=')) file = arg.slice('--config='.length);
    else rest.push(arg);
  }
  const has = (flag: string): boolean =>
    rest.some((a) => a === `--${flag}` || a.startsWith(`--${flag}=`));
  const explicit = file !== undefined;
  if (!explicit) {
    if (has('vault') || has('key-file') || !existsSync('candor.yaml'))
      return { config: undefined, args: rest };
    file = 'candor.yaml';
  }
  const loaded = await loadConfig(file!);
  if (!loaded.ok) {
    if (!explicit) return { config: undefined, args: rest };
    throw new Stop(
      loaded.failure.code === 'unreadable' ? Exit.environment : Exit.usage,
      loaded.failure.message,
    );
  }
  const vault = loaded.value.config.vault;
  if (!vault) {
    if (explicit) throw new CliUsageError(`${file} has no vault: section (vault: { key_file: … })`);
    return { config: undefined, args: rest };
  }
  return {
    config: loaded.value,
    args: [
      ...rest,
      ...(has('vault') ? [] : ['--vault', vault.path ?? DEFAULT_VAULT_PATH]),
      ...(has('key-file') ? [] : ['--key-file', vault.key_file]),
    ],
  };
}

function flags0(args: string[]): { rekey: boolean } {
  return { rekey: args.includes('--rekey') };
}

function parse(
  args: string[],
  spec: Record<string, 'string' | 'boolean'>,
  positionals: number,
  binds: string[] = [],
): { flags: Record<string, string | boolean>; positional: string[] } {
  if (binds.length > 0) throw new CliUsageError('--bind is only valid with set');
  const parsed = parseFlags(args, { ...COMMON, ...spec });
  if (parsed.positional.length < positionals) throw new CliUsageError('missing credential NAME');
  if (parsed.positional.length > positionals) {
    throw new CliUsageError(`unexpected argument "${parsed.positional[positionals]}"`);
  }
  return parsed;
}

/** Pulls every `--name X` / `--name=X` out of args (parseFlags keeps only the last). */
function takeRepeated(args: string[], name: string): { binds: string[]; others: string[] } {
  const binds: string[] = [];
  const others: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === `--${name}`) {
      const value = args[++i];
      if (value === undefined || value.startsWith('--')) {
        throw new CliUsageError(`option --${name} needs a value`);
      }
      binds.push(value);
    } else if (arg.startsWith(`--${name}=`)) {
      binds.push(arg.slice(name.length + 3));
    } else {
      others.push(arg);
    }
  }
  return { binds, others };
}

function vaultOptions(
  flags: Record<string, string | boolean>,
  deps: VaultCommandDeps,
): VaultOptions & { path: string } {
  return {
    path: typeof flags.vault === 'string' ? flags.vault : DEFAULT_VAULT_PATH,
    ...(deps.clock ? { clock: deps.clock } : {}),
    ...(deps.random ? { random: deps.random } : {}),
    ...(deps.scrypt ? { scrypt: deps.scrypt } : {}),
    ...(deps.allowWeakKdf ? { allowWeakKdf: true } : {}),
    ...(deps.onGateChange ? { onGateChange: deps.onGateChange } : {}),
  };
}

async function open(
  flags: Record<string, string | boolean>,
  io: VaultIo,
  env: Readonly<Record<string, string | undefined>>,
  deps: VaultCommandDeps,
): Promise<Vault> {
  const options = vaultOptions(flags, deps);
  // Report a missing or unreadable vault before asking for a passphrase.
  check(await listCredentials(options));
  const key: KeySource =
    typeof flags['key-file'] === 'string'
      ? { kind: 'key_file', path: flags['key-file'] }
      : {
          kind: 'passphrase',
          passphrase: await passphrase(io, env, 'CANDOR_VAULT_PASSPHRASE', 'Vault passphrase: '),
        };
  return check(await openVault(key, options));
}

async function keyForInit(
  flags: Record<string, string | boolean>,
  io: VaultIo,
  env: Readonly<Record<string, string | undefined>>,
  deps: VaultCommandDeps,
): Promise<KeySource> {
  const keyFile = flags['key-file'];
  if (typeof keyFile === 'string') {
    await ensureKeyFile(keyFile, io, deps);
    return { kind: 'key_file', path: keyFile };
  }
  return {
    kind: 'passphrase',
    passphrase: await newPassphrase(io, env, 'CANDOR_VAULT_PASSPHRASE'),
  };
}

async function keyForRekey(
  flags: Record<string, string | boolean>,
  io: VaultIo,
  env: Readonly<Record<string, string | undefined>>,
  deps: VaultCommandDeps,
): Promise<KeySource> {
  const keyFile = flags['new-key-file'];
  if (typeof keyFile === 'string') {
    await ensureKeyFile(keyFile, io, deps);
    return { kind: 'key_file', path: keyFile };
  }
  return {
    kind: 'passphrase',
    passphrase: await newPassphrase(io, env, 'CANDOR_VAULT_NEW_PASSPHRASE'),
  };
}

/** Uses an existing key file, or creates one (mode 0600) when the path does not exist yet. */
async function ensureKeyFile(path: string, io: VaultIo, deps: VaultCommandDeps): Promise<void> {
  const exists = await stat(path).then(
    () => true,
    () => false,
  );
  if (exists) return;
  check(await createKeyFile(path, deps.random));
  io.out(`created key file ${path} (keep it out of version control)\n`);
}

async function passphrase(
  io: VaultIo,
  env: Readonly<Record<string, string | undefined>>,
  variable: string,
  prompt: string,
): Promise<string> {
  const fromEnv = env[variable];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  if (io.readSecret === undefined) {
    throw new Stop(
      Exit.environment,
      `no passphrase: set ${variable}, pass --key-file F, or run in a terminal`,
    );
  }
  return io.readSecret(prompt);
}

async function newPassphrase(
  io: VaultIo,
  env: Readonly<Record<string, string | undefined>>,
  variable: string,
): Promise<string> {
  const fromEnv = env[variable];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const first = await passphrase(io, {}, variable, 'New vault passphrase: ');
  const second = await passphrase(io, {}, variable, 'Repeat the passphrase: ');
  if (first !== second) throw new CliUsageError('the two passphrases differ');
  return first;
}

async function readValue(
  flags: Record<string, string | boolean>,
  io: VaultIo,
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  multiline: boolean,
): Promise<string> {
  if (typeof flags['value-env'] === 'string' && typeof flags['value-file'] === 'string') {
    throw new CliUsageError('give either --value-env or --value-file, not both');
  }
  if (typeof flags['value-env'] === 'string') {
    const value = env[flags['value-env']];
    if (value === undefined || value === '') {
      throw new Stop(Exit.environment, `environment variable ${flags['value-env']} is not set`);
    }
    return value;
  }
  if (typeof flags['value-file'] === 'string') {
    let text: string;
    try {
      text = await readFile(flags['value-file'], 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
      throw new Stop(Exit.environment, `cannot read ${flags['value-file']} (${code})`);
    }
    // A single-line value usually ends with the newline an editor adds; a PEM key keeps its own.
    return multiline ? text : text.replace(/\r?\n$/, '');
  }
  if (io.readSecret === undefined) {
    throw new Stop(
      Exit.environment,
      'no value: use --value-env VAR, --value-file F, or run in a terminal',
    );
  }
  return io.readSecret(`Value for ${name}: `);
}

/** Exit code per failure: caller input 2, environment 3, a refused check 1. */
const EXIT_FOR: Record<VaultFailure['code'], number> = {
  invalid_name: Exit.usage,
  invalid_binding: Exit.usage,
  invalid_value: Exit.usage,
  not_found: Exit.environment,
  unreadable: Exit.environment,
  unwritable: Exit.environment,
  corrupt: Exit.environment,
  unsupported_version: Exit.environment,
  bad_key_file: Exit.environment,
  busy: Exit.environment,
  wrong_key: Exit.check_failed,
  already_exists: Exit.check_failed,
  unknown_credential: Exit.check_failed,
  credential_exists: Exit.check_failed,
  integrity: Exit.check_failed,
};

function check<T>(result: { ok: true; value: T } | { ok: false; failure: VaultFailure }): T {
  if (result.ok) return result.value;
  throw new Stop(
    EXIT_FOR[result.failure.code],
    `${result.failure.message} [${result.failure.code}]`,
  );
}

/**
 * Whether the gate's unlock token verifies under the key (true: open; false: locked, whatever the
 * flag says), or null when no key was given (`list` never prompts).
 */
async function gateVerifies(
  flags: Record<string, string | boolean>,
  env: Readonly<Record<string, string | undefined>>,
  deps: VaultCommandDeps,
): Promise<boolean | null> {
  const passphrase = env['CANDOR_VAULT_PASSPHRASE'];
  const key: KeySource | null =
    typeof flags['key-file'] === 'string'
      ? { kind: 'key_file', path: flags['key-file'] }
      : passphrase !== undefined && passphrase !== ''
        ? { kind: 'passphrase', passphrase }
        : null;
  if (key === null) return null;
  const vault = check(await openVault(key, vaultOptions(flags, deps)));
  const gate = await vault.checkGate();
  vault.close();
  return gate.ok && !gate.value.locked;
}

function gateLine(g: GateChange, verified: boolean | null): string {
  const when = `since ${iso(g.at)} by ${g.by}`;
  if (g.locked) return `gate: LOCKED ${when}`;
  if (verified === true) return `gate: unlocked (unlock token verified) ${when}`;
  if (verified === false)
    return `gate: LOCKED (the file says unlocked but its unlock token does not verify: it was changed without the key) ${when}`;
  return `gate: unlocked per the file, token not verified (pass --key-file F or set CANDOR_VAULT_PASSPHRASE) ${when}`;
}

function formatListing(listing: VaultListing, verified: boolean | null): string {
  const lines = [gateLine(listing.gate, verified)];
  if (listing.credentials.length === 0) return `${lines[0]}\n(no credentials)\n`;
  const rows = listing.credentials.map((c) => [
    c.name,
    c.type,
    describe(c.bindings),
    iso(c.created_at),
    c.rotated_at === null ? '-' : iso(c.rotated_at),
  ]);
  const header = ['NAME', 'TYPE', 'BINDINGS', 'CREATED', 'ROTATED'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const row of [header, ...rows]) {
    lines.push(
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    );
  }
  return `${lines.join('\n')}\n`;
}

function describe(bindings: Binding[]): string {
  return bindings.map(formatBinding).join(',');
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Who acts when --by is not given: the OS user running the command (not the environment). */
function defaultActor(env: Readonly<Record<string, string | undefined>>): string {
  let name: string | undefined;
  try {
    name = userInfo().username;
  } catch {
    // No passwd entry for this uid (some containers): fall back to the environment, then the uid.
    name = env.USER ?? env.USERNAME ?? (process.getuid ? `uid ${process.getuid()}` : undefined);
  }
  return `cli:${name ?? 'unknown'}`;
}

/**
 * A `readSecret` for interactive use: prompts on stderr and reads one line from a TTY stdin in raw
 * mode, so nothing typed is echoed. Ctrl-C or Ctrl-D rejects. The caller decides when to use it
 * (e.g. `process.stdin.isTTY ? readSecretFromTty : undefined`).
 */
export function readSecretFromTty(prompt: string): Promise<string> {
  const stdin = process.stdin;
  return new Promise((resolve, reject) => {
    let value = '';
    const finish = (error: Error | null): void => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
      if (error) reject(error);
      else resolve(value);
    };
    const onData = (chunk: Buffer): void => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n') return finish(null);
        if (ch === '\u0003' || ch === '\u0004') return finish(new Error('input cancelled'));
        if (ch === '\u007f' || ch === '\b') value = [...value].slice(0, -1).join('');
        else if (ch >= ' ') value += ch;
      }
    };
    process.stderr.write(prompt);
    stdin.setRawMode(true);
    stdin.resume();
    stdin.on('data', onData);
  });
}
