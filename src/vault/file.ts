// The vault file: its schema, reading, and crash-safe writing.
// Writes go to a temporary file in the same directory (mode 0600), are fsynced, then renamed over
// the old file, and the directory is fsynced: a crash leaves either the old or the new vault, never
// a torn one. Read-modify-write cycles hold a small exclusive `.writing` file so that a `lock` from
// one process is not lost under a concurrent `set` from another.
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { fail, ok, type Result, type VaultFailure } from './types.js';

export const VAULT_FORMAT = 'candor-vault';
export const VAULT_VERSION = 1;
export const DEFAULT_VAULT_PATH = './.candor/vault.json';

const b64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/);

const bindingSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('http'), origin: z.string().min(1), path_prefix: z.string() }),
  z.object({ kind: z.literal('ssh'), host_ref: z.string().min(1) }),
]);

const credentialSchema = z.object({
  type: z.enum(['bearer', 'basic', 'api_key', 'ssh_key', 'ssh_secret']),
  username: z.string().optional(),
  header_name: z.string().optional(),
  bindings: z.array(bindingSchema).min(1),
  created_at: z.number(),
  rotated_at: z.number().nullable(),
  nonce: b64,
  ciphertext: b64,
  tag: b64,
});

/**
 * OAuth clients Candor holds with authorization servers, one per issuer (RFC 6749 §2.2: a client
 * id is unique to the server that issued it). A client secret, when there is one, is sealed.
 */
const oauthClientSchema = z.object({
  issuer: z.string().min(1),
  client_id: z.string().min(1),
  /** `registered` (RFC 7591), `metadata_document` (a Client ID Metadata Document URL). */
  how: z.enum(['registered', 'metadata_document']),
  redirect_uris: z.array(z.string()),
  token_endpoint_auth_method: z.string(),
  created_at: z.number(),
  secret: z.object({ nonce: b64, ciphertext: b64, tag: b64 }).nullable(),
});

/**
 * The tokens of one upstream (and one caller, for per-principal tokens): everything in clear but
 * the tokens, which are one sealed JSON value bound (aad) to the upstream, its URL, the resource,
 * the issuer and the client.
 */
const oauthGrantSchema = z.object({
  upstream: z.string().min(1),
  /** Whose tokens: `local` (the operator's), or an authenticated caller's subject. */
  subject: z.string().min(1),
  server_url: z.string().min(1),
  resource: z.string().min(1),
  issuer: z.string().min(1),
  client_id: z.string().min(1),
  /** Scopes the authorization server granted (space-separated; '' when it did not say). */
  scope: z.string(),
  /** Scopes asked for at login. */
  requested_scope: z.string(),
  /** Scopes an upstream asked for since (403 insufficient_scope); the next login asks for them. */
  step_up_scope: z.string().nullable(),
  token_type: z.string(),
  /** When the access token expires (ms since the epoch), or null when the server did not say. */
  expires_at: z.number().nullable(),
  obtained_at: z.number(),
  refreshed_at: z.number().nullable(),
  has_refresh_token: z.boolean(),
  /** Why a person must log in again (a refresh was refused, …), or null. */
  login_required: z.string().nullable(),
  nonce: b64,
  ciphertext: b64,
  tag: b64,
});

const vaultFileSchema = z.object({
  format: z.literal(VAULT_FORMAT),
  version: z.number().int(),
  vault_id: z.string().regex(/^[0-9a-f]{32}$/),
  kdf: z.discriminatedUnion('kind', [
    z.object({
      kind: z.literal('scrypt'),
      salt: b64,
      N: z.number(),
      r: z.number(),
      p: z.number(),
    }),
    z.object({ kind: z.literal('key_file') }),
  ]),
  key_check: b64,
  gate: z.object({
    locked: z.boolean(),
    changed_at: z.number(),
    by: z.string(),
    generation: z.number().int().nonnegative(),
    /** HMAC proving that someone holding the key unlocked this generation; null while locked. */
    token: b64.nullable(),
  }),
  credentials: z.record(z.string(), credentialSchema),
  oauth_clients: z.record(z.string(), oauthClientSchema).optional(),
  oauth_grants: z.record(z.string(), oauthGrantSchema).optional(),
});

