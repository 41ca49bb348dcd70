// argv -> library calls -> exit code. No logic lives here: each command is a module, loaded lazily
// so that `candor --help` loads no database or SSH driver.
import { parseLedgerUrl } from '../ledger/open.js';
import { Exit, CliUsageError, type Command, type CommandIo } from './io.js';
import { suggestion, usageAlternatives, wrapText, wrapUsage } from './suggest.js';
import { version } from './version.js';

interface CommandEntry {
  usage: string;
  summary: string;
  /** More lines for `candor <command> --help` (every flag). */
  details?: string;
  load: () => Promise<{ run: Command }>;
}

const COMMANDS: Record<string, CommandEntry> = {
  demo: {
    usage:
      'candor demo [--reset | --ledger URL] [--quiet] [--concurrency N | --serial] [--json REPORT]',
    summary:
      'main job: run the reference failure matrix through the real engine against the fake service (its own ledger .candor/demo.db, named by .candor/demo.yaml for --config; --reset starts it fresh)',
    load: () => import('./commands/demo.js'),
  },
  serve: {
    usage: 'candor serve --config FILE [--http PORT] [--ledger URL] [--strict]',
    summary:
      "MCP gateway: configured HTTP actions, SSH actions (ssh.actions) and the tools of upstream MCP servers (upstreams:) as tools (stdio by default; --http serves 127.0.0.1; browser origins: mcp.http.allowed_origins); fleet: in candor.yaml shares a PostgreSQL ledger with other gateways (ownership leases, takeover of lapsed owners, fencing of stalled ones; a clean stop releases the lease and wakes the others' sweeps)",
    details:
      'At start: one line per unset env: credential variable (--strict: exit 3, not serving).',
    load: () => import('./commands/serve.js'),
  },
  ops: {
    usage:
      'candor ops list [--state S,...] [--config FILE | --ledger URL] [--json] | ops show OP_ID [--config FILE | --ledger URL] [--json] | ops follow [--config FILE | --ledger URL] [--from SEQ] [--poll-ms N] [--json]',
    summary:
      'list operations by state, or show one: intent, every attempt and observation; follow prints new events as any gateway commits them (PostgreSQL: LISTEN/NOTIFY; SQLite: polled)',
    details: [
      'ops follow prints each new ledger event as it is committed, by any gateway on the ledger,',
      'one line each: #SEQ TIME KIND OPERATION SUMMARY (--json: the event as one JSON line).',
      'Ctrl-C (SIGINT/SIGTERM) stops, exit 0.',
      '  --from SEQ    start at this sequence number (1: the whole ledger); default: only new events',
      '  --poll-ms N   SQLite: how often to look for new events (default 1000); PostgreSQL needs no',
      '                polling: it listens (LISTEN/NOTIFY) and re-reads every 30 s as a safety net',
    ].join('\n'),
    load: () => import('./commands/ops.js'),
  },
  recover: {
    usage: 'candor recover [--config FILE] [--ledger URL] [--json]',
    summary:
      'after a crash, work through every unresolved operation (vault and gate as serve opens them): found by lookup (SSH: through the remote marker; proxied MCP tools: through their upstream, which it starts), retried under the key, first attempt made, or needs a person (why); exit 1 while any stays unresolved',
    load: () => import('./commands/recover.js'),
  },
  matrix: {
    usage:
      'candor matrix run FILE [--json F] [--junit F] [--ledger URL] [--only ID,...] [--concurrency N | --serial] | matrix run FILE --config candor.yaml [--openapi SPEC] [--target fake|proxy --upstream URL] [--report F] | matrix generate --openapi SPEC [--config candor.yaml] [--out FILE]',
    summary:
      'run a failure matrix against the fake service, the OpenAPI fake or a proxied real service (exit 1 if any row fails), or generate one from an OpenAPI 3 document',
    load: () => import('./commands/matrix.js'),
  },
  fake: {
    usage:
      'candor fake serve [--fixtures DIR] [--port N] [--host H] [--seed N] [--log FILE] | fake serve --openapi SPEC [--idempotency honoured|ignored] [--port N] [--log FILE]',
    summary:
      'run the fault-injecting fake HTTP service on loopback (or emulate an OpenAPI document)',
    load: () => import('./commands/fake.js'),
  },
  init: {
    usage:
      'candor init [--out candor.yaml] [--force] | init --openapi SPEC [--out candor.yaml] [--origin URL] [--deadline-ms N] [--force]',
    summary:
      'write a commented starter configuration that serves as is (2 HTTP actions for candor fake serve --port 8787, 1 proxied MCP server, ledger, vault), or one with an action per operation of an OpenAPI document',
    load: () => import('./commands/init.js'),
  },
  'client-config': {
    usage:
      'candor client-config --client claude-desktop|cursor|vscode|claude-code [--config candor.yaml] [--name candor]',
    summary:
      'the snippet that puts this gateway in front of an MCP client (absolute paths to node, the CLI and the configuration) on stdout; where it goes on stderr',
    load: () => import('./commands/client-config.js'),
  },
  upstream: {
    usage:
      'candor upstream login NAME [--as SUBJECT [--issuer URL|static]] [--config FILE] [--scope S] [--timeout-s N] | upstream status [NAME] [--config FILE] [--json]',
    summary:
      'OAuth for upstream MCP servers (auth: oauth): log in once (tokens kept in the vault, refreshed by the gateway), or show expiry and scopes (never a token)',
    details: [
      'login NAME: discovers the authorization server (RFC 9728, RFC 8414), registers Candor where',
      'needed, prints the authorization URL and waits for the redirect on 127.0.0.1 (or a pasted',
      'redirected URL); --scope S asks for more scopes; --timeout-s N (default 600). Exit 1: failed.',
      "--as SUBJECT (oauth.tokens: per_principal): one gateway caller's own login, kept for that",
      "caller only (the gateway's issuer, or --issuer static for a static token's name).",
      'status [NAME]: per OAuth upstream (and per principal): logged in, token expiry, scopes,',
      'refreshable; --json.',
      'Exit 1 when an upstream needs a login.',
    ].join('\n'),
    load: () => import('./commands/upstream.js'),
  },
  probe: {
    usage:
      'candor probe mcp --config FILE [--ledger URL] [--tool NAME] [--allow-rerun] [--json FILE] [--markdown FILE]',
    summary:
      'retry-safety report for the tools of upstream MCP servers (upstreams: in candor.yaml); calls them for real, so point it at a disposable environment; exit 1 when a tool duplicates on retry or the upstream is not fresh',
    details: [
      'Every tool is reported. Read tools are checked as reads: called once with',
      "tools.NAME.probe.arguments (found, or failed with the upstream's words). Per write tool with a",
      'mapped lookup (tools.NAME.lookup) and probe arguments: look first (an effect already there:',
      'not fresh), call once, check the lookup sees exactly one effect, repeat the identical call as',
      'a client whose answer was lost would, and count again. Verdicts: retry-safe, duplicates on',
      'retry, not determinable, not fresh (with the reason), read. Every call the probe makes is an',
      "operation in the ledger (the configuration's, or --ledger), and the report lists the effects",
      'it left (operation ids and the references seen). A write tool the ledger already holds',
      'operations of is refused as not fresh unless --allow-rerun.',
      '  --config FILE    candor.yaml with an upstreams: section (required)',
      "  --ledger URL     where the probe records its calls (default: the configuration's ledger)",
      '  --tool NAME      only this tool (its upstream name or its exported name)',
      '  --allow-rerun    probe write tools even when the ledger holds earlier operations of them',
      '  --json FILE      the report as JSON ({ tools: [...] }, with every step and effect as evidence)',
      '  --markdown FILE  the Markdown report (also printed on stdout)',
    ].join('\n'),
    load: () => import('./commands/probe.js'),
  },
  proxy: {
    usage: 'candor proxy --upstream URL [--port N] [--admin-port N] [--faults FILE] [--log FILE]',
    summary:
      'fault-injecting HTTP/1.1 proxy in front of a real service; ground truth from what the upstream answered',
    load: () => import('./commands/proxy.js'),
  },
  vault: {
    usage: 'candor vault init|set|list|lock|unlock|rotate [--vault PATH] [--key-file F]',
    details: [
      'Subcommands:',
      '  init                       create an empty, unlocked vault (--key-file F is created if missing)',
      '  set NAME --type bearer|basic|api_key|ssh_key|ssh_secret --bind URL|ssh:HOST [--bind …]',
      '         [--username U] [--header H] [--value-env VAR | --value-file F]',
      '                             store a credential bound to origins/prefixes',
      '                             (value from env, file or prompt; never argv)',
      '  list [--json]              names, types, bindings, times; the gate, verified when a key is given',
      '  lock [--by NAME]           close the gate (needs no key); every credential is withheld',
      '  unlock [--by NAME]         open the gate (needs the key)',
      '  rotate NAME [--value-env VAR | --value-file F]   replace one value',
      '  rotate --rekey [--new-key-file F]                re-encrypt under a new key file or passphrase',
      '',
      'Options:',
      '  --vault PATH        vault file (default ./.candor/vault.json)',
      '  --key-file F        key file instead of a passphrase',
      '  --by NAME           who locks/unlocks (default: the OS user, as cli:USER)',
      '  --value-env VAR     read the value from environment variable VAR',
      '  --value-file F      read the value from file F (a PEM key keeps its newlines)',
      '  --new-key-file F    with rotate --rekey: the new key file (created if missing)',
      '  --rekey             with rotate: re-encrypt the whole vault',
      '  --json              with list: JSON output (gate.verified: true, false or null without a key)',
      'Passphrases: CANDOR_VAULT_PASSPHRASE, CANDOR_VAULT_NEW_PASSPHRASE (rekey), or the prompt.',
    ].join('\n'),
    summary:
      'encrypted credential store; values never printed (passphrase: CANDOR_VAULT_PASSPHRASE, --key-file or prompt)',
    load: async () => {
      const mod = await import('./commands/vault.js');
      return {
        run: (args: string[], io: CommandIo) =>
          mod.run(args, process.stdin.isTTY ? { ...io, readSecret: mod.readSecretFromTty } : io),
      };
    },
  },
  policy: {
    usage:
      'candor policy check [--config FILE] | test FILE [--config FILE] | schema [--config FILE] [--json]',
    summary:
      'Cedar policies (policy: in candor.yaml) against the actions: check validates them (FILE:LINE:COL), test runs example requests with expected decisions (exit 1 on a mismatch), schema prints the generated Cedar schema',
    details: [
      'check    parse and validate every policy file against the Cedar schema generated from the',
      '         actions (a typo in an attribute name is an error at its FILE:LINE:COL); exit 1',
      'test F   run the cases of F (YAML, a list under cases:, each with name, action, args,',
      '         principal, operation, time, totals, expect: allow|deny|require_approval and the',
      '         expected policies); exit 1 on any mismatch',
      'schema   print the Cedar schema (--json: its JSON form)',
    ].join('\n'),
    load: () => import('./commands/policy.js'),
  },
  approve: {
    usage:
      'candor approve list [--json] | show ID | yes ID | no ID | watch | lock | unlock [--config FILE | --dir DIR] [--by NAME]',
    summary: 'answer pending approval requests; lock/unlock the gate when no vault is configured',
    load: () => import('./commands/approve.js'),
  },
  audit: {
    usage:
      'candor audit verify PATH [--log-key KEY] [--witness-key KEY] [--trusted CHECKPOINT] [--json] | export [--config FILE | --ledger URL] --out FILE [--sign-key FILE] [--log-key KEY] [--witness-key KEY] [--checkpoint FILE] | decrypt PATH --key FILE [--json] | keygen --kind seal|log|witness --name NAME --out FILE | status [--ledger URL]',
    summary:
      'verify (offline; only keys you pass with --log-key/--witness-key are trusted, a bundle cannot vouch for itself), export and decrypt the tamper-evident ledger',
    load: () => import('./commands/audit.js'),
  },
  witness: {
    usage: 'candor witness serve --key FILE --port N --log-key KEY [--state FILE]',
    summary: 'run a C2SP tlog-witness that cosigns consistent checkpoints',
    load: () => import('./commands/witness.js'),
  },
  transcript: {
    usage: 'candor transcript check FILE [--rules F] [--json]',
    summary:
      'check an agent transcript (JSONL) against the allowed transitions; exit 1 on a violation',
    load: () => import('./commands/transcript.js'),
  },
  ui: {
    usage: 'candor ui [--config FILE | --ledger URL] [--port N] [--host H] [--matrix REPORT.json]',
    summary:
      'read-only investigation view in the browser: operations, timelines, sessions, audit, matrix report, live (127.0.0.1, prints a URL with a fresh token)',
    load: () => import('./commands/ui.js'),
  },
  schema: {
    usage: 'candor schema envelope|matrix|fixture|config',
    summary: 'print a JSON Schema (draft 2020-12)',
    load: () => import('./commands/schema.js'),
  },
};

