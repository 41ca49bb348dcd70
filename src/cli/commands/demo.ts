// candor demo: the main job. Starts the fake service, runs the reference matrix through the real
// runtime with the embedded SQLite ledger under ./.candor/, prints the table and one summary line.
import { fileURLToPath } from 'node:url';
import { parseFlags, type CommandIo } from '../io.js';
import { runFile } from './matrix.js';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags } = parseFlags(args, {
    ledger: 'string',
    quiet: 'boolean',
    serial: 'boolean',
    concurrency: 'string',
  });
  const file = fileURLToPath(new URL('../../../examples/matrix/reference.yaml', import.meta.url));
  const ledger = typeof flags.ledger === 'string' ? flags.ledger : 'sqlite:./.candor/ledger.db';
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
  io.out(
    [
      '',
      'Inspect what happened:',
      `  npx candor ops list --ledger ${ledger} --state unknown,open     operations a person or a lookup must settle`,
      `  npx candor ops show OP_ID --ledger ${ledger}                    one operation: intent, attempts, observations`,
      '',
      'See it in the browser (timelines, sessions, audit; read-only, 127.0.0.1):',
      `  npx candor ui --ledger ${ledger}`,
      '',
    ].join('\n'),
  );
  return code;
}
