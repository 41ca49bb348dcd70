// Runs the real built CLI (bin/candor.js → dist/, built by test/global-setup.ts) as a child process.
import { spawn, type SpawnOptions } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const CLI = fileURLToPath(new URL('../../bin/candor.js', import.meta.url));

export interface CliRun {
  code: number | null;
  out: string;
  err: string;
}

export function runCli(
  args: string[],
  options: SpawnOptions & { closeStdout?: boolean } = {},
): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      ...options,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    if (options.closeStdout) child.stdout.destroy();
    else child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

/** What no command may print: a stack frame or an internal class name. */
export const STACK_OR_CLASS =
  /\n\s+at |\b(?:SqliteError|TypeError|RangeError|ReferenceError|SyntaxError|Error):/;
