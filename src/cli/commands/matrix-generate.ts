// candor matrix generate --openapi SPEC [--config candor.yaml] [--out FILE]
// Prints (or writes) a failure matrix generated from an OpenAPI 3.0/3.1 document. With --config the
// rows name the configuration's own actions and run as written (`candor matrix run FILE --config`).
// A spec that is not usable is a usage error naming the file and field (exit 2); an unreadable file
// or an unwritable output is an environment problem (exit 3).
import { readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { dirname, relative, resolve } from 'node:path';
import { loadConfig } from '../../config/load.js';
import { loadOpenApi } from '../../fakes/openapi-doc.js';
import { generateConfigMatrix } from '../../matrix/config-rows.js';
import { generateMatrixFromOpenApi } from '../../matrix/openapi.js';
import { checkOutputPath, Exit, parseFlags, CliUsageError, type CommandIo } from '../io.js';

const USAGE = 'usage: candor matrix generate --openapi SPEC [--config candor.yaml] [--out FILE]';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    openapi: 'string',
    out: 'string',
    config: 'string',
  });
  if (typeof flags.out === 'string') checkOutputPath('out', flags.out);
  const spec = flags.openapi;
  if (typeof spec !== 'string' || positional.length > 0) throw new CliUsageError(USAGE);
  const out = typeof flags.out === 'string' ? flags.out : undefined;
  let yaml: string;
  let summary: (out: string) => string;
  if (typeof flags.config === 'string') {
    const model = await loadOpenApi(spec);
    if (!model.ok) {
      io.err(`candor matrix generate: ${model.failure.message}\n`);
      return model.failure.kind === 'unreadable' ? Exit.environment : Exit.usage;
    }
    const config = await loadConfig(flags.config);
    if (!config.ok) {
      io.err(`candor matrix generate: ${config.failure.message.split('\n')[0]}\n`);
      return config.failure.code === 'unreadable' ? Exit.environment : Exit.usage;
    }
    const where = out !== undefined ? dirname(resolve(out)) : process.cwd();
    const base = spec
      .split(/[\\/]/)
      .at(-1)!
      .replace(/\.(ya?ml|json)$/i, '');
    const generated = generateConfigMatrix(model.value, config.value, {
      openapi_ref: relative(where, resolve(spec)) || spec,
      name: base.toLowerCase().replace(/[^a-z0-9]+/g, '-') || 'own-actions',
    });
    if (!generated.ok) {
      io.err(`candor matrix generate: ${generated.failure.message}\n`);
      return Exit.usage;
    }
    yaml = generated.value.yaml;
    const rows = generated.value.matrix.rows.length;
    const configFile = flags.config;
    summary = (o) =>
      `wrote ${rows} rows for ${config.value.config.actions.length} configured actions to ${o} (they run as written: candor matrix run ${o} --config ${configFile})`;
  } else {
    let text: string;
    try {
      text = await readFile(spec, 'utf8');
    } catch (e) {
      io.err(`candor matrix generate: cannot read ${spec}: ${errCode(e)}\n`);
      return Exit.environment;
    }
    const generated = generateMatrixFromOpenApi(text, spec);
    if (!generated.ok) {
      io.err(`candor matrix generate: ${generated.failure.message}\n`);
      return Exit.usage;
    }
    yaml = generated.value.yaml;
    const { matrix, operations } = generated.value;
    summary = (o) =>
      `wrote ${matrix.rows.length} rows for ${operations.length} operations to ${o} (generated, ready to edit: check the TODO comments)`;
  }
  if (out === undefined) {
    io.out(yaml);
    return Exit.ok;
  }
  const tmp = `${out}.${process.pid}.tmp`;
  try {
    await writeFile(tmp, yaml);
    await rename(tmp, out);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    io.err(`candor matrix generate: cannot write ${out}: ${errCode(e)}\n`);
    return Exit.environment;
  }
  io.out(`${summary(out)}\n`);
  return Exit.ok;
}

function errCode(e: unknown): string {
  return (e as NodeJS.ErrnoException | undefined)?.code ?? 'error';
}
