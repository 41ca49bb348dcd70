// candor probe mcp --config FILE [--ledger URL] [--tool NAME] [--allow-rerun] [--json FILE]
// [--markdown FILE]
// The retry-safety report for the upstream MCP servers of a configuration (src/matrix/mcp-probe.ts).
// It calls the upstreams' tools for real, each call an operation in the ledger: point it at a
// disposable environment. Exit 0 when no tool duplicates on retry and every upstream was fresh, 1
// otherwise, 2 for a usage error, 3 when an upstream, the ledger or the vault cannot be opened.
import { writeFileSync } from 'node:fs';
import { formatIssue } from '../../config/locate.js';
import { loadConfig } from '../../config/load.js';
import { probeMarkdown, probeUpstreams } from '../../matrix/mcp-probe.js';
import { configCredentials } from '../../config/credentials.js';
import { composition, CompositionError, openConfigured } from '../../config/open.js';
import { createRuntime } from '../../runtime.js';
import { openFailed } from '../vault.js';
import { checkOutputPath, Exit, parseFlags, CliUsageError, type CommandIo } from '../io.js';

const USAGE =
  'usage: candor probe mcp --config FILE [--ledger URL] [--tool NAME] [--allow-rerun] [--json FILE] [--markdown FILE]';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    config: 'string',
    ledger: 'string',
    'allow-rerun': 'boolean',
    tool: 'string',
    json: 'string',
    markdown: 'string',
  });
  if (positional[0] !== 'mcp' || positional.length > 1) throw new CliUsageError(USAGE);
  if (typeof flags.config !== 'string')
    throw new CliUsageError(`--config FILE is required (${USAGE})`);
  if (typeof flags.json === 'string') checkOutputPath('json', flags.json);
  if (typeof flags.markdown === 'string') checkOutputPath('markdown', flags.markdown);
  const file = flags.config;
  const loaded = await loadConfig(file);
  if (!loaded.ok) {
    if (loaded.failure.code === 'unreadable') {
      io.err(`candor probe: ${loaded.failure.message}\n`);
      return Exit.environment;
    }
    for (const issue of loaded.failure.issues) io.err(`${formatIssue(issue)}\n`);
    return Exit.usage;
  }
  const upstreams = loaded.value.config.upstreams ?? {};
  if (Object.keys(upstreams).length === 0) {
    io.err(`candor probe: ${file}: upstreams: no upstream MCP server is configured\n`);
    return Exit.usage;
  }
  const url = typeof flags.ledger === 'string' ? flags.ledger : loaded.value.config.ledger;
  // The composition root (config/open.ts): vault, ledger and upstreams as `serve` opens them, and
  // the probe's own runtime; everything released in reverse order however the probe ends.
  const c = composition((line) => io.err(`candor probe: ${line}\n`));
  try {
    const opened = await openConfigured(c, {
      loaded: loaded.value,
      ledgerUrl: url,
      upstreams: true,
      log: (line) => io.err(`${line}\n`),
    });
    const { ledger, vault, redactor } = opened;
    const started = opened.upstreams!;
    // The probe's own runtime: its calls are operations in the ledger. No approval gate: the probe
    // is run by a person against a disposable upstream, as before it recorded anything.
    const runtime = await c.open(
      'runtime',
      () =>
        createRuntime({
          ledger,
          credentials: configCredentials(loaded.value.config, {
            ...(vault ? { vault } : {}),
            onSecret: (s) => void redactor.addSecret(s),
          }),
          redactor,
          agent: 'candor probe',
          transports: { mcp: started.transport },
          actions: started.actions.map((a) => a.definition),
        }),
      async (r) => {
        await r.endSession('probe finished').catch(() => undefined);
        await r.close();
      },
    );
    const tool = typeof flags.tool === 'string' ? flags.tool : undefined;
    const results = redactor.redactValue(
      await probeUpstreams(started, upstreams, {
        runtime,
        ledger,
        ...(tool !== undefined ? { only: tool } : {}),
        allowRerun: flags['allow-rerun'] === true,
      }),
    );
    if (tool !== undefined && results.length === 0) {
      io.err(`candor probe: --tool ${tool}: no tool of that name in the upstreams of ${file}\n`);
      return Exit.usage;
    }
    const markdown = probeMarkdown(results);
    if (typeof flags.json === 'string')
      writeFileSync(flags.json, `${JSON.stringify({ tools: results }, null, 2)}\n`);
    if (typeof flags.markdown === 'string') writeFileSync(flags.markdown, markdown);
    io.out(markdown);
    for (const r of results)
      if (r.verdict === 'not fresh')
        io.err(`candor probe: ${r.upstream}/${r.tool} not probed: ${r.reason}\n`);
    return results.some((r) => r.verdict === 'duplicates on retry' || r.verdict === 'not fresh')
      ? Exit.check_failed
      : Exit.ok;
  } catch (error) {
    if (!(error instanceof CompositionError)) throw error;
    return openFailed('probe', error, { io, file, ledgerUrl: url });
  } finally {
    await c.close();
  }
}
