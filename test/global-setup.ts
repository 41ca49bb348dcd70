// Tests that spawn the CLI (MCP over stdio, crash and recovery tests) run the compiled dist/.
// Build it once per run when any source file is newer than the last build.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

export default function setup(): () => void {
  // One initialised PostgreSQL cluster per run, copied by each test server (test/support/postgres.ts).
  const pgTemplate = mkdtempSync(join(tmpdir(), 'candor-pg-template-'));
  process.env.CANDOR_TEST_PG_TEMPLATE = pgTemplate;
  const teardown = (): void => rmSync(pgTemplate, { recursive: true, force: true });
  // The bundled command line is written last (after dist/cli/), so its age is the build's.
  const stamp = join(root, 'dist', 'bin', 'main.js');
  const built = existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
  if (built >= newestMtime(join(root, 'src'))) return teardown;
  // Types stripped, not checked (scripts/transpile-dist.js): about half a second instead of the
  // 13–20 s a type-checking build took in a fresh clone before any test could start. `npm run
  // check` type-checks; `npm run build` (and every pack) writes declarations and source maps.
  execFileSync(process.execPath, [join(root, 'scripts', 'transpile-dist.js')], {
    cwd: root,
    stdio: 'inherit',
  });
  execFileSync(process.execPath, [join(root, 'scripts', 'bundle-cli.js')], {
    cwd: root,
    stdio: 'inherit',
  });
  return teardown;
}
