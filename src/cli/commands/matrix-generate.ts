import { UsageError, type CommandIo } from '../io.js';

export function run(_args: string[], _io: CommandIo): Promise<number> {
  return Promise.reject(
    new UsageError('matrix generate --openapi is not available in this version yet'),
  );
}
