// candor matrix run FILE --config candor.yaml [--openapi SPEC] [--target fake|proxy --upstream URL]
//   [--idempotency honoured|ignored] [--json F] [--junit F] [--report F] [--ledger URL] [--only ID,...]
// The matrix on the user's own actions: against the OpenAPI fake (default; the document comes from
// --openapi or the matrix's `openapi:`), or through the fault-injecting proxy in front of a real
// service. Prints the rows, the table, the per-action report, and the summary; exit 1 when a row
// fails or the service contradicts a configured claim.
import { writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { loadConfig } from '../../config/load.js';
import { loadOpenApi } from '../../fakes/openapi-doc.js';
import { DEFAULT_LEDGER_URL } from '../../ledger/open.js';
import { runMatrixOnConfig, type ConfigTarget } from '../../matrix/config-harness.js';
import { loadMatrix } from '../../matrix/load.js';
import {
  ownReport,
  ownReportText,
  probeIdempotency,
  type IdempotencyProbe,
} from '../../matrix/own-report.js';
import {
  failureText,
  progressLine,
  summaryLine,
  tableText,
  toJson,
  toJunit,
} from '../../matrix/report.js';
import { Exit, CliUsageError, onlyRows, type CommandIo } from '../io.js';

const USAGE =
  'usage: candor matrix run FILE --config candor.yaml [--openapi SPEC] [--target fake|proxy --upstream URL] [--idempotency honoured|ignored] [--json F] [--junit F] [--report F] [--ledger URL] [--only ID,...]';

export async function runOnConfig(
  flags: Record<string, string | boolean>,
  positional: string[],
  io: CommandIo,
): Promise<number> {
  const str = (n: string): string | undefined =>
    typeof flags[n] === 'string' ? flags[n] : undefined;
  if (positional.length !== 1) throw new CliUsageError(USAGE);
  const file = positional[0]!;
  const targetKind = str('target') ?? 'fake';
  if (targetKind !== 'fake' && targetKind !== 'proxy')
    throw new CliUsageError(`--target must be fake or proxy, not "${targetKind}"`);
  const upstream = str('upstream');
  if (targetKind === 'proxy' && upstream === undefined)
    throw new CliUsageError('--target proxy needs --upstream URL');
  if (targetKind === 'fake' && upstream !== undefined)
    throw new CliUsageError('--upstream is only used with --target proxy');
  const idempotency = str('idempotency');
  if (idempotency !== undefined && idempotency !== 'honoured' && idempotency !== 'ignored')
    throw new CliUsageError(`--idempotency must be honoured or ignored, not "${idempotency}"`);
  if (idempotency !== undefined && targetKind !== 'fake')
    throw new CliUsageError('--idempotency sets how the OpenAPI fake treats keys (--target fake)');

  const loaded = await loadMatrix(file);
  if (!loaded.ok) {
    io.err(`candor matrix: ${loaded.failure.message}\n`);
    return loaded.failure.kind === 'unreadable' ? Exit.environment : Exit.usage;
  }
  const config = await loadConfig(str('config')!);
  if (!config.ok) {
    io.err(`candor matrix: ${config.failure.message.split('\n')[0]}\n`);
    return config.failure.code === 'unreadable' ? Exit.environment : Exit.usage;
  }
  const names = new Set(config.value.config.actions.map((a) => a.name));
  const unknown = loaded.value.rows.findIndex((r) => !names.has(r.operation));
  if (unknown >= 0)
    throw new CliUsageError(
      `${file}: rows.${unknown}.operation: "${loaded.value.rows[unknown]!.operation}" is no action of ${config.value.file}`,
    );
  const only =
    str('only') !== undefined
      ? onlyRows(
          str('only')!,
          loaded.value.rows.map((r) => r.id),
          loaded.value.matrix,
        )
      : null;
  let target: ConfigTarget;
  if (targetKind === 'fake') {
    const specRef = str('openapi');
    const spec =
      specRef ??
      (loaded.value.openapi !== undefined
        ? resolve(dirname(file), loaded.value.openapi)
        : undefined);
    if (spec === undefined)
      throw new CliUsageError(
        `${file}: the matrix names no openapi document; pass --openapi SPEC or use --target proxy`,
      );
    const model = await loadOpenApi(spec);
    if (!model.ok) {
      io.err(`candor matrix: ${model.failure.message}\n`);
      return model.failure.kind === 'unreadable' ? Exit.environment : Exit.usage;
    }
    target = {
      kind: 'fake',
      model: model.value,
      ...(idempotency !== undefined ? { idempotency: idempotency } : {}),
    };
  } else {
    target = { kind: 'proxy', upstream: upstream! };
  }
  const ledgerUrl = str('ledger') ?? DEFAULT_LEDGER_URL;
  io.out(
    `running ${only ? only.size : loaded.value.rows.length} rows of "${loaded.value.matrix}" on the actions of ${config.value.file} ${targetKind === 'fake' ? 'against the OpenAPI fake' : `through the proxy in front of ${upstream}`}, ledger ${ledgerUrl}\n`,
  );
  let probes = new Map<string, IdempotencyProbe>();
  const result = await runMatrixOnConfig(loaded.value, {
    config: config.value,
    target,
    ledgerUrl,
    ...(only ? { filter: (r) => only.has(r.id) } : {}),
    ...(flags.quiet ? {} : { onRow: (r, i, total) => io.out(`${progressLine(r, i, total)}\n`) }),
    beforeRows: async (service, actions) => {
      probes = await probeIdempotency(service, actions, loaded.value);
    },
  });
  if (!result.ok) {
    io.err(`candor matrix: ${result.failure.message}\n`);
    return Exit.environment;
  }
  const report = result.value;
  io.out(`\n${tableText(report)}\n`);
  for (const r of report.rows)
    if (!r.passed && r.skipped === undefined) io.out(`${failureText(r)}\n`);
  const own = ownReport(config.value, report, probes);
  io.out(ownReportText(own));
  try {
    if (str('json') !== undefined) await writeFile(str('json')!, toJson(report));
    if (str('junit') !== undefined) await writeFile(str('junit')!, toJunit(report));
    if (str('report') !== undefined)
      await writeFile(str('report')!, `${JSON.stringify(own, null, 2)}\n`);
  } catch (e) {
    io.err(
      `candor matrix: cannot write a report (${(e as NodeJS.ErrnoException).code ?? 'error'})\n`,
    );
    return Exit.environment;
  }
  io.out(`${summaryLine(report)}\n`);
  return report.summary.failed === 0 && own.problems === 0 ? Exit.ok : Exit.check_failed;
}
