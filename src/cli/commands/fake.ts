// candor fake serve [--fixtures DIR] [--port N] [--host H] [--seed N] [--log FILE]
// candor fake serve --openapi SPEC [--idempotency honoured|ignored] [...]
// Starts the fault-injecting fake on loopback, prints its URL on stdout, and runs until SIGINT or
// SIGTERM. It is driven through its admin API (see src/fakes/README.md).
import { loadFixtureDir, type FixtureCase } from '../../fakes/fixtures.js';
import { loadOpenApi } from '../../fakes/openapi-doc.js';
import { parseServerVars } from './init.js';
import { startOpenApiFake, type OpenApiIdempotency } from '../../fakes/openapi-fake.js';
import { startFakeService, type FakeServiceOptions } from '../../fakes/service.js';
import { Exit, parseFlags, untilStopped, CliUsageError, type CommandIo } from '../io.js';

const USAGE =
  'usage: candor fake serve [--fixtures DIR | --openapi SPEC [--idempotency honoured|ignored] [--server-var NAME=VALUE,...]] [--port N] [--host H] [--seed N] [--log FILE]';

export interface RunOptions {
  /** Stops the service like a signal does (tests). */
  signal?: AbortSignal;
}

export async function run(args: string[], io: CommandIo, opts: RunOptions = {}): Promise<number> {
  let options: FakeServiceOptions;
  let fixtures: string | undefined;
  let openapi: string | undefined;
  let idempotency: OpenApiIdempotency | undefined;
  let serverVars: Record<string, string> = {};
  try {
    const parsed = parseArgs(args);
    options = parsed.options;
    fixtures = parsed.fixtures;
    openapi = parsed.openapi;
    idempotency = parsed.idempotency;
    serverVars = parsed.serverVars;
  } catch (error) {
    if (!(error instanceof CliUsageError)) throw error;
    io.err(`candor fake: ${error.message}\n`);
    return Exit.usage;
  }
  if (fixtures !== undefined) {
    const loaded = await loadFixtureDir(fixtures);
    if (!loaded.ok) {
      io.err(`candor fake: fixtures ${loaded.failure.file}: ${loaded.failure.message}\n`);
      return Exit.usage;
    }
    options.fixtures = loaded.value satisfies FixtureCase[];
  }
  let model;
  if (openapi !== undefined) {
    const loaded = await loadOpenApi(openapi, {
      server_vars: serverVars,
      progress: (line) => io.err(`candor fake: ${line}\n`),
    });
    if (!loaded.ok) {
      io.err(`candor fake: ${loaded.failure.message}\n`);
      return loaded.failure.kind === 'unreadable' ? Exit.environment : Exit.usage;
    }
    for (const w of loaded.value.warnings) io.err(`candor fake: warning: ${w}\n`);
    model = loaded.value;
  }
  let service;
  try {
    service =
      model === undefined
        ? await startFakeService(options)
        : await startOpenApiFake(model, {
            ...options,
            ...(idempotency ? { idempotency_mode: idempotency } : {}),
          });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    io.err(
      `candor fake: cannot listen on ${options.host ?? '127.0.0.1'}:${options.port ?? 0} (${code})\n`,
    );
    return Exit.environment;
  }
  // Listening for the signal before the URL is out: whoever waits for the URL may stop it at once.
  const stopped = untilStopped(opts.signal);
  io.out(`${service.url}\n`);
  await stopped;
  await service.close();
  return Exit.ok;
}

function parseArgs(args: string[]): {
  options: FakeServiceOptions;
  fixtures: string | undefined;
  openapi: string | undefined;
  idempotency: OpenApiIdempotency | undefined;
  serverVars: Record<string, string>;
} {
  const { flags, positional } = parseFlags(args, {
    fixtures: 'string',
    openapi: 'string',
    idempotency: 'string',
    'server-var': 'string',
    port: 'string',
    host: 'string',
    seed: 'string',
    log: 'string',
  });
  if (positional.length !== 1 || positional[0] !== 'serve') throw new CliUsageError(USAGE);
  const options: FakeServiceOptions = {};
  const str = (name: string): string | undefined =>
    typeof flags[name] === 'string' ? flags[name] : undefined;
  const port = str('port');
  if (port !== undefined) {
    if (!/^\d{1,5}$/.test(port) || Number(port) > 65535)
      throw new CliUsageError(`--port must be 0..65535, not "${port}"`);
    options.port = Number(port);
  }
  const host = str('host');
  if (host !== undefined) {
    const h = host === 'localhost' ? '127.0.0.1' : host;
    if (!/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h))
      throw new CliUsageError(`--host must be a loopback address (127.x.y.z), not "${host}"`);
    options.host = h;
  }
  const seed = str('seed');
  if (seed !== undefined) {
    if (!/^-?\d{1,15}$/.test(seed))
      throw new CliUsageError(`--seed must be an integer, not "${seed}"`);
    options.seed = Number(seed);
  }
  const log = str('log');
  if (log !== undefined) options.logFile = log;
  const openapi = str('openapi');
  if (openapi !== undefined && str('fixtures') !== undefined)
    throw new CliUsageError('--fixtures and --openapi cannot be combined');
  const idempotency = str('idempotency');
  if (idempotency !== undefined && idempotency !== 'honoured' && idempotency !== 'ignored')
    throw new CliUsageError(`--idempotency must be honoured or ignored, not "${idempotency}"`);
  if (idempotency !== undefined && openapi === undefined)
    throw new CliUsageError('--idempotency needs --openapi');
  if (str('server-var') !== undefined && openapi === undefined)
    throw new CliUsageError('--server-var needs --openapi');
  return {
    options,
    fixtures: str('fixtures'),
    openapi,
    idempotency,
    serverVars: parseServerVars(str('server-var')),
  };
}