/** Help lines stay within this width, wrapped between options (never inside brackets). */
export const HELP_WIDTH = 100;

const TOP_FLAGS = ['--help', '--version'];

/** `candor <command> --help`: every alternative of the usage, the summary and the details. */
function commandHelp(name: string, entry: CommandEntry): string {
  const usage = usageAlternatives(entry.usage).flatMap((u, i) =>
    wrapUsage(spell(name, u), HELP_WIDTH, i === 0 ? 'Usage: ' : '       ', '           '),
  );
  const summary = wrapText(entry.summary, HELP_WIDTH, '');
  return [...usage, '', ...summary, ...(entry.details ? ['', entry.details] : []), ''].join('\n');
}

// Alternatives of one command are written `a | b`; each gets its own line, fully spelled out.
const spell = (name: string, u: string): string =>
  u.startsWith('candor ') ? u : u.startsWith(`${name} `) ? `candor ${u}` : `candor ${name} ${u}`;

export function helpText(): string {
  const lines = Object.entries(COMMANDS).flatMap(([name, c]) => [
    ...usageAlternatives(c.usage).flatMap((u) =>
      wrapUsage(spell(name, u), HELP_WIDTH, '  ', '        '),
    ),
    ...wrapText(c.summary, HELP_WIDTH, '      '),
  ]);

  return [
    'candor — make agent tools tell the truth after a failure',
    '',
    'Usage: candor <command> [options]',
    '',
    'Commands:',
    ...lines,
    '',
    'Options:',
    '  --help, -h     show this help (also: candor <command> --help)',
    '  --version, -v  print the version',
    '',
    'Exit codes: 0 ok, 1 a check failed, 2 usage error, 3 environment problem.',
    'Ledger URLs: sqlite:PATH (default sqlite:./.candor/ledger.db), memory:, or postgres://…',
    '',
  ].join('\n');
}

