// Tests that spawn the CLI (MCP over stdio, crash and recovery tests) run the compiled dist/.
// Build it once per run when any source file is newer than the last build.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(p));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts'))
      newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

export default function setup(): void {
  // The bundled command line is written last (after tsc's dist/cli/), so its age is the build's.
  const stamp = join(root, 'dist', 'bin', 'main.js');
  const built = existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
  if (built >= newestMtime(join(root, 'src'))) return;
  try {
    execFileSync(
      process.execPath,
      [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
      {
        cwd: root,
        stdio: 'inherit',
      },
    );
  } catch {
    // tsc still emits JavaScript on type errors; tests that spawn dist/ run against that, while
    // `npm run check` and `npm ci`'s build fail loudly on the errors themselves.
    console.warn(
      'global-setup: the build reported type errors (see above); continuing with the emitted dist/',
    );
  }
  execFileSync(process.execPath, [join(root, 'scripts', 'bundle-cli.js')], {
    cwd: root,
    stdio: 'inherit',
  });
}
