import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { snippet, whereItGoes } from './commands/client-config.js';
import { cliCommandFor, shellWord } from './invocation.js';

// The command in a printed hint is the one this user can paste.
describe('cliCommandFor', () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'candor-invocation-')));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const pkg = join(root, 'lib', 'node_modules', 'candor');
  const script = join(pkg, 'bin', 'candor.js');
  mkdirSync(join(pkg, 'bin'), { recursive: true });
  writeFileSync(script, '');
  const bin = join(root, 'bin');
  mkdirSync(bin);
  symlinkSync(script, join(bin, 'candor'));
  const other = join(root, 'other-bin');
  mkdirSync(other);
  writeFileSync(join(other, 'candor'), '');
  const ctx = { cwd: root, platform: 'linux' as const };

  it('is `candor` when the candor on PATH is this program (a global install)', () => {
    expect(cliCommandFor({ ...ctx, script: join(bin, 'candor'), path: `/usr/bin:${bin}` })).toBe(
      'candor',
    );
  });

  it('is node with the script when another candor, or none, is on PATH', () => {
    expect(
      cliCommandFor({ ...ctx, script, path: `${other}:/usr/bin`, cwd: '/nonexistent-elsewhere' }),
    ).toBe(`node ${script}`);
    // Below the working directory (a source checkout): the short relative path.
    expect(cliCommandFor({ ...ctx, script, path: '/usr/bin', cwd: pkg })).toBe(
      'node bin/candor.js',
    );
  });

  it('never trusts npx’s temporary PATH entry, which is gone after the run', () => {
    const npx = join(root, '.npm', '_npx', 'abc', 'node_modules', '.bin');
    mkdirSync(npx, { recursive: true });
    symlinkSync(script, join(npx, 'candor'));
    expect(cliCommandFor({ ...ctx, script, path: npx, cwd: '/nonexistent-elsewhere' })).toBe(
      `node ${script}`,
    );
  });

  it('quotes what a shell would split', () => {
    expect(shellWord("/a b/it's.js")).toBe(`'/a b/it'\\''s.js'`);
    expect(shellWord('/usr/bin/node')).toBe('/usr/bin/node');
  });
});

describe('client-config', () => {
  const server = {
    command: '/opt/node/bin/node',
    args: ['/x/bin/candor.js', 'serve', '--config', '/p/candor.yaml'],
  };

  it('prints each client’s format', () => {
    expect(JSON.parse(snippet('claude-desktop', 'candor', server))).toEqual({
      mcpServers: { candor: server },
    });
    expect(JSON.parse(snippet('cursor', 'candor', server))).toEqual({
      mcpServers: { candor: server },
    });
    expect(JSON.parse(snippet('vscode', 'candor', server))).toEqual({
      servers: { candor: { type: 'stdio', ...server } },
    });
    expect(snippet('claude-code', 'candor', server)).toBe(
      'claude mcp add candor -- /opt/node/bin/node /x/bin/candor.js serve --config /p/candor.yaml\n',
    );
  });

  it('names the file per OS', () => {
    expect(whereItGoes('claude-desktop', 'darwin', '/Users/u')).toContain(
      '/Users/u/Library/Application Support/Claude/claude_desktop_config.json',
    );
    expect(whereItGoes('claude-desktop', 'linux', '/home/u', {})).toContain(
      '/home/u/.config/Claude/claude_desktop_config.json',
    );
    expect(whereItGoes('cursor', 'linux', '/home/u')).toContain('/home/u/.cursor/mcp.json');
    expect(whereItGoes('vscode')).toContain('.vscode/mcp.json');
  });
});