export { version };

// A reader that goes away (`candor ops list | head`) closes the pipe: later output is dropped and
// the command finishes normally, instead of dying on an unhandled EPIPE with a stack trace.
let stdoutOpen = true;
let stderrOpen = true;
let guarded = false;
function guardStreams(): void {
  if (guarded) return;
  guarded = true;
  process.stdout.on('error', () => void (stdoutOpen = false));
  process.stderr.on('error', () => void (stderrOpen = false));
}

const defaultIo: CommandIo = {
  out: (s) => void (stdoutOpen && process.stdout.write(s)),
  err: (s) => void (stderrOpen && process.stderr.write(s)),
};

/** One line for an unexpected failure: its message, never a stack or an internal class name. */
function failureLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  const first = message.split('\n')[0]!.trim() || 'unknown error';
  return typeof code === 'string' && !first.includes(code) ? `${first} (${code})` : first;
}

/** Every `--ledger URL` is checked before a command starts: a bad one is a usage error everywhere. */
function checkLedgerFlags(args: readonly string[]): void {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') return;
    const url =
      arg === '--ledger' ? args[i + 1] : arg.startsWith('--ledger=') ? arg.slice(9) : null;
    if (url === null || url === undefined) continue;
    const parsed = parseLedgerUrl(url);
    if (!parsed.ok) throw new CliUsageError(`--ledger: ${parsed.failure.message}`);
  }
}

