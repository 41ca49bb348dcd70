// placeholder, replaced below
import { Exit, type CommandIo } from '../io.js';
export function run(_args: string[], io: CommandIo): Promise<number> {
  io.err('candor proxy: not yet\n');
  return Promise.resolve(Exit.usage);
}
