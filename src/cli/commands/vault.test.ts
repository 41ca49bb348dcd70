import { mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { manualClock, seededRandom } from '../../core/time.js';
import type { GateChange } from '../../vault/index.js';
import { run, type VaultCommandDeps, type VaultIo } from './vault.js';

const PASS = 'cli passphrase 123';
const VALUE = 'tok_cli_9a8b7c6d5e4f3a2b';

let dir: string;
let vaultPath: string;
let transcript: string[];
let gate: GateChange[];

function io(answers: string[] = [], interactive = true): VaultIo & { out: (s: string) => void } {
  const queue = [...answers];
  const base: VaultIo = {
    out: (s) => transcript.push(`out:${s}`),
    err: (s) => transcript.push(`err:${s}`),
  };
  if (!interactive) return base;
  return {
    ...base,
    readSecret: (prompt) => {
      transcript.push(`prompt:${prompt}`);
      const next = queue.shift();
      return next === undefined
        ? Promise.reject(new Error('no answer queued'))
        : Promise.resolve(next);
    },
  };
}

function deps(env: Record<string, string> = { CANDOR_VAULT_PASSPHRASE: PASS }): VaultCommandDeps {
  return {
    env,
    clock: manualClock(),
    random: seededRandom(11),
    scrypt: { N: 2 ** 10, r: 8, p: 1 },
    allowWeakKdf: true,
    onGateChange: (c) => gate.push(c),
  };
}

const errLines = () => transcript.filter((t) => t.startsWith('err:'));
const v = (...args: string[]) => [...args, '--vault', vaultPath];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'candor-vault-cli-'));
  vaultPath = join(dir, 'vault.json');
  transcript = [];
  gate = [];
});

afterEach(async () => {
  // Nothing any command printed may hold the passphrase or a value, in any test.
  const all = transcript.filter((t) => !t.startsWith('prompt:')).join('\n');
  expect(all).not.toContain(PASS);
  expect(all).not.toContain(VALUE);
  await rm(dir, { recursive: true, force: true });
});

async function initAndSet(): Promise<void> {
  expect(await run(v('init'), io(), deps())).toBe(0);
  const set = v(
    'set',
    'deploy',
    '--type',
    'bearer',
    '--bind',
    'https://api.example.test/v1',
    '--bind=https://backup.example.test',
  );
  expect(await run(set, io([VALUE]), deps())).toBe(0);
}

