// Issue 12, item 15: `candor vault --help` names every flag; `vault list` says whether the gate's
// unlock token verifies (a flag flipped by hand is not an open gate); lock/unlock record who did
// it (`--by`, default the OS user), never `cli:unknown`. Each case runs the real CLI.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, STACK_OR_CLASS } from './cli.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-vaultcli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const vault = join(dir, 'vault.json');
const key = join(dir, 'vault.key');
// No USER or USERNAME: the actor must still be the OS user, not "unknown".
const env = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !['USER', 'USERNAME', 'LOGNAME'].includes(k)),
);

describe('candor vault', () => {
  it('--help lists every flag the command accepts', async () => {
    const r = await runCli(['vault', '--help'], { env });
    expect(r.code).toBe(0);
    // Every flag vault.ts parses (COMMON, set, list, lock/unlock, rotate, VALUE_FLAGS).
    const source = readFileSync(
      new URL('../../src/cli/commands/vault.ts', import.meta.url),
      'utf8',
    );
    const parsed = new Set(
      [
        ...source.matchAll(
          /'([a-z][a-z-]+)': '(?:string|boolean)'|\b([a-z]+): '(?:string|boolean)'/g,
        ),
      ].map((m) => m[1] ?? m[2]!),
    );
    parsed.add('bind'); // taken by takeRepeated, not by the flag spec
    expect([...parsed].sort()).toEqual(
      [
        'bind',
        'by',
        'header',
        'json',
        'key-file',
        'new-key-file',
        'rekey',
        'type',
        'username',
        'value-env',
        'value-file',
        'vault',
      ].sort(),
    );
    for (const flag of parsed) expect(r.out).toContain(`--${flag}`);
  });

  it('lock and unlock record the OS user, or --by', async () => {
    expect(
      (await runCli(['vault', 'init', '--vault', vault, '--key-file', key], { env })).code,
    ).toBe(0);
    const locked = await runCli(['vault', 'lock', '--vault', vault], { env });
    expect(locked.code).toBe(0);
    expect(locked.out).toMatch(new RegExp(`^vault locked by cli:${userInfo().username} at `));
    expect(JSON.parse(readFileSync(vault, 'utf8')).gate.by).toBe(`cli:${userInfo().username}`);
    const unlocked = await runCli(
      ['vault', 'unlock', '--vault', vault, '--key-file', key, '--by', 'alice'],
      { env },
    );
    expect(unlocked.out).toMatch(/^vault unlocked by alice at /);
    expect(JSON.parse(readFileSync(vault, 'utf8')).gate.by).toBe('alice');
  });

  it('list says whether the unlock token verifies, not what the flag says', async () => {
    const open = await runCli(['vault', 'list', '--vault', vault, '--key-file', key], { env });
    expect(open.out).toMatch(/^gate: unlocked \(unlock token verified\) since .* by alice\n/);

    // Lock, then flip the flag by hand without the key: the file says unlocked, the token is gone.
    expect((await runCli(['vault', 'lock', '--vault', vault, '--by', 'bob'], { env })).code).toBe(
      0,
    );
    const file = JSON.parse(readFileSync(vault, 'utf8'));
    expect(file.gate.token).toBeNull();
    file.gate.locked = false;
    writeFileSync(vault, JSON.stringify(file));

    const withKey = await runCli(['vault', 'list', '--vault', vault, '--key-file', key], { env });
    expect(withKey.code).toBe(0);
    expect(withKey.out).toMatch(
      /^gate: LOCKED \(the file says unlocked but its unlock token does not verify/,
    );
    const json = await runCli(['vault', 'list', '--json', '--vault', vault, '--key-file', key], {
      env,
    });
    expect(JSON.parse(json.out).gate).toMatchObject({ locked: false, verified: false, by: 'bob' });

    const noKey = await runCli(['vault', 'list', '--vault', vault], { env });
    expect(noKey.out).toMatch(/^gate: unlocked per the file, token not verified/);
    expect(noKey.out).not.toMatch(/^gate: unlocked since/);
    const noKeyJson = await runCli(['vault', 'list', '--json', '--vault', vault], { env });
    expect(JSON.parse(noKeyJson.out).gate.verified).toBeNull();
    for (const r of [withKey, json, noKey]) expect(r.err).not.toMatch(STACK_OR_CLASS);
  });
});