export async function main(argv: string[], io: CommandIo = defaultIo): Promise<number> {
  if (io === defaultIo) guardStreams();
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.out(helpText());
    return name === undefined ? Exit.usage : Exit.ok;
  }
  if (name === '--version' || name === '-v') {
    io.out(`${version()}\n`);
    return Exit.ok;
  }
  const entry = COMMANDS[name];
  if (!entry) {
    if (name.startsWith('-')) {
      const flag = name.split('=')[0]!;
      io.err(`candor: unknown option ${flag}${suggestion(flag, TOP_FLAGS)} (see candor --help)\n`);
    } else {
      const hint = suggestion(name, Object.keys(COMMANDS), 'candor ');
      io.err(`candor: unknown command "${name}"${hint} (see candor --help)\n`);
    }
    return Exit.usage;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(commandHelp(name, entry));
    return Exit.ok;
  }
  try {
    checkLedgerFlags(rest);
    const mod = await entry.load();
    return await mod.run(rest, io);
  } catch (error) {
    if (error instanceof CliUsageError) {
      io.err(`candor ${name}: ${error.message}\n`);
      return Exit.usage;
    }
    // No command prints a stack trace (DESIGN.md §7): what was not foreseen is still one line.
    io.err(`candor ${name}: ${failureLine(error)}\n`);
    return Exit.environment;
  }
}
