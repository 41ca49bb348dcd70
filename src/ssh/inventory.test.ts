import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hostKeyFingerprint, lookupHost, parseInventory, pinnedHostVerifier } from './inventory.js';

const FP = `SHA256:${'A'.repeat(43)}`;
const entry = {
  host: 'db1.internal',
  user: 'deploy',
  key_ref: 'vault:ssh-deploy',
  host_key: { policy: 'pinned', fingerprint: FP },
};

describe('inventory', () => {
  it('parses entries, defaults the port and looks hosts up by ref only', () => {
    const r = parseInventory({ 'db-prod': entry });
    expect(r.ok).toBe(true);
    const inv = r.value!;
    expect(lookupHost(inv, 'db-prod')).toMatchObject({ host: 'db1.internal', port: 22 });
    expect(lookupHost(inv, 'toString')).toBeUndefined();
    expect(lookupHost(inv, 'other')).toBeUndefined();
  });

  it('refuses inline keys, unpinned hosts and malformed fingerprints with paths', () => {
    const r = parseInventory({
      a: { ...entry, key_ref: '-----BEGIN OPENSSH PRIVATE KEY-----' },
      b: { ...entry, host_key: { policy: 'accept-new', fingerprint: FP } },
      c: { ...entry, host_key: { policy: 'pinned', fingerprint: 'MD5:aa:bb' } },
      d: { ...entry, private_key: 'x' },
    });
    expect(r.ok).toBe(false);
    const paths = r.failure!.map((i) => i.path);
    expect(paths).toEqual(
      expect.arrayContaining(['a.key_ref', 'b.host_key.policy', 'c.host_key.fingerprint', 'd']),
    );
    expect(r.failure!.every((i) => i.code === 'invalid_inventory')).toBe(true);
  });

  it('fingerprints a key blob like OpenSSH and verifies only the pinned key', () => {
    const { publicKey } = generateKeyPairSync('ed25519');
    const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
    const u32 = (n: number) => Buffer.from([0, 0, 0, n]);
    const blob = Buffer.concat([u32(11), Buffer.from('ssh-ed25519'), u32(32), raw]);
    const fp = hostKeyFingerprint(blob);
    expect(fp).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
    const rejected: string[] = [];
    expect(pinnedHostVerifier(fp, (s) => rejected.push(s))(blob)).toBe(true);
    expect(pinnedHostVerifier(FP, (s) => rejected.push(s))(blob)).toBe(false);
    expect(rejected).toEqual([fp]);
  });
});