describe('candor vault', () => {
  it('init, set, list: prints names, bindings and times but never the value', async () => {
    await initAndSet();
    expect(transcript).toContain('prompt:Value for deploy: ');
    transcript = [];
    expect(await run(v('list'), io(), deps({}))).toBe(0);
    const text = transcript.join('');
    expect(text).toContain('gate: unlocked');
    expect(text).toMatch(
      /deploy\s+bearer\s+https:\/\/api\.example\.test\/v1,https:\/\/backup\.example\.test\s+2026-01-01T00:00:00\.000Z\s+-/,
    );
    transcript = [];
    expect(await run(v('list', '--json'), io(), deps({}))).toBe(0);
    const json = JSON.parse(transcript.join('').slice(4)) as { credentials: { name: string }[] };
    expect(json.credentials.map((c) => c.name)).toEqual(['deploy']);
    expect(await readFile(vaultPath, 'utf8')).not.toContain(VALUE);
  });

  it('asks twice for a new passphrase at init and refuses a mismatch with exit 2', async () => {
    expect(await run(v('init'), io(['one passphrase', 'another one']), deps({}))).toBe(2);
    expect(errLines()).toEqual(['err:candor vault: the two passphrases differ\n']);
    await expect(stat(vaultPath)).rejects.toThrow();
    expect(await run(v('init'), io([PASS, PASS]), deps({}))).toBe(0);
    expect(await run(v('init'), io(), deps())).toBe(1);
  });

  it.each([
    [['frobnicate'], 'unknown vault command "frobnicate"'],
    [[], 'usage: candor vault init|set|list'],
    [['set', 'x', '--value', 'secret-in-argv'], 'values are never taken from the command line'],
    [['set', 'x', '--bind', 'https://a.test'], 'set needs --type'],
    [['set', 'x', '--type', 'oauth', '--bind', 'https://a.test'], 'unknown --type "oauth"'],
    [['set', 'x', '--type', 'bearer'], 'set needs at least one --bind'],
    [['set', '--type', 'bearer', '--bind', 'https://a.test'], 'missing credential NAME'],
    [['set', 'x', '--type', 'bearer', '--bind', 'ftp://a.test'], 'Binding "ftp://a.test"'],
    [['list', '--bind', 'https://a.test'], '--bind is only valid with set'],
    [['list', 'extra'], 'unexpected argument "extra"'],
    [['lock', '--force'], 'unknown option --force'],
  ])('exits 2 with one clear line for %j', async (args, message) => {
    expect(await run(v(...args), io(), deps())).toBe(2);
    const errs = errLines();
    expect(errs).toHaveLength(1);
    expect(errs[0]).toContain(message);
    expect(errs[0]).not.toContain('secret-in-argv');
  });

  it('exits 1 for a wrong passphrase and for a refused check', async () => {
    await initAndSet();
    transcript = [];
    expect(
      await run(v('unlock'), io(), deps({ CANDOR_VAULT_PASSPHRASE: 'wrong passphrase' })),
    ).toBe(1);
    expect(errLines()).toEqual([
      'err:candor vault: Wrong passphrase or key file for this vault. [wrong_key]\n',
    ]);
    expect(await run(v('rotate', 'missing'), io(), deps())).toBe(1);
    const set = v('set', 'deploy', '--type', 'bearer', '--bind', 'https://a.test');
    expect(await run(set, io([VALUE]), deps())).toBe(1);
  });

  it('exits 3 for environment problems: missing or unreadable vault, no passphrase source', async () => {
    expect(await run(v('list'), io(), deps())).toBe(3);
    expect(errLines()[0]).toContain('[not_found]');
    await mkdir(join(dir, 'adir'));
    transcript = [];
    expect(await run(['list', '--vault', join(dir, 'adir')], io(), deps())).toBe(3);
    expect(errLines()[0]).toContain('[unreadable]');
    await run(v('init'), io(), deps());
    transcript = [];
    expect(await run(v('unlock'), io([], false), deps({}))).toBe(3);
    expect(errLines()).toEqual([
      'err:candor vault: no passphrase: set CANDOR_VAULT_PASSPHRASE, pass --key-file F, or run in a terminal\n',
    ]);
    expect(
      await run(
        v('set', 'n', '--type', 'bearer', '--bind', 'https://a.test', '--value-env', 'NOPE'),
        io([], false),
        deps(),
      ),
    ).toBe(3);
  });

  it('locks without a key, unlocks with one, and reports both transitions', async () => {
    await initAndSet();
    expect(await run(v('lock', '--by', 'ana'), io([], false), deps({}))).toBe(0);
    expect(await run(v('lock', '--by', 'ana'), io([], false), deps({}))).toBe(0);
    expect(transcript.join('')).toContain('vault was already locked');
    expect(await run(v('unlock', '--by', 'ana'), io([PASS]), deps({}))).toBe(0);
    expect(gate.map((g) => [g.locked, g.by])).toEqual([
      [true, 'ana'],
      [false, 'ana'],
    ]);
  });

  it('rotates a value from a file and re-keys with a new passphrase', async () => {
    await initAndSet();
    const valueFile = join(dir, 'value.txt');
    await import('node:fs/promises').then((fs) => fs.writeFile(valueFile, `${VALUE}-2\n`));
    expect(await run(v('rotate', 'deploy', '--value-file', valueFile), io(), deps())).toBe(0);
    transcript = [];
    await run(v('list'), io(), deps({}));
    expect(transcript.join('')).toMatch(/deploy\s+bearer\s+\S+\s+\S+Z\s+\S+Z/);
    const env = {
      CANDOR_VAULT_PASSPHRASE: PASS,
      CANDOR_VAULT_NEW_PASSPHRASE: 'the next passphrase',
    };
    expect(await run(v('rotate', '--rekey'), io(), deps(env))).toBe(0);
    expect(await run(v('unlock'), io(), deps())).toBe(1);
    expect(
      await run(v('unlock'), io(), deps({ CANDOR_VAULT_PASSPHRASE: 'the next passphrase' })),
    ).toBe(0);
  });

  it('creates and uses a key file', async () => {
    const keyFile = join(dir, 'vault.key');
    expect(await run(v('init', '--key-file', keyFile), io([], false), deps({}))).toBe(0);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    const set = v(
      'set',
      'box',
      '--type',
      'ssh_key',
      '--bind',
      'ssh:web-1',
      '--key-file',
      keyFile,
      '--value-env',
      'KEY',
    );
    const pem = '-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n';
    expect(await run(set, io([], false), deps({ KEY: pem }))).toBe(0);
    expect(await run(v('unlock', '--key-file', join(dir, 'missing.key')), io(), deps({}))).toBe(3);
  });
});
