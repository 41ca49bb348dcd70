// OAuth tokens in the vault: sealed, bound to the upstream they were obtained for, behind the gate,
// kept across a re-key; status metadata readable without the key.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createKeyFile,
  initVault,
  listOAuthGrants,
  lockVault,
  type NewOAuthGrant,
} from './index.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'candor-vault-oauth-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const ACCESS = 'access-canary-4b1d9e0c7a55';
const REFRESH = 'refresh-canary-93f0aa21c6d7';
const grant: NewOAuthGrant = {
  upstream: 'tracker',
  subject: 'local',
  server_url: 'https://mcp.tracker.example/mcp',
  resource: 'https://mcp.tracker.example/mcp',
  issuer: 'https://as.tracker.example',
  client_id: 'dyn-1',
  scope: 'issues:read issues:write',
  requested_scope: 'issues:read issues:write',
  step_up_scope: null,
  token_type: 'Bearer',
  expires_at: 1_900_000_000_000,
  obtained_at: 1_800_000_000_000,
  refreshed_at: null,
  login_required: null,
  access_token: ACCESS,
  refresh_token: REFRESH,
};

async function vault() {
  const keyFile = join(dir, 'vault.key');
  await createKeyFile(keyFile);
  const path = join(dir, 'vault.json');
  const secrets: string[] = [];
  const v = await initVault(
    { kind: 'key_file', path: keyFile },
    { path, onSecret: (s) => secrets.push(s) },
  );
  if (!v.ok) throw new Error(v.failure.message);
  return { v: v.value, path, secrets, keyFile };
}

describe('vault OAuth grants', () => {
  it('seals the tokens, releases them to the redactor, lists only metadata without the key', async () => {
    const { v, path, secrets } = await vault();
    expect((await v.oauth.saveGrant('tracker', grant)).ok).toBe(true);
    const text = await readFile(path, 'utf8');
    expect(text).not.toContain(ACCESS);
    expect(text).not.toContain(REFRESH);
    const back = await v.oauth.grant('tracker');
    expect(back.value).toMatchObject({
      access_token: ACCESS,
      refresh_token: REFRESH,
      has_refresh_token: true,
    });
    expect(secrets).toEqual(expect.arrayContaining([ACCESS, REFRESH]));
    const listed = await listOAuthGrants({ path });
    expect(listed.value).toEqual([
      expect.objectContaining({ key: 'tracker', scope: 'issues:read issues:write' }),
    ]);
    expect(JSON.stringify(listed.value)).not.toContain(ACCESS);
    // Marking keeps the tokens readable (the aad does not cover these fields).
    expect(
      (await v.oauth.markGrant('tracker', { login_required: 'refresh_refused:invalid_grant' })).ok,
    ).toBe(true);
    expect((await v.oauth.grant('tracker')).value?.login_required).toBe(
      'refresh_refused:invalid_grant',
    );
  });

  it('a grant pointed at another server in the file fails to open; a locked gate releases nothing', async () => {
    const { v, path } = await vault();
    await v.oauth.saveGrant('tracker', grant);
    const file = JSON.parse(await readFile(path, 'utf8')) as {
      oauth_grants: Record<string, { server_url: string }>;
    };
    file.oauth_grants['tracker']!.server_url = 'https://attacker.example/mcp';
    await writeFile(path, JSON.stringify(file));
    expect((await v.oauth.grant('tracker')).failure?.code).toBe('integrity');
    file.oauth_grants['tracker']!.server_url = grant.server_url;
    await writeFile(path, JSON.stringify(file));
    expect((await v.oauth.grant('tracker')).value?.access_token).toBe(ACCESS);
    await lockVault('test', { path });
    expect((await v.oauth.grant('tracker')).failure?.code).toBe('locked');
  });

  it('keeps tokens and client secrets readable across a re-key', async () => {
    const { v } = await vault();
    await v.oauth.saveGrant('tracker', grant);
    await v.oauth.saveClient({
      issuer: grant.issuer,
      client_id: 'dyn-1',
      how: 'registered',
      redirect_uris: ['http://127.0.0.1/callback'],
      token_endpoint_auth_method: 'client_secret_basic',
      client_secret: 'client-secret-55aa77',
    });
    const newKey = join(dir, 'new.key');
    await createKeyFile(newKey);
    expect((await v.rekey({ kind: 'key_file', path: newKey })).ok).toBe(true);
    expect((await v.oauth.grant('tracker')).value?.refresh_token).toBe(REFRESH);
    expect((await v.oauth.client(grant.issuer)).value?.client_secret).toBe('client-secret-55aa77');
  });
});
