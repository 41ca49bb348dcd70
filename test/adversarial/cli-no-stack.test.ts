// Issue 12, item 11: no command prints a stack trace, whatever it is pointed at, and messages never
// show internal class names. Each case runs the real CLI.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { formatIssue } from '../../src/config/locate.js';
import { runCli, STACK_OR_CLASS } from './cli.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-nostack-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const MATRIX = new URL('../../examples/matrix/reference.yaml', import.meta.url).pathname;

describe('no stack traces', () => {
  it('a reader that closes the pipe early (ops list | head) ends the command quietly', async () => {
    for (const args of [['schema', 'config'], ['--help']]) {
      const r = await runCli(args, { closeStdout: true });
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
    }
  });

  it.each(['json', 'junit'])(
    'matrix run --%s into a missing directory: usage error before any row runs',
    async (flag) => {
      const target = join(dir, 'no-such-dir', 'report.out');
      const r = await runCli(['matrix', 'run', MATRIX, `--${flag}`, target, '--ledger', 'memory:']);
      expect(r.code).toBe(2);
      expect(r.out).toBe(''); // nothing ran: no "running N rows" line
      expect(r.err.trim().split('\n')).toEqual([
        expect.stringMatching(
          new RegExp(`^candor matrix: --${flag}: the directory .* does not exist$`),
        ),
      ]);
    },
  );

  it('audit export --out into a missing directory is a usage error naming the flag', async () => {
    const r = await runCli([
      'audit',
      'export',
      '--ledger',
      'memory:',
      '--out',
      join(dir, 'missing', 'bundle.jsonl'),
    ]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^candor audit: --out: the directory .* does not exist\n$/);
  });

  it('audit verify on a directory: one line, exit 3', async () => {
    const r = await runCli(['audit', 'verify', dir]);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/^candor audit verify: ".*" is a directory, not a bundle file\n$/);
    expect(r.err).not.toMatch(STACK_OR_CLASS);
  });

  // A file that opens but fails to read (Linux: /proc/self/mem at offset 0 is EIO). The read
  // error names no file by itself; the message must.
  it.skipIf(process.platform !== 'linux')(
    'audit verify on a file whose read fails: one line naming the file, exit 3',
    async () => {
      const r = await runCli(['audit', 'verify', '/proc/self/mem']);
      expect(r.code).toBe(3);
      expect(r.err).toMatch(/^candor audit: EIO: .*"\/proc\/self\/mem"\n$/);
      expect(r.err).not.toMatch(STACK_OR_CLASS);
    },
  );

  it('audit verify on a corrupt SQLite ledger: one line, no driver class name', async () => {
    const file = join(dir, 'corrupt.db');
    writeFileSync(file, Buffer.alloc(8192, 0x5a));
    const r = await runCli(['audit', 'verify', `sqlite:${file}`]);
    expect(r.code).toBe(3);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toContain('not a database');
    expect(r.err).not.toMatch(STACK_OR_CLASS);
    const ops = await runCli(['ops', 'list', '--ledger', `sqlite:${file}`]);
    expect(ops.code).toBe(3);
    expect(ops.err.trim().split('\n')).toHaveLength(1);
    expect(ops.err).not.toMatch(STACK_OR_CLASS);
  });

  it('audit verify on /dev/zero (one endless line): bounded read and a failing verdict', async () => {
    const r = await runCli(['audit', 'verify', '/dev/zero', '--json']);
    expect(r.code).toBe(1);
    expect(r.err).toBe('');
    const report = JSON.parse(r.out) as { ok: boolean; message: string };
    expect(report.ok).toBe(false);
    expect(report.message).toMatch(/longer than 64 MiB|header/);
  });

  it('a YAML alias bomb in candor.yaml is a located config error, not a crash', async () => {
    const lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 1; i < 12; i++) {
      const prev = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      lines.push(`${name}: &${name} [${Array(9).fill(`*${prev}`).join(',')}]`);
    }
    const text = `${lines.join('\n')}\n`;
    const parsed = parseConfig(text, 'candor.yaml');
    expect(parsed.ok).toBe(false);
    expect(parsed.failure!.issues.map(formatIssue)).toEqual([
      'candor.yaml:1:1: (file): too many YAML aliases: the file expands beyond what a configuration needs',
    ]);
    const file = join(dir, 'bomb.yaml');
    writeFileSync(file, text);
    const r = await runCli(['serve', '--config', file]);
    expect(r.code).toBe(2);
    expect(r.err).toContain('too many YAML aliases');
    expect(r.err).not.toMatch(STACK_OR_CLASS);
  });

  it('an unexpected failure inside a command is one line naming no class (exit 3)', async () => {
    // A matrix path that is a directory makes the loader fail in a way no command foresaw.
    const sub = join(dir, 'matrix-dir');
    mkdirSync(sub, { recursive: true });
    const r = await runCli(['matrix', 'run', sub, '--ledger', 'memory:']);
    expect([2, 3]).toContain(r.code);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).not.toMatch(STACK_OR_CLASS);
  });
});
