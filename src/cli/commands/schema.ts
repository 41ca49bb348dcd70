import { z } from 'zod';
import { envelopeJsonSchema } from '../../core/envelope.js';
import { fixtureFileSchema } from '../../fakes/fixtures.js';
import { matrixJsonSchema } from '../../matrix/spec.js';
import { CliUsageError, type CommandIo } from '../io.js';

const SCHEMAS: Record<string, () => Promise<Record<string, unknown>>> = {
  envelope: () => Promise.resolve(envelopeJsonSchema()),
  matrix: () => Promise.resolve(matrixJsonSchema()),
  config: async () => (await import('../../config/schema.js')).configJsonSchema(),
  fixture: () =>
    Promise.resolve({
      $id: 'urn:candor:schema:fixture:v1',
      title: 'Candor fake-service fixture file',
      ...z.toJSONSchema(fixtureFileSchema, { target: 'draft-2020-12', io: 'input' }),
    }),
};

export const SCHEMA_NAMES = ['envelope', 'matrix', 'fixture', 'config'] as const;

export async function run(args: string[], io: CommandIo): Promise<number> {
  const name = args[0];
  if (name === undefined || args.length > 1) {
    throw new CliUsageError(`usage: candor schema <${SCHEMA_NAMES.join('|')}>`);
  }
  const make = SCHEMAS[name];
  if (!make) {
    if ((SCHEMA_NAMES as readonly string[]).includes(name)) {
      io.err(`candor schema: the ${name} schema is not available in this version yet\n`);
      return 3;
    }
    throw new CliUsageError(`unknown schema "${name}"; expected one of ${SCHEMA_NAMES.join(', ')}`);
  }
  io.out(`${JSON.stringify(await make(), null, 2)}\n`);
  return 0;
}
