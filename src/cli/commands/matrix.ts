// candor matrix run FILE [--json F] [--junit F] [--ledger URL] [--only ID,...] [--concurrency N | --serial]
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
import { checkOutputPath, onlyRows, parseFlags, CliUsageError, type CommandIo } from '../io.js';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === 'run') return runFile(rest, io);
  if (sub === 'generate') {
    const mod = await import('./matrix-generate.js');
    return mod.run(rest, io);
  }
  throw new CliUsageError(
    'usage: candor matrix run FILE [--json F] [--junit F] [--ledger URL] [--only ID,...] [--concurrency N | --serial] [--config candor.yaml [--target fake|proxy --upstream URL]] | candor matrix generate --openapi SPEC [--config candor.yaml]',
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
    concurrency: 'string',
    serial: 'boolean',
  });
  const concurrency = concurrencyOf(flags);
  if (typeof flags.config === 'string') {
    // The user's own actions (against the OpenAPI fake or a proxied real service) run one row at a
    // time: their rows may share state the matrix cannot see.
    if (flags.concurrency !== undefined)
      throw new CliUsageError('--concurrency: rows with --config run one at a time');
    delete flags.serial;
    const mod = await import('./matrix-config.js');
    return mod.runOnConfig(flags, positional, io);
  }
  for (const f of ['openapi', 'target', 'upstream', 'idempotency', 'report'])
    if (flags[f] !== undefined) throw new CliUsageError(`--${f} needs --config candor.yaml`);
  if (positional.length !== 1)
    throw new CliUsageError(
      'usage: candor matrix run FILE [--json F] [--junit F] [--ledger URL] [--only ID,...] [--concurrency N | --serial]',
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
  const only =
    typeof flags.only === 'string'
      ? onlyRows(
          flags.only,
          loaded.value.rows.map((r) => r.id),
          loaded.value.matrix,
        )
      : null;
  const ledgerUrl = typeof flags.ledger === 'string' ? flags.ledger : DEFAULT_LEDGER_URL;
  if (banner) io.out(banner);
  io.out(
    `running ${only ? only.size : loaded.value.rows.length} rows of "${loaded.value.matrix}" against the fake service, ${concurrency === 1 ? 'one at a time' : `up to ${concurrency} at once`}, ledger ${ledgerUrl}\n`,
  );
  const result = await runMatrixWithFake(loaded.value, {
    ledgerUrl,
    // Under CI an SSH row that cannot run fails; outside CI it is skipped with the reason.
    ci: process.env.CI === 'true',
    concurrency,
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

/** Rows at once: --serial is 1; --concurrency N (1 to 64); otherwise DEFAULT_CONCURRENCY. */
export const DEFAULT_CONCURRENCY = 4;

function concurrencyOf(flags: Record<string, string | boolean>): number {
  const given = flags.concurrency;
  if (given === undefined) return flags.serial === true ? 1 : DEFAULT_CONCURRENCY;
  if (flags.serial === true)
    throw new CliUsageError('--serial and --concurrency: give one of them');
  const n = Number(given);
  if (typeof given !== 'string' || !/^\d+$/.test(given) || n < 1 || n > 64)
    throw new CliUsageError(
      `--concurrency: expected a whole number from 1 to 64, got "${String(given)}"`,
    );
  return n;
}
