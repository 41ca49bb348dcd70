#!/usr/bin/env node
// Builds dist/ when it is missing or older than any source file, so that `npm run demo` and
// `npm run bench` work straight after `npm ci` in a fresh clone. (`npm ci` no longer builds: a
// `prepare` script is an install script, which npm may skip; the published tarball ships dist/,
// built by `prepack`.) The test suite does the same in test/global-setup.ts.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts'))
      newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

// The bundled command line is written last (after tsc's dist/cli/), so its age is the build's.
const stamp = join(root, 'dist', 'bin', 'main.js');
const built = existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
if (built < newestSource(join(root, 'src'))) {
  process.stderr.write(
    built === 0 ? 'building dist/ (first run)…\n' : 'rebuilding dist/ (sources changed)…\n',
  );
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
    { cwd: root, stdio: 'inherit' },
  );
  execFileSync(process.execPath, [join(root, 'scripts', 'bundle-cli.js')], {
    cwd: root,
    stdio: 'inherit',
  });
}
