// candor init --openapi SPEC [--out FILE] [--origin URL] [--deadline-ms N] [--force]
// Writes a gateway configuration with one action per operation of an OpenAPI 3.0/3.1 document.
// The result is checked with the same loader `candor serve` uses before anything is written, and
// written whole (temporary file, then rename): a bad document leaves no file behind.
import { rename, stat, unlink, writeFile } from 'node:fs/promises';
import { parseConfig } from '../../config/load.js';
import { loadOpenApi } from '../../fakes/openapi-doc.js';
import { notOpenApiDocument } from '../openapi-file.js';
import { declaredClassProblem, planActions } from '../../matrix/openapi-config.js';
import { Exit, parseFlags, CliUsageError, type CommandIo } from '../io.js';

export const USAGE =
  'usage: candor init --openapi SPEC [--out candor.yaml] [--origin URL] [--deadline-ms N] [--force]';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    openapi: 'string',
    out: 'string',
    origin: 'string',
    'deadline-ms': 'string',
    force: 'boolean',
  });
  const spec = flags.openapi;
  if (typeof spec !== 'string' || positional.length > 0) throw new CliUsageError(USAGE);
  const out = typeof flags.out === 'string' ? flags.out : 'candor.yaml';
  const deadline = typeof flags['deadline-ms'] === 'string' ? flags['deadline-ms'] : '5000';
  if (!/^\d{2,7}$/.test(deadline))
    throw new CliUsageError(`--deadline-ms must be a number of milliseconds, not "${deadline}"`);
  const origin = typeof flags.origin === 'string' ? flags.origin : undefined;
  if (origin !== undefined && !/^https?:\/\/[^/?#@\s]+(\/[^?#\s]*)?$/.test(origin))
    throw new CliUsageError(`--origin must be http(s)://host[:port][/prefix], not "${origin}"`);
  if (flags.force !== true && (await exists(out)))
    throw new CliUsageError(`${out} exists; pass --force to replace it`);

  const notSpec = await notOpenApiDocument(spec);
  if (notSpec !== null) {
    io.err(`candor init: ${notSpec}\n`);
    return Exit.usage;
  }
  const loaded = await loadOpenApi(spec);
  if (!loaded.ok) {
    io.err(`candor init: ${loaded.failure.message}\n`);
    return loaded.failure.kind === 'unreadable' ? Exit.environment : Exit.usage;
  }
  const classProblem = declaredClassProblem(loaded.value);
  if (classProblem !== null) {
    io.err(`candor init: ${classProblem}\n`);
    return Exit.usage;
  }
  const { yaml, plans } = planActions(loaded.value, {
    deadline_ms: Number(deadline),
    ...(origin !== undefined ? { origin } : {}),
  });
  // The file must load exactly as `candor serve` would load it.
  const check = parseConfig(yaml, out);
  if (!check.ok) {
    io.err(
      `candor init: the generated configuration does not load: ${check.failure.message.split('\n')[0]}\n`,
    );
    return Exit.usage;
  }
  const tmp = `${out}.${process.pid}.tmp`;
  try {
    await writeFile(tmp, yaml, { flag: 'wx' });
    await rename(tmp, out);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    io.err(`candor init: cannot write ${out} (${(e as NodeJS.ErrnoException).code ?? 'error'})\n`);
    return Exit.environment;
  }
  const guessed = plans.filter((p) => p.choice.guessed).length;
  const todo = plans.filter((p) => p.choice.class !== 'read' && p.client_ref_field === null).length;
  io.out(
    `wrote ${plans.length} actions to ${out} (${guessed} classes guessed, ${todo} writes without a lookup: see the TODO comments)\n`,
  );
  return Exit.ok;
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}
