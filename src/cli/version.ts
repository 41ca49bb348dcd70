import { readFileSync } from 'node:fs';

/** The package version (`candor --version`, and what the MCP gateway reports as its version). */
export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version?: string;
  };
  return pkg.version ?? '0.0.0';
}
