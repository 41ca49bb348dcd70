// candor demo: the main job. Starts the fake service, runs the reference matrix through the real
// runtime with its own embedded SQLite ledger (./.candor/demo.db, apart from any gateway's ledger;
// --reset starts it fresh), prints the table and one summary line, then how to look at it with
// the command this user has (`candor …` when installed, `node …/bin/candor.js …` otherwise).
import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { CliUsageError, parseFlags, type CommandIo } from '../io.js';
import { cliCommand } from '../invocation.js';
import { runFile } from './matrix.js';

export const DEMO_LEDGER_FILE = '.candor/demo.db';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    ledger: 'string',
    quiet: 'boolean',
    serial: 'boolean',
    concurrency: 'string',
    reset: 'boolean',
  });
  if (positional.length > 0) throw new CliUsageError(`unexpected argument "${positional[0]}"`);
  if (flags.reset === true && typeof flags.ledger === 'string')
    throw new CliUsageError(
      `--reset starts the demo's own ledger (${DEMO_LEDGER_FILE}) fresh; it does not apply to --ledger`,
    );
  const file = fileURLToPath(new URL('../../../examples/matrix/reference.yaml', import.meta.url));
  const ledger = typeof flags.ledger === 'string' ? flags.ledger : `sqlite:./${DEMO_LEDGER_FILE}`;
  if (flags.reset === true)
    for (const suffix of ['', '-wal', '-shm', '-journal'])
      await rm(`${DEMO_LEDGER_FILE}${suffix}`, { force: true });
  const code = await runFile(
    [
      file,
      '--ledger',
      ledger,
      ...(flags.quiet ? ['--quiet'] : []),
      ...(flags.serial ? ['--serial'] : []),
      ...(typeof flags.concurrency === 'string' ? ['--concurrency', flags.concurrency] : []),
    ],
    io,
    'candor demo: the reference failure matrix through the real engine\n',
  );
  const cli = cliCommand();
  io.out(
    [
      '',
      'Inspect what happened:',
      `  ${cli} ops list --ledger ${ledger} --state unknown,open     operations a person or a lookup must settle`,
      `  ${cli} ops show OP_ID --ledger ${ledger}                    one operation: intent, attempts, observations`,
      '',
      'See it in the browser (timelines, sessions, audit; read-only, 127.0.0.1):',
      `  ${cli} ui --ledger ${ledger}`,
      ...(flags.reset === true || typeof flags.ledger === 'string'
        ? []
        : ['', `Each run adds to this ledger; start it fresh with: ${cli} demo --reset`]),
      '',
    ].join('\n'),
  );
  return code;
}
