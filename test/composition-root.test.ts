// The composition root: config/open.ts opens (and releases) what a command needs, config/compose.ts
// builds the runtime from configuration. Every command that opens things goes through open.ts;
// `candor recover` builds its runtime in compose.ts and must not reach the MCP gateway or the MCP
// server SDK (DESIGN.md §6: cli|mcp|web -> engine -> core; the runtime from configuration is not
// an MCP concern). The MCP client is allowed: recover looks up
// proxied tools' operations through their upstreams (`upstreams:`), loading it only then. Walks the
// static and dynamic import graph of the sources.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
// Runtime imports only: `import type` / `export type` are erased and load nothing.
const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s(?!type\s)[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** Every module reachable from `entry` by static imports: project files and package names. */
function reachable(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const queue = [resolve(root, entry)];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    const source = readFileSync(file, 'utf8');
    for (const m of source.matchAll(IMPORT)) {
      const spec = (m[1] ?? m[2])!;
      if (!spec.startsWith('.')) {
        packages.add(spec);
        continue;
      }
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      if (existsSync(target)) queue.push(target);
      else if (existsSync(join(target, 'index.ts'))) queue.push(join(target, 'index.ts'));
      else throw new Error(`${relative(root, file)}: cannot resolve ${spec}`);
    }
  }
  return { files, packages };
}

describe('composition root (config/compose.ts)', () => {
  it('candor recover composes its runtime without the MCP gateway or the MCP server SDK', () => {
    const { files, packages } = reachable('src/cli/commands/recover.ts');
    const names = [...files].map((f) => relative(root, f).split('\\').join('/'));
    expect(names).toContain('src/config/compose.ts');
    expect(names.filter((n) => n.startsWith('src/mcp/'))).toEqual([]);
    const mcp = [...packages].filter((p) => p.startsWith('@modelcontextprotocol/'));
    // Only the client, through the upstream adapter (src/upstream/).
    expect(mcp.filter((p) => !p.startsWith('@modelcontextprotocol/client'))).toEqual([]);
    expect(names.filter((n) => n.startsWith('src/upstream/')).length).toBeGreaterThan(0);
  });

  it('serve, recover, probe and ui all open what they need through config/open.ts', () => {
    for (const entry of [
      'src/mcp/start.ts',
      'src/cli/commands/recover.ts',
      'src/cli/commands/probe.ts',
      'src/cli/commands/ui.ts',
    ]) {
      const direct = readFileSync(resolve(root, entry), 'utf8');
      expect({ entry, open: /from '[./]*config\/open\.js'/.test(direct) }).toEqual({
        entry,
        open: true,
      });
      // No command opens a ledger, a vault or upstreams on its own any more.
      expect({
        entry,
        own: /\b(openLedger|openConfiguredVault|openVaultOrExit|startUpstreams)\(/.test(direct),
      }).toEqual({
        entry,
        own: false,
      });
    }
  });

  it('candor serve reaches the same root (the walker does see the MCP SDK where it is used)', () => {
    const { files, packages } = reachable('src/mcp/start.ts');
    const names = [...files].map((f) => relative(root, f).split('\\').join('/'));
    expect(names).toContain('src/config/compose.ts');
    expect([...packages].some((p) => p.startsWith('@modelcontextprotocol/'))).toBe(true);
  });
});
