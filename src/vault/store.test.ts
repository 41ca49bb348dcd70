import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { manualClock, seededRandom } from '../core/time.js';
import { parseBinding } from './binding.js';
import {
  createKeyFile,
  initVault,
  listCredentials,
  lockVault,
  openVault,
  type SetCredentialInput,
  type Vault,
  type VaultOptions,
} from './store.js';
import type { Binding, GateChange } from './types.js';

const PASS = 'correct horse battery staple';
const TOKEN = 'tok_live_5f2b9c1e7a3d4b6c8e0f';
const API = { kind: 'http', url: 'https://api.example.test/v1/releases?x=1' } as const;

let dir: string;
let path: string;
let clock: ReturnType<typeof manualClock>;
let gateChanges: GateChange[];
let opts: VaultOptions;

const bind = (spec: string): Binding => {
  const b = parseBinding(spec);
  if (!b.ok) throw new Error(b.failure.message);
  return b.value;
};

async function newVault(): Promise<Vault> {
  const v = await initVault({ kind: 'passphrase', passphrase: PASS }, opts);
  if (!v.ok) throw new Error(v.failure.message);
  return v.value;
}

async function withToken(): Promise<Vault> {
  const vault = await newVault();
  const set = await vault.set({
    name: 'release-api',
    type: 'bearer',
    secret: TOKEN,
    bindings: [bind('https://api.example.test/v1')],
  });
  expect(set.ok).toBe(true);
  return vault;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'candor-vault-'));
  path = join(dir, 'nested', 'vault.json');
  clock = manualClock();
  gateChanges = [];
  opts = {
    path,
    clock,
    random: seededRandom(7),
    scrypt: { N: 2 ** 10, r: 8, p: 1 },
    allowWeakKdf: true,
    onGateChange: (c) => gateChanges.push(c),
  };
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('vault store', () => {
  it('round-trips every credential type through set and resolve', async () => {
    const vault = await newVault();
    const pem =
      '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----\n';
    const https = [bind('https://api.example.test/v1')];
    expect(
      (await vault.set({ name: 'b', type: 'bearer', secret: TOKEN, bindings: https })).ok,
    ).toBe(true);
    await vault.set({
      name: 'u',
      type: 'basic',
      username: 'ci',
      secret: 'pa55word',
      bindings: https,
    });
    await vault.set({
      name: 'k',
      type: 'api_key',
      header_name: 'X-Key',
      secret: 'key-123456',
      bindings: https,
    });
    await vault.set({ name: 's', type: 'ssh_key', secret: pem, bindings: [bind('ssh:web-1')] });

    expect(await vault.resolve('b', API)).toEqual({
      ok: true,
      value: { kind: 'http_header', header_name: 'Authorization', header_value: `Bearer ${TOKEN}` },
    });
    expect((await vault.resolve('u', API)).value).toEqual({
      kind: 'http_header',
      header_name: 'Authorization',
      header_value: `Basic ${Buffer.from('ci:pa55word').toString('base64')}`,
    });
    expect((await vault.resolve('k', API)).value).toEqual({
      kind: 'http_header',
      header_name: 'X-Key',
      header_value: 'key-123456',
    });
    expect((await vault.resolve('s', { kind: 'ssh', host_ref: 'web-1' })).value).toEqual({
      kind: 'ssh_private_key',
      private_key: pem,
    });
    // ssh_secret: a value for an SSH command's secret environment, only for its bound host.
    const multi = "it's a 'pass'\nword $(x)";
    expect(
      (
        await vault.set({
          name: 'e',
          type: 'ssh_secret',
          secret: multi,
          bindings: [bind('ssh:web-1')],
        })
      ).ok,
    ).toBe(true);
    expect((await vault.resolve('e', { kind: 'ssh', host_ref: 'web-1' })).value).toEqual({
      kind: 'ssh_secret_value',
      value: multi,
    });
    expect((await vault.resolve('e', { kind: 'ssh', host_ref: 'web-2' })).failure?.code).toBe(
      'binding_mismatch',
    );
    expect((await vault.resolve('e', API)).failure?.code).toBe('type_mismatch');
    expect(
      (await vault.set({ name: 'h', type: 'ssh_secret', secret: 'abcdef', bindings: https }))
        .failure?.code,
    ).toBe('invalid_binding');
    expect(
      (
        await vault.set({
          name: 'n',
          type: 'ssh_secret',
          secret: 'ab\0cdef',
          bindings: [bind('ssh:web-1')],
        })
      ).failure?.code,
    ).toBe('invalid_value');
    // A second process opening the same file sees the same values.
    const again = await openVault({ kind: 'passphrase', passphrase: PASS }, opts);
    expect((await again.value!.resolve('b', API)).value).toMatchObject({
      header_value: `Bearer ${TOKEN}`,
    });
  });

  it('never writes a value, its base64 or hex into the file, and keeps the file at mode 0600', async () => {
    const vault = await withToken();
    await vault.rotate('release-api', `${TOKEN}-rotated`);
    const bytes = await readFile(path);
    for (const value of [TOKEN, `${TOKEN}-rotated`]) {
      for (const form of [
        value,
        Buffer.from(value).toString('base64').slice(0, -2),
        Buffer.from(value).toString('base64url').slice(0, -2),
        Buffer.from(value).toString('hex'),
      ]) {
        expect(bytes.includes(Buffer.from(form))).toBe(false);
      }
    }
    expect(bytes.includes(Buffer.from(PASS))).toBe(false);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it('refuses a wrong passphrase with wrong_key and leaves the file untouched', async () => {
    await withToken();
    const before = await readFile(path);
    const wrong = await openVault({ kind: 'passphrase', passphrase: 'not the passphrase' }, opts);
    expect(wrong.ok).toBe(false);
    expect(wrong.failure?.code).toBe('wrong_key');
    expect(wrong.failure?.message).not.toContain('not the passphrase');
    const viaKeyFile = await openVault({ kind: 'key', key: new Uint8Array(32) }, opts);
    expect(viaKeyFile.failure?.code).toBe('wrong_key');
    expect((await readFile(path)).equals(before)).toBe(true);
  });

  it('opens with a key file and rejects another key file', async () => {
    const keyPath = join(dir, 'vault.key');
    expect((await createKeyFile(keyPath, seededRandom(1))).ok).toBe(true);
    expect((await createKeyFile(keyPath)).failure?.code).toBe('already_exists');
    expect((await stat(keyPath)).mode & 0o777).toBe(0o600);
    const made = await initVault({ kind: 'key_file', path: keyPath }, opts);
    expect(made.ok).toBe(true);
    const otherKey = join(dir, 'other.key');
    await createKeyFile(otherKey, seededRandom(2));
    expect((await openVault({ kind: 'key_file', path: otherKey }, opts)).failure?.code).toBe(
      'wrong_key',
    );
    await writeFile(otherKey, 'not base64 at all');
    expect((await openVault({ kind: 'key_file', path: otherKey }, opts)).failure?.code).toBe(
      'bad_key_file',
    );
    expect((await openVault({ kind: 'key_file', path: keyPath }, opts)).ok).toBe(true);
  });

  it('refuses destinations outside the bindings', async () => {
    const vault = await withToken();
    for (const url of [
      'https://evil.example.test/v1/releases',
      'http://api.example.test/v1/releases',
      'https://api.example.test:8443/v1/releases',
      'https://api.example.test/v10/releases',
      'https://api.example.test/v2',
      'https://api.example.test/v1/..%2Fadmin',
      'https://api.example.test/v1%2F../admin',
      'https://user:pw@api.example.test/v1/releases',
      'not a url',
    ]) {
      const r = await vault.resolve('release-api', { kind: 'http', url });
      expect(r.failure?.code, url).toBe('binding_mismatch');
    }
    expect(
      (await vault.resolve('release-api', { kind: 'http', url: 'https://API.example.test:443/v1' }))
        .ok,
    ).toBe(true);
    expect(
      (await vault.resolve('release-api', { kind: 'ssh', host_ref: 'web-1' })).failure?.code,
    ).toBe('type_mismatch');
    expect((await vault.resolve('nope', API)).failure?.code).toBe('unknown_ref');
  });

  it('locks without a key, refuses resolution while locked, and unlocks only with the key', async () => {
    const vault = await withToken();
    clock.advance(1000);
    const locked = await lockVault('operator:ana', opts);
    expect(locked.value).toEqual({
      changed: true,
      gate: { locked: true, by: 'operator:ana', at: clock.now() },
    });
    expect((await lockVault('operator:ana', opts)).value?.changed).toBe(false);
    const refused = await vault.resolve('release-api', API);
    expect(refused.failure).toEqual({
      code: 'locked',
      message: 'The vault is locked; no credential is released.',
    });
    // The lock also hides whether a name or binding would have matched.
    expect((await vault.resolve('nope', API)).failure?.code).toBe('locked');

    // Flipping the flag by hand, without the key, does not open the gate.
    const file = JSON.parse(await readFile(path, 'utf8')) as { gate: { locked: boolean } };
    file.gate.locked = false;
    await writeFile(path, JSON.stringify(file));
    expect((await vault.resolve('release-api', API)).failure?.code).toBe('locked');

    clock.advance(1000);
    const unlocked = await vault.unlock('operator:ana');
    expect(unlocked.value).toEqual({
      changed: true,
      gate: { locked: false, by: 'operator:ana', at: clock.now() },
    });
    expect((await vault.resolve('release-api', API)).ok).toBe(true);
    expect(gateChanges.map((g) => g.locked)).toEqual([true, false]);
  });

  it('detects a binding edited in the file as an integrity failure, not a new target', async () => {
    const vault = await withToken();
    const file = JSON.parse(await readFile(path, 'utf8')) as {
      credentials: Record<string, { bindings: Binding[] }>;
    };
    file.credentials['release-api']!.bindings = [bind('https://evil.example.test')];
    await writeFile(path, JSON.stringify(file));
    const r = await vault.resolve('release-api', {
      kind: 'http',
      url: 'https://evil.example.test/x',
    });
    expect(r.failure?.code).toBe('integrity');
  });

  it('rotates a value, keeping bindings and recording rotated_at', async () => {
    const vault = await withToken();
    clock.advance(5000);
    const rotated = await vault.rotate('release-api', 'tok_live_new_0123456789');
    expect(rotated.value).toMatchObject({ name: 'release-api', rotated_at: clock.now() });
    expect((await vault.resolve('release-api', API)).value).toMatchObject({
      header_value: 'Bearer tok_live_new_0123456789',
    });
    expect((await vault.rotate('missing', 'abcdefgh')).failure?.code).toBe('unknown_credential');
    expect((await vault.rotate('release-api', 'ab')).failure?.code).toBe('invalid_value');
    const list = await listCredentials(opts);
    expect(list.value?.credentials).toEqual([
      {
        name: 'release-api',
        type: 'bearer',
        bindings: [{ kind: 'http', origin: 'https://api.example.test', path_prefix: '/v1' }],
        created_at: clock.now() - 5000,
        rotated_at: clock.now(),
      },
    ]);
  });

  it('re-keys to a new passphrase; the old passphrase and old handles stop working', async () => {
    const vault = await withToken();
    const other = (await openVault({ kind: 'passphrase', passphrase: PASS }, opts)).value!;
    expect(
      (await vault.rekey({ kind: 'passphrase', passphrase: 'a brand new passphrase' })).ok,
    ).toBe(true);
    expect((await vault.resolve('release-api', API)).ok).toBe(true);
    expect((await other.resolve('release-api', API)).failure?.code).toBe('key_changed');
    expect((await openVault({ kind: 'passphrase', passphrase: PASS }, opts)).failure?.code).toBe(
      'wrong_key',
    );
    const reopened = await openVault(
      { kind: 'passphrase', passphrase: 'a brand new passphrase' },
      opts,
    );
    expect((await reopened.value!.resolve('release-api', API)).value).toMatchObject({
      header_value: `Bearer ${TOKEN}`,
    });
  });

  it('aborts a re-key with nothing written when one value fails authentication', async () => {
    const vault = await withToken();
    const file = JSON.parse(await readFile(path, 'utf8')) as {
      credentials: Record<string, { tag: string }>;
    };
    file.credentials['release-api']!.tag = Buffer.alloc(16).toString('base64');
    await writeFile(path, JSON.stringify(file));
    const before = await readFile(path);
    const rekeyed = await vault.rekey({ kind: 'passphrase', passphrase: 'another passphrase' });
    expect(rekeyed.failure?.code).toBe('integrity');
    expect((await readFile(path)).equals(before)).toBe(true);
    expect((await openVault({ kind: 'passphrase', passphrase: PASS }, opts)).ok).toBe(true);
  });

  it('reports missing, corrupt, existing and unsupported vault files with distinct codes', async () => {
    expect((await openVault({ kind: 'passphrase', passphrase: PASS }, opts)).failure?.code).toBe(
      'not_found',
    );
    await newVault();
    expect((await initVault({ kind: 'passphrase', passphrase: PASS }, opts)).failure?.code).toBe(
      'already_exists',
    );
    const text = await readFile(path, 'utf8');
    await writeFile(path, text.replace('"version": 1', '"version": 9'));
    expect((await listCredentials(opts)).failure?.code).toBe('unsupported_version');
    await writeFile(path, '{ not json');
    expect((await listCredentials(opts)).failure?.code).toBe('corrupt');
    const vault = await openVault({ kind: 'passphrase', passphrase: PASS }, opts);
    expect(vault.failure?.code).toBe('corrupt');
  });

  it('does not lose a lock that races with a set from another handle', async () => {
    const vault = await withToken();
    const results = await Promise.all([
      vault.set({
        name: 'second',
        type: 'bearer',
        secret: 'abcdefgh1234',
        bindings: [bind('https://h.test')],
      }),
      lockVault('operator', opts),
      vault.set({
        name: 'third',
        type: 'bearer',
        secret: 'abcdefgh5678',
        bindings: [bind('https://h.test')],
      }),
    ]);
    expect(results.every((r) => r.ok)).toBe(true);
    const list = await listCredentials(opts);
    expect(list.value?.gate.locked).toBe(true);
    expect(list.value?.credentials.map((c) => c.name)).toEqual(['release-api', 'second', 'third']);
  });

  it('reports every released secret to onSecret', async () => {
    const seen: string[] = [];
    opts.onSecret = (s) => seen.push(s);
    const vault = await newVault();
    await vault.set({
      name: 'u',
      type: 'basic',
      username: 'ci',
      secret: 'pa55word',
      bindings: [bind('https://api.example.test')],
    });
    await vault.resolve('u', API);
    expect(seen).toEqual(['pa55word', `Basic ${Buffer.from('ci:pa55word').toString('base64')}`]);
  });

  it('validates names, bindings and values before writing', async () => {
    const vault = await newVault();
    const https = [bind('https://api.example.test')];
    const cases: [SetCredentialInput, string][] = [
      [{ name: 'bad name', type: 'bearer', secret: TOKEN, bindings: https }, 'invalid_name'],
      [{ name: 'x', type: 'bearer', secret: TOKEN, bindings: [] }, 'invalid_binding'],
      [
        { name: 'x', type: 'bearer', secret: TOKEN, bindings: [bind('ssh:web-1')] },
        'invalid_binding',
      ],
      [{ name: 'x', type: 'bearer', secret: 'abc', bindings: https }, 'invalid_value'],
      [
        { name: 'x', type: 'bearer', secret: 'abcd\r\nX-Evil: 1', bindings: https },
        'invalid_value',
      ],
      [{ name: 'x', type: 'basic', secret: 'abcdefg', bindings: https }, 'invalid_value'],
      [
        { name: 'x', type: 'api_key', header_name: 'Host', secret: 'abcdefg', bindings: https },
        'invalid_value',
      ],
      [
        { name: 'x', type: 'ssh_key', secret: 'not a key', bindings: [bind('ssh:web-1')] },
        'invalid_value',
      ],
    ];
    const before = await readFile(path);
    for (const [input, code] of cases) {
      expect((await vault.set(input)).failure?.code, JSON.stringify(input.name)).toBe(code);
    }
    expect((await readFile(path)).equals(before)).toBe(true);
    await vault.set({ name: 'x', type: 'bearer', secret: TOKEN, bindings: https });
    expect(
      (await vault.set({ name: 'x', type: 'bearer', secret: TOKEN, bindings: https })).failure
        ?.code,
    ).toBe('credential_exists');
  });
});
