// candor ui [--config FILE | --ledger URL] [--port N] [--host H] [--matrix REPORT.json]
// Serves the read-only investigation view and prints its URL with a fresh access token; runs until
// interrupted (Ctrl-C). With `approvals.web` in the configuration it also serves the approvals page
// (/approvals) with its own sign-in, answering the gateway's approval queue.
import { readFile } from 'node:fs/promises';
import { DEFAULT_LEDGER_URL } from '../../ledger/open.js';
import { composition, CompositionError, openLedgerStep } from '../../config/open.js';
import { configFrom } from '../config-ledger.js';
import { cliCommand } from '../invocation.js';
import { parseMatrixReport } from '../../web/pages/matrix.js';
import { startUi } from '../../web/server.js';
import { approvalQueue } from '../../approvals/approvers/queue.js';
import { defaultApprovalsDir } from '../../config/paths.js';
import { approverSignIn } from '../../web/approver-signin.js';
import { Exit, parseFlags, untilStopped, CliUsageError, type CommandIo } from '../io.js';

const USAGE =
  'usage: candor ui [--config FILE | --ledger URL] [--port N] [--host H] [--matrix REPORT.json]';

/** A ledger URL fit to print: no password. */
const shown = (url: string): string => url.replace(/(\w+:\/\/[^:/@\s]+):[^@\s]*@/g, '$1:***@');

export async function run(
  args: string[],
  io: CommandIo,
  until: Promise<unknown> = untilStopped(),
): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    ledger: 'string',
    config: 'string',
    port: 'string',
    host: 'string',
    matrix: 'string',
  });
  if (positional.length > 0)
    throw new CliUsageError(`unexpected argument ${positional[0]}; ${USAGE}`);
  const port = typeof flags.port === 'string' ? Number(flags.port) : 0;
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new CliUsageError(`--port must be a port number (0-65535), got ${String(flags.port)}`);
  const host = typeof flags.host === 'string' ? flags.host : '127.0.0.1';
  // The configuration (given, or ./candor.yaml unless only --ledger is given): the pages' recover
  // hints need the actions it declares.
  const onlyLedger = typeof flags.ledger === 'string' && typeof flags.config !== 'string';
  const config = onlyLedger ? null : await configFrom(flags);
  const url =
    typeof flags.ledger === 'string' ? flags.ledger : (config?.config.ledger ?? DEFAULT_LEDGER_URL);
  let matrix = null;
  if (typeof flags.matrix === 'string') {
    let text: string;
    try {
      text = await readFile(flags.matrix, 'utf8');
    } catch {
      throw new CliUsageError(`--matrix: cannot read ${JSON.stringify(flags.matrix)}`);
    }
    matrix = parseMatrixReport(text, flags.matrix);
    if (!matrix.ok) throw new CliUsageError(`--matrix: ${matrix.failure}`);
  }
  // The composition root (config/open.ts): the ledger, then the listener; both released in reverse
  // order when the view stops, and the ledger also when the listener cannot start.
  const c = composition((line) => io.err(`candor ui: ${line}\n`));
  const approvalsSpec = config?.config.approvals;
  const approvals = approvalsSpec?.web
    ? {
        queue: approvalQueue(approvalsSpec.dir ?? defaultApprovalsDir(config!.dir!)),
        signIn: approverSignIn({ config: approvalsSpec.web }),
        four_eyes: approvalsSpec.four_eyes,
        ...(approvalsSpec.web.redirect_uri ? { redirect_uri: approvalsSpec.web.redirect_uri } : {}),
      }
    : null;
  let store;
  let started;
  try {
    store = await openLedgerStep(c, url, { mustExist: true });
    const ledger = store;
    started = await c.open(
      'listen',
      () =>
        startUi({
          store: ledger,
          ledger: shown(url),
          matrix,
          host,
          port,
          approvals,
          commands: {
            cli: cliCommand(),
            config:
              config === null
                ? null
                : typeof flags.config === 'string'
                  ? flags.config
                  : 'candor.yaml',
            ledger: typeof flags.ledger === 'string' ? shown(flags.ledger) : null,
          },
        }),
      (ui) => ui.close(),
    );
  } catch (err) {
    if (!(err instanceof CompositionError)) throw err;
    const f = err.failure;
    if (err.step === 'ledger') {
      if (f.ledgerCode === 'BAD_URL') throw new CliUsageError(f.reason ?? f.message);
      io.err(
        `candor ui: cannot open ledger (${f.ledgerCode ?? 'error'}): ${f.reason ?? f.message}\n`,
      );
      return Exit.environment;
    }
    const code = (err.cause as NodeJS.ErrnoException | undefined)?.code;
    io.err(`candor ui: cannot serve on ${host}:${port} (${code ?? 'error'}): ${f.message}\n`);
    return Exit.environment;
  }
  if (host !== '127.0.0.1' && host !== '::1' && host !== 'localhost') {
    io.err(
      `candor ui: warning: serving on ${host}, reachable beyond this machine (token required)\n`,
    );
  }
  try {
    // One indexed listing query: the view never reads the whole ledger to start.
    const { total } = await store.operations({ limit: 1 });
    io.out(
      [
        `candor ui: ${total} operation(s) from ${shown(url)}, read-only`,
        `open ${started.urlWithToken}`,
        '(the token is new each start; press Ctrl-C to stop)',
        ...(approvals ? [`approvals: ${started.url}approvals (approvers sign in there)`] : []),
        '',
      ].join('\n'),
    );
    await until;
    return Exit.ok;
  } finally {
    await c.close();
  }
}
