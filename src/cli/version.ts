import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

/**
 * The folder of Candor's own package.json, found by walking up from this module: the same answer
 * from the sources (src/cli/), from tsc's output (dist/cli/) and from the bundled command line
 * (dist/bin/, where this code may sit in any chunk).
 */
export function packageRoot(): string {
  if (root !== undefined) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string };
      if (pkg.name === 'candor') return (root = dir);
    }
    const up = dirname(dir);
    if (up === dir) throw new Error('candor: cannot find its own package.json above its modules');
    dir = up;
  }
}

/** The package version (`candor --version`, and what the MCP gateway reports as its version). */
export function version(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as {
    version?: string;
  };
  return pkg.version ?? '0.0.0';
}
