import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { manualClock, seededRandom } from '../core/time.js';
import { parseBinding } from './binding.js';
import { createRedactor } from '../core/redact.js';
import { createCredentialResolver, parseCredentialRef } from './resolve.js';
import { initVault, lockVault, type VaultOptions } from './store.js';
import type { Binding } from './types.js';

const bind = (spec: string): Binding => parseBinding(spec).value!;
const CI = { kind: 'http', url: 'https://ci.example.test/api/v3/repos' } as const;
const dirs: string[] = [];

afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

describe('credential references', () => {
  it('parses vault:NAME and env:VAR and nothing else', () => {
    expect(parseCredentialRef('vault:identity-prod').value).toEqual({
      source: 'vault',
      name: 'identity-prod',
    });
    expect(parseCredentialRef('env:GH_TOKEN').value).toEqual({
      source: 'env',
      variable: 'GH_TOKEN',
    });
    for (const bad of ['identity-prod', 'vault:', 'env:1X', 'file:/etc/passwd', 'vault:a b']) {
      expect(parseCredentialRef(bad).failure?.code, bad).toBe('bad_ref');
    }
  });

  it('resolves a declared env credential only for its bindings and reports the secret', async () => {
    const redactor = createRedactor();
    const resolver = createCredentialResolver({
      envCredentials: {
        GH_TOKEN: { type: 'bearer', bindings: [bind('https://ci.example.test/api')] },
      },
      env: { GH_TOKEN: 'ghs_0123456789abcdefghij', OTHER: 'zzzzzzzzzzzz' },
      onSecret: (s) => redactor.addSecret(s),
    });
    expect((await resolver.resolveCredential('env:GH_TOKEN', CI)).value).toEqual({
      kind: 'http_header',
      header_name: 'Authorization',
      header_value: 'Bearer ghs_0123456789abcdefghij',
    });
    expect(redactor.containsSecret('x ghs_0123456789abcdefghij')).toBe(true);
    const elsewhere = await resolver.resolveCredential('env:GH_TOKEN', {
      kind: 'http',
      url: 'https://evil.example.test/api',
    });
    expect(elsewhere.failure?.code).toBe('binding_mismatch');
    expect((await resolver.resolveCredential('env:OTHER', CI)).failure?.code).toBe('unknown_ref');
    expect((await resolver.resolveCredential('env:toString', CI)).failure?.code).toBe(
      'unknown_ref',
    );
    expect((await resolver.resolveCredential('vault:x', CI)).failure?.code).toBe(
      'vault_unavailable',
    );
  });

  it('reports an unset or unusable variable without quoting it', async () => {
    const resolver = createCredentialResolver({
      envCredentials: {
        A: { type: 'bearer', bindings: [bind('https://ci.example.test')] },
        B: { type: 'bearer', bindings: [bind('https://ci.example.test')] },
      },
      env: { B: 'line\nbreak-value' },
    });
    expect((await resolver.resolveCredential('env:A', CI)).failure?.code).toBe('env_missing');
    const bad = await resolver.resolveCredential('env:B', CI);
    expect(bad.failure?.code).toBe('env_missing');
    expect(bad.failure?.message).not.toContain('break-value');
    expect(bad.failure?.message).toContain('control characters');
    // A value too short to redact is refused saying so, not as a binding problem.
    const short = await createCredentialResolver({
      envCredentials: { C: { type: 'bearer', bindings: [bind('https://ci.example.test')] } },
      env: { C: 'abc' },
    }).resolveCredential('env:C', CI);
    expect(short.failure?.message).toBe(
      'C is set but does not hold a usable bearer value: The value must have at least 4 characters (shorter ones cannot be redacted).',
    );
    expect(short.failure?.message).not.toContain('bound');
  });

  it('applies the vault gate to env references as well', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'candor-resolve-'));
    dirs.push(dir);
    const opts: VaultOptions = {
      path: join(dir, 'vault.json'),
      clock: manualClock(),
      random: seededRandom(3),
      scrypt: { N: 2 ** 10, r: 8, p: 1 },
      allowWeakKdf: true,
    };
    const vault = (await initVault({ kind: 'passphrase', passphrase: 'passphrase-1' }, opts))
      .value!;
    await vault.set({
      name: 'ci',
      type: 'bearer',
      secret: 'abcdefgh12345',
      bindings: [bind('https://ci.example.test')],
    });
    const resolver = createCredentialResolver({
      vault,
      envCredentials: { GH_TOKEN: { type: 'bearer', bindings: [bind('https://ci.example.test')] } },
      env: { GH_TOKEN: 'ghs_0123456789abcdefghij' },
    });
    expect((await resolver.resolveCredential('vault:ci', CI)).ok).toBe(true);
    expect((await resolver.resolveCredential('env:GH_TOKEN', CI)).ok).toBe(true);
    await lockVault('operator', opts);
    expect((await resolver.resolveCredential('vault:ci', CI)).failure?.code).toBe('locked');
    expect((await resolver.resolveCredential('env:GH_TOKEN', CI)).failure?.code).toBe('locked');
  });
});
