import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { suggestion } from './suggest.js';

// What a command may touch: its arguments and two output streams. Commands return an exit code:
// 0 ok, 1 a check failed, 2 usage error, 3 environment (DESIGN.md §6).
export interface CommandIo {
  out: (s: string) => void;
  err: (s: string) => void;
}

export type Command = (args: string[], io: CommandIo) => Promise<number>;

export const Exit = { ok: 0, check_failed: 1, usage: 2, environment: 3 } as const;

/**
 * Misuse of the command line: one clear line, exit 2. Not the library's `UsageError` (core/errors.ts:
 * a closed code union for misuse of the API, which commands turn into their own messages).
 */
export class CliUsageError extends Error {
  readonly code = 'usage';
}

/**
 * Minimal flag parser: `--name value`, `--name=value`, boolean `--flag`. Unknown flags are a usage
 * error naming the flag (and the likely intended one), so typos never silently change behaviour.
 */
export function parseFlags(
  args: string[],
  spec: Record<string, 'string' | 'boolean'>,
): { flags: Record<string, string | boolean>; positional: string[] } {
  const flags: Record<string, string | boolean> = {};
  const positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      positional.push(...args.slice(i + 1));
      break;
    }
    if (!arg.startsWith('--')) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq > 0 ? arg.slice(2, eq) : arg.slice(2);
    const kind = spec[name];
    if (kind === undefined)
      throw new CliUsageError(
        `unknown option --${name}${suggestion(name, Object.keys(spec), '--')}`,
      );
    if (kind === 'boolean') {
      if (eq > 0) throw new CliUsageError(`option --${name} takes no value`);
      flags[name] = true;
      continue;
    }
    const value = eq > 0 ? arg.slice(eq + 1) : args[++i];
    if (value === undefined || (eq < 0 && value.startsWith('--'))) {
      throw new CliUsageError(`option --${name} needs a value`);
    }
    flags[name] = value;
  }
  return { flags, positional };
}

/**
 * Checks, before any work starts, that `--FLAG PATH` can be written: its directory exists and the
 * path is not a directory. A mistake here is a usage error naming the flag, found before a long
 * run rather than after it.
 */
export function checkOutputPath(flag: string, path: string): void {
  const dir = dirname(resolve(path));
  const kind = (p: string): 'dir' | 'file' | 'none' => {
    try {
      return statSync(p).isDirectory() ? 'dir' : 'file';
    } catch {
      return 'none';
    }
  };
  if (kind(dir) !== 'dir')
    throw new CliUsageError(`--${flag}: the directory ${JSON.stringify(dir)} does not exist`);
  if (kind(path) === 'dir')
    throw new CliUsageError(`--${flag}: ${JSON.stringify(path)} is a directory, not a file`);
}

/** Resolves on SIGINT, SIGTERM or when `signal` aborts: how a long-running command waits to stop. */
export function untilStopped(signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      signal?.removeEventListener('abort', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
    if (signal?.aborted === true) stop();
    else signal?.addEventListener('abort', stop);
  });
}

/**
 * `--only ID,...` checked against the rows there are: an id that names no row is a usage error
 * naming it (a typo would otherwise run nothing and pass).
 */
export function onlyRows(value: string, rowIds: readonly string[], matrix: string): Set<string> {
  const wanted = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (wanted.length === 0) throw new CliUsageError('--only: no row id given');
  const known = new Set(rowIds);
  const unknown = wanted.filter((id) => !known.has(id));
  if (unknown.length > 0) {
    const named = unknown.map((id) => `"${id}"${suggestion(id, rowIds)}`).join(', ');
    throw new CliUsageError(
      `--only: no row ${named} in "${matrix}" (${rowIds.length} rows; see the matrix file for their ids)`,
    );
  }
  return new Set(wanted);
}
