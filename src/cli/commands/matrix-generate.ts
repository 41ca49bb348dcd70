// candor matrix generate --openapi SPEC [--out FILE]
// Prints (or writes) a failure matrix generated from an OpenAPI 3.0/3.1 document. A spec that is
// not usable is a usage error naming the file and field (exit 2); an unreadable file or an
// unwritable output is an environment problem (exit 3).
import { readFile, writeFile } from 'node:fs/promises';
import { generateMatrixFromOpenApi } from '../../matrix/openapi.js';
import { checkOutputPath, Exit, parseFlags, UsageError, type CommandIo } from '../io.js';

const USAGE = 'usage: candor matrix generate --openapi SPEC [--out FILE]';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, { openapi: 'string', out: 'string' });
  if (typeof flags.out === 'string') checkOutputPath('out', flags.out);
  const spec = flags.openapi;
  if (typeof spec !== 'string' || positional.length > 0) throw new UsageError(USAGE);
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
  const { yaml, matrix, operations } = generated.value;
  if (typeof flags.out !== 'string') {
    io.out(yaml);
    return Exit.ok;
  }
  try {
    await writeFile(flags.out, yaml);
  } catch (e) {
    io.err(`candor matrix generate: cannot write ${flags.out}: ${errCode(e)}\n`);
    return Exit.environment;
  }
  io.out(
    `wrote ${matrix.rows.length} rows for ${operations.length} operations to ${flags.out} (generated, ready to edit: check the TODO comments)\n`,
  );
  return Exit.ok;
}

function errCode(e: unknown): string {
  return (e as NodeJS.ErrnoException | undefined)?.code ?? 'error';
}
