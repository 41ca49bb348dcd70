// candor matrix run FILE [--json F] [--junit F] [--ledger URL] [--only ID,...]
import { writeFile } from 'node:fs/promises';
import { DEFAULT_LEDGER_URL } from '../../ledger/open.js';
import { runMatrixWithFake } from '../../matrix/harness.js';
import { loadMatrix } from '../../matrix/load.js';
import {
  failureText,
  progressLine,
  summaryLine,
  tableText,
  toJson,
  toJunit,
} from '../../matrix/report.js';
import { checkOutputPath, parseFlags, CliUsageError, type CommandIo } from '../io.js';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === 'run') return runFile(rest, io);
  if (sub === 'generate') {
    const mod = await import('./matrix-generate.js');
    return mod.run(rest, io);
  }
  throw new CliUsageError(
    'usage: candor matrix run FILE [--json F] [--junit F] [--ledger URL] [--only ID,...] [--config candor.yaml [--target fake|proxy --upstream URL]] | candor matrix generate --openapi SPEC [--config candor.yaml]',
  );
}

export async function runFile(args: string[], io: CommandIo, banner?: string): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    json: 'string',
    junit: 'string',
    ledger: 'string',
    only: 'string',
    quiet: 'boolean',
    config: 'string',
    openapi: 'string',
    target: 'string',
    upstream: 'string',
    idempotency: 'string',
    report: 'string',
  });
  if (typeof flags.config === 'string') {
    const mod = await import('./matrix-config.js');
    return mod.runOnConfig(flags, positional, io);
  }
  for (const f of ['openapi', 'target', 'upstream', 'idempotency', 'report'])
    if (flags[f] !== undefined) throw new CliUsageError(`--${f} needs --config candor.yaml`);
  if (positional.length !== 1)
    throw new CliUsageError(
      'usage: candor matrix run FILE [--json F] [--junit F] [--ledger URL] [--only ID,...]',
    );
  const file = positional[0]!;
  for (const flag of ['json', 'junit'] as const) {
    const out = flags[flag];
    if (typeof out === 'string') checkOutputPath(flag, out);
  }
  const loaded = await loadMatrix(file);
  if (!loaded.ok) {
    if (loaded.failure.kind === 'unreadable') {
      io.err(`candor matrix: ${loaded.failure.message}\n`);
      return 3;
    }
    throw new CliUsageError(loaded.failure.message);
  }
  const only = typeof flags.only === 'string' ? new Set(flags.only.split(',')) : null;
  const ledgerUrl = typeof flags.ledger === 'string' ? flags.ledger : DEFAULT_LEDGER_URL;
  if (banner) io.out(banner);
  io.out(
    `running ${only ? only.size : loaded.value.rows.length} rows of "${loaded.value.matrix}" against the fake service, ledger ${ledgerUrl}\n`,
  );
  const result = await runMatrixWithFake(loaded.value, {
    ledgerUrl,
    // Under CI an SSH row that cannot run fails; outside CI it is skipped with the reason.
    ci: process.env.CI === 'true',
    ...(only ? { filter: (r) => only.has(r.id) } : {}),
    ...(flags.quiet ? {} : { onRow: (r, i, total) => io.out(`${progressLine(r, i, total)}\n`) }),
  });
  if (!result.ok) {
    io.err(`candor matrix: ${result.failure.message}\n`);
    return 3;
  }
  const report = result.value;
  io.out(`\n${tableText(report)}\n`);
  for (const r of report.rows)
    if (!r.passed && r.skipped === undefined) io.out(`${failureText(r)}\n`);
  const skipped = report.rows.find((r) => r.skipped !== undefined)?.skipped;
  if (skipped !== undefined) io.out(`${report.summary.skipped} SSH rows skipped: ${skipped}\n`);
  if (typeof flags.json === 'string') await writeFile(flags.json, toJson(report));
  if (typeof flags.junit === 'string') await writeFile(flags.junit, toJunit(report));
  io.out(`${summaryLine(report)}\n`);
  return report.summary.failed === 0 ? 0 : 1;
}
