// SSH host inventory: `host_ref -> { host, port, user, key_ref, host_key }`. Keys are referenced,
// never inlined: the agent sees only host refs, and the private key bytes are fetched through an
// injected `resolveKey` at connect time. The server's host key is pinned by its OpenSSH SHA256
// fingerprint; an unpinned host is not connectable.
import { createHash } from 'node:crypto';
import { z } from 'zod';

/** `SHA256:` + unpadded base64 of a 32-byte digest, as `ssh-keygen -lf` prints it. */
export const FINGERPRINT_PATTERN = /^SHA256:[A-Za-z0-9+/]{43}$/;

/** Credential references the key resolver understands (`file:PATH`, `vault:NAME`, `env:VAR`). */
export const KEY_REF_PATTERN = /^(file|vault|env):.+$/;

/** Host refs are what agents and ledger events name: short, stable, no secrets. */
export const HOST_REF_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export const hostKeySchema = z.strictObject({
  policy: z.literal('pinned'),
  fingerprint: z.string().regex(FINGERPRINT_PATTERN, 'expected SHA256:<43 base64 characters>'),
});

export const hostEntrySchema = z.strictObject({
  host: z.string().min(1),
  port: z.number().int().min(1).max(65535).default(22),
  user: z.string().min(1),
  key_ref: z.string().regex(KEY_REF_PATTERN, 'expected file:PATH, vault:NAME or env:VAR'),
  host_key: hostKeySchema,
  /**
   * Remote directory holding operation markers. Default on the remote side:
   * `${XDG_STATE_HOME:-$HOME/.local/state}/candor/ops`.
   */
  marker_dir: z.string().min(1).optional(),
});
export type HostEntry = z.output<typeof hostEntrySchema>;
export type HostEntryInput = z.input<typeof hostEntrySchema>;

export const inventorySchema = z.record(z.string().regex(HOST_REF_PATTERN), hostEntrySchema);
export type Inventory = z.output<typeof inventorySchema>;

/** Fetches private key bytes for a `key_ref`. Rejects (or resolves empty) when unavailable. */
export type ResolveKey = (keyRef: string) => Promise<Buffer>;

export type InventoryIssue = { code: 'invalid_inventory'; path: string; message: string };

/** Parses an inventory document (e.g. from YAML). Expected problems are returned, not thrown. */
export function parseInventory(
  input: unknown,
):
  | { ok: true; value: Inventory; failure?: never }
  | { ok: false; failure: InventoryIssue[]; value?: never } {
  const parsed = inventorySchema.safeParse(input);
  if (parsed.success) return { ok: true, value: parsed.data };
  return {
    ok: false,
    failure: parsed.error.issues.map((i) => ({
      code: 'invalid_inventory',
      path: i.path.map(String).join('.'),
      message: i.message,
    })),
  };
}

/** The entry for `hostRef`, or undefined when the inventory does not name it. */
export function lookupHost(inventory: Inventory, hostRef: string): HostEntry | undefined {
  return Object.hasOwn(inventory, hostRef) ? inventory[hostRef] : undefined;
}

/** OpenSSH-style fingerprint of a host key blob (the wire encoding ssh2 hands to hostVerifier). */
export function hostKeyFingerprint(keyBlob: Buffer): string {
  return `SHA256:${createHash('sha256').update(keyBlob).digest('base64').replace(/=+$/, '')}`;
}

/**
 * A synchronous ssh2 `hostVerifier` accepting only the pinned key. `onReject` lets the transport
 * record the mismatch as a code instead of reading ssh2's error text.
 */
export function pinnedHostVerifier(
  pinned: string,
  onReject: (seen: string) => void,
): (keyBlob: Buffer) => boolean {
  return (keyBlob) => {
    const seen = hostKeyFingerprint(keyBlob);
    if (seen === pinned) return true;
    onReject(seen);
    return false;
  };
}
