// candor witness serve --key FILE --port N --log-key K[,K…] [--state FILE] [--host H]
// Runs a C2SP tlog-witness add-checkpoint endpoint until SIGINT/SIGTERM. The key file holds the
// witness signer key (type 0x04, from `candor audit keygen --kind witness`); each --log-key is a log
// verifier key (or a file holding one) whose origin is the key name. Without --state the witness
// forgets what it cosigned when it stops, so production runs always pass --state.
import { readFileSync } from 'node:fs';
import {
  SigType,
  parseSignerKey,
  parseVerifierKey,
  type NoteVerifier,
} from '../../ledger/chain/note.js';
import { fileWitnessState, memoryWitnessState, startWitness } from '../../ledger/chain/witness.js';
import { Exit, CliUsageError, parseFlags, type CommandIo } from '../io.js';
import { readKeys } from './audit.js';

const USAGE =
  'usage: candor witness serve --key FILE --port N --log-key KEY[,KEY] [--state FILE] [--host HOST]';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'serve') throw new CliUsageError(USAGE);
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    return await serve(rest, io, stop.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** Serves until `signal` aborts; separate from `run` so tests can stop it without signals. */
export async function serve(
  args: string[],
  io: CommandIo,
  signal: AbortSignal,
  onListening?: (url: string) => void,
): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    key: 'string',
    port: 'string',
    host: 'string',
    'log-key': 'string',
    state: 'string',
  });
  if (positional.length > 0 || typeof flags.key !== 'string' || typeof flags.port !== 'string')
    throw new CliUsageError(USAGE);
  const port = Number(flags.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new CliUsageError(`--port: ${flags.port} is not a port number`);
  let keyText: string;
  try {
    keyText = readFileSync(flags.key, 'utf8').trim();
  } catch {
    io.err(`candor witness: cannot read key file ${JSON.stringify(flags.key)}\n`);
    return Exit.environment;
  }
  const signer = parseSignerKey(keyText);
  if (!signer.ok) throw new CliUsageError(`--key: ${signer.failure}`);
  if (signer.value.type !== SigType.cosignature_v1)
    throw new CliUsageError('--key: a witness key must be a cosignature (type 0x04) key');
  const logs: NoteVerifier[] = readKeys(flags['log-key']).map((k) => {
    const v = parseVerifierKey(k);
    if (!v.ok || v.value.type !== SigType.ed25519)
      throw new CliUsageError(`--log-key: ${v.ok ? 'not an Ed25519 log key' : v.failure}`);
    return v.value;
  });
  if (logs.length === 0) throw new CliUsageError('--log-key: at least one log key is required');
  const state =
    typeof flags.state === 'string' ? fileWitnessState(flags.state) : memoryWitnessState();
  if (typeof flags.state !== 'string')
    io.err('warning: no --state file: cosigned sizes are forgotten on exit\n');
  let w;
  try {
    w = await startWitness(
      { signer: signer.value, logs, state },
      { port, ...(typeof flags.host === 'string' ? { host: flags.host } : {}) },
    );
  } catch (err) {
    io.err(`candor witness: cannot listen: ${(err as Error).message}\n`);
    return Exit.environment;
  }
  io.out(
    `witness ${signer.value.name} listening on ${w.url}/add-checkpoint for ${logs.map((l) => l.name).join(', ')}\n`,
  );
  onListening?.(w.url);
  if (!signal.aborted)
    await new Promise<void>((resolve) =>
      signal.addEventListener('abort', () => resolve(), { once: true }),
    );
  await w.close();
  return Exit.ok;
}
