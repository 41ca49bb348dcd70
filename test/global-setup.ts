// Tests that spawn the CLI (MCP over stdio, crash and recovery tests) run the compiled dist/.
// Build it once per run when any source file is newer than the last build.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
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
  // Vitest runs this once per project (unit, integration, isolated), in one process: the first
  // call makes the run's folder, PostgreSQL template and build, the others find them (nesting a
  // folder per project would push unix-socket paths, Chromium's among them, past their limit).
  if (process.env.CANDOR_TEST_RUN_TMP) return () => {};
  // Every temporary file of the run goes under one folder, removed when the run ends: the test
  // workers and what they start inherit TMPDIR (os.tmpdir(), mktemp), so a file that forgets to
  // clean up (or is killed before its afterAll) leaves nothing behind in the system's /tmp. Its mode
  // is /tmp's own (1777): tests that run the CLI or PostgreSQL as a second local user reach and
  // create files under it (each test's own folder keeps its own mode). CANDOR_KEEP_TMP=1 keeps it.
  const runTmp = mkdtempSync(join(tmpdir(), 'candor-test-'));
  chmodSync(runTmp, 0o1777);
  process.env.TMPDIR = runTmp;
  process.env.CANDOR_TEST_RUN_TMP = runTmp;
  // One initialised PostgreSQL cluster per run, copied by each test server (test/support/postgres.ts).
  const pgTemplate = mkdtempSync(join(runTmp, 'candor-pg-template-'));
  process.env.CANDOR_TEST_PG_TEMPLATE = pgTemplate;
  const teardown = (): void => {
    if (process.env.CANDOR_KEEP_TMP === '1') console.log(`test temporary files kept in ${runTmp}`);
    else
      try {
        rmSync(runTmp, { recursive: true, force: true, maxRetries: 3 });
      } catch (error) {
        // A server some file failed to stop may still be writing there: say so, fail nothing.
        console.warn(`could not remove ${runTmp}: ${(error as Error).message}`);
      }
  };
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
