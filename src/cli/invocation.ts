// The command a person types to run this Candor, for every hint Candor prints: `candor` when the
// `candor` on PATH is this very program (a global install), otherwise `node PATH/bin/candor.js`
// (a source checkout, `npx ./candor-x.y.z.tgz`, a project's node_modules), with the path relative
// to the working directory when it lies below it. A hint must work when pasted.
import { existsSync, realpathSync } from 'node:fs';
import { delimiter, isAbsolute, join, relative, sep } from 'node:path';
import { shellWord } from '../core/shell.js';

export interface InvocationContext {
  /** The script Node was started with (process.argv[1]). */
  script: string | undefined;
  cwd: string;
  path: string | undefined;
  platform: NodeJS.Platform;
}

const real = (p: string): string | null => {
  try {
    return realpathSync(p);
  } catch {
    return null;
  }
};

export { shellWord };

export function cliCommandFor(ctx: InvocationContext): string {
  const script = ctx.script === undefined ? null : real(ctx.script);
  if (script === null) return 'candor';
  for (const dir of (ctx.path ?? '').split(delimiter)) {
    if (dir === '' || dir.includes(`${sep}_npx${sep}`)) continue;
    const candidate = join(dir, 'candor');
    // npm's Windows shims are scripts, not links: one found on PATH is taken as this program.
    if (ctx.platform === 'win32' && existsSync(`${candidate}.cmd`)) return 'candor';
    if (existsSync(candidate) && real(candidate) === script) return 'candor';
  }
  const rel = relative(ctx.cwd, script);
  const shown = rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) ? rel : script;
  return `node ${shellWord(shown)}`;
}

let cached: string | undefined;

/** The command for this process (computed once). */
export function cliCommand(): string {
  cached ??= cliCommandFor({
    script: process.argv[1],
    cwd: process.cwd(),
    path: process.env.PATH,
    platform: process.platform,
  });
  return cached;
}