export type StoredOAuthClient = z.infer<typeof oauthClientSchema>;
export type StoredOAuthGrant = z.infer<typeof oauthGrantSchema>;
export type VaultFile = z.infer<typeof vaultFileSchema>;
export type StoredCredential = z.infer<typeof credentialSchema>;

export async function readVaultFile(path: string): Promise<Result<VaultFile, VaultFailure>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      return fail({ code: 'not_found', message: `No vault at ${path}; run "candor vault init".` });
    }
    return fail({ code: 'unreadable', message: `Cannot read the vault at ${path} (${code}).` });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return fail({ code: 'corrupt', message: `The vault at ${path} is not valid JSON.` });
  }
  const version = (json as { version?: unknown } | null)?.version;
  if (typeof version === 'number' && version !== VAULT_VERSION) {
    return fail({
      code: 'unsupported_version',
      message: `The vault at ${path} has format version ${version}; this build reads ${VAULT_VERSION}.`,
    });
  }
  const parsed = vaultFileSchema.safeParse(json);
  if (!parsed.success) {
    return fail({
      code: 'corrupt',
      message: `The vault at ${path} does not match the vault format.`,
    });
  }
  return ok(parsed.data);
}

/** Serialises with sorted credential names so that diffs and tests are stable. */
export function formatVaultFile(file: VaultFile): string {
  const credentials = Object.fromEntries(
    Object.keys(file.credentials)
      .sort()
      .map((name) => [name, file.credentials[name]]),
  );
  return `${JSON.stringify({ ...file, credentials }, null, 2)}\n`;
}

export async function writeFileAtomic(
  path: string,
  text: string,
  flag: 'replace' | 'create' = 'replace',
): Promise<Result<void, VaultFailure>> {
  const dir = dirname(path);
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const fh = await open(tmp, 'wx', 0o600);
    try {
      await fh.writeFile(text, 'utf8');
      await fh.sync();
    } finally {
      await fh.close();
    }
    await chmod(tmp, 0o600); // the umask can only narrow the mode; make it exactly 0600
    if (flag === 'create' && (await exists(path))) {
      await unlink(tmp);
      return fail({ code: 'already_exists', message: `A file already exists at ${path}.` });
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
    return fail({ code: 'unwritable', message: `Cannot write ${path} (${code}).` });
  }
  await fsyncDir(dir);
  return ok(undefined);
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

async function fsyncDir(dir: string): Promise<void> {
  try {
    const fh = await open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch {
    // Some platforms cannot fsync a directory; the rename is still atomic there.
  }
}

/** A `.writing` file older than this is left over from a crashed writer and may be taken over. */
const STALE_WRITER_MS = 30_000;
const WRITER_WAIT_MS = 25;
const WRITER_TRIES = 80;

/** Runs `fn` while holding the exclusive writer file for `path`; `busy` if another writer holds it. */
export async function withWriter<T>(
  path: string,
  fn: () => Promise<Result<T, VaultFailure>>,
): Promise<Result<T, VaultFailure>> {
  const marker = `${path}.writing`;
  try {
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
    return fail({ code: 'unwritable', message: `Cannot create the vault directory (${code}).` });
  }
  for (let i = 0; i < WRITER_TRIES; i++) {
    const acquired = await tryAcquire(marker);
    if (acquired === 'acquired') {
      try {
        return await fn();
      } finally {
        await unlink(marker).catch(() => undefined);
      }
    }
    if (acquired !== 'held') {
      return fail({ code: 'unwritable', message: `Cannot write next to ${path} (${acquired}).` });
    }
    const age = await stat(marker).then(
      (s) => Date.now() - s.mtimeMs,
      () => 0,
    );
    if (age > STALE_WRITER_MS) await unlink(marker).catch(() => undefined);
    else await delay(WRITER_WAIT_MS);
  }
  return fail({ code: 'busy', message: `Another process is writing the vault at ${path}.` });
}

/** `acquired`, `held` (another writer has it), or the errno code of an unexpected failure. */
async function tryAcquire(marker: string): Promise<string> {
  try {
    const fh = await open(marker, 'wx', 0o600);
    try {
      await fh.writeFile(String(process.pid));
    } finally {
      await fh.close();
    }
    return 'acquired';
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
    return code === 'EEXIST' ? 'held' : code;
  }
}
