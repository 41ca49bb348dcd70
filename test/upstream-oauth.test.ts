// OAuth to an upstream MCP server, end to end on real parts: a real authorization server
// (oidc-provider: dynamic registration, PKCE, resource indicators with JWT access tokens, refresh
// tokens, RFC 9207 `iss`), a Streamable HTTP MCP server (the SDK's) behind a resource server that
// validates those JWTs (jose: the provider's JWKS, aud = its resource URI, scopes per tool), and
// Candor's own processes: `candor upstream login` driven through the provider's login and consent
// pages by fetch, `candor serve` over stdio, `candor upstream status`, `candor probe mcp`.
// The notes array is the ground truth of what the upstream did; `posts` is every tools/call that
// reached the resource server, with whether it was let through.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createRemoteJWKSet, exportJWK, generateKeyPair, jwtVerify } from 'jose';
import Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { envelopeSchema, type Envelope } from '../src/core/envelope.js';
import { createKeyFile, initVault } from '../src/vault/index.js';
import { connectStdio, ROOT, tempDir, writeConfig } from './fixtures/mcp/stdio.js';

/** Access-token lifetime (seconds): short, so that the test sees expiry and refresh. */
const TTL = 4;
const notes: string[] = [];
const posts: Array<{ tool: string; text?: string; let_through: boolean }> = [];
/** Every bearer token the resource server was shown, and every refresh token the provider saved. */
const canaries = new Set<string>();
const refreshTokens: Array<{ destroy(): Promise<void>; grantId?: string }> = [];
let refreshGrants = 0;
let rejectNext = false;
let cutNext = false;

let as: Server;
let rs: Server;
let provider: Provider;
let issuer: string;
let mcpUrl: string;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function notesServer(): McpServer {
  const s = new McpServer({ name: 'notes', version: '1.0.0' });
  s.registerTool(
    'add_note',
    {
      description: 'Adds a note',
      inputSchema: { text: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    },
    ({ text }) => {
      notes.push(text);
      return { content: [{ type: 'text', text: `added ${text}` }] };
    },
  );
  s.registerTool(
    'find_notes',
    {
      description: 'Notes with this text',
      inputSchema: { text: z.string() },
      outputSchema: { notes: z.array(z.string()) },
      annotations: { readOnlyHint: true },
    },
    ({ text }) => {
      const found = notes.filter((n) => n === text);
      return {
        content: [{ type: 'text', text: JSON.stringify(found) }],
        structuredContent: { notes: found },
      };
    },
  );
  s.registerTool(
    'purge_notes',
    { description: 'Removes every note (needs notes:admin)', inputSchema: {} },
    () => {
      notes.length = 0;
      return { content: [{ type: 'text', text: 'purged' }] };
    },
  );
  return s;
}

/** The scope each tool needs. */
const NEEDS: Record<string, string> = {
  add_note: 'notes:write',
  find_notes: 'notes:read',
  purge_notes: 'notes:admin',
};

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((r) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => r(body));
  });
}

beforeAll(async () => {
  // The authorization server: its issuer is its own loopback URL.
  as = createServer();
  await new Promise<void>((r) => as.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(as.address() as AddressInfo).port}`;
  rs = createServer();
  await new Promise<void>((r) => rs.listen(0, '127.0.0.1', r));
  const rsOrigin = `http://127.0.0.1:${(rs.address() as AddressInfo).port}`;
  mcpUrl = `${rsOrigin}/mcp`;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: 'test-key', alg: 'RS256', use: 'sig' };
  provider = new Provider(issuer, {
    jwks: { keys: [jwk] },
    features: {
      registration: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => mcpUrl,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          if (resource !== mcpUrl) throw new Error(`unknown resource ${resource}`);
          return {
            scope: 'notes:read notes:write',
            audience: mcpUrl,
            accessTokenTTL: TTL,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    scopes: ['openid', 'offline_access', 'notes:read', 'notes:write'],
    issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
    ttl: { AccessToken: TTL },
  });
  provider.on('refresh_token.saved', (t: { jti: string; destroy(): Promise<void> }) => {
    canaries.add(t.jti);
    refreshTokens.push(t);
  });
  provider.on('grant.success', (ctx: { oidc: { params?: { grant_type?: string } } }) => {
    if (ctx.oidc.params?.grant_type === 'refresh_token') refreshGrants++;
  });
  provider.on('server_error', (_ctx: unknown, error: Error) =>
    console.error('AS server_error', error),
  );
  as.on('request', provider.callback());

  const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
  const metadataUrl = `${rsOrigin}/.well-known/oauth-protected-resource/mcp`;
  const challenge = (extra = '') =>
    `Bearer resource_metadata="${metadataUrl}"${extra ? `, ${extra}` : ''}`;
  rs.on('request', (req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', rsOrigin).pathname;
      if (path === '/.well-known/oauth-protected-resource/mcp') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            resource: mcpUrl,
            authorization_servers: [issuer],
            scopes_supported: ['notes:read', 'notes:write'],
            bearer_methods_supported: ['header'],
          }),
        );
        return;
      }
      if (path !== '/mcp') {
        res.writeHead(404).end();
        return;
      }
      const body = await readBody(req);
      const auth = req.headers.authorization ?? '';
      if (!auth.startsWith('Bearer ')) {
        res.writeHead(401, { 'www-authenticate': challenge() }).end();
        return;
      }
      const token = auth.slice(7);
      canaries.add(token);
      let scopes: string[];
      try {
        const { payload } = await jwtVerify(token, jwks, { issuer, audience: mcpUrl });
        scopes = typeof payload['scope'] === 'string' ? payload['scope'].split(' ') : [];
      } catch {
        res.writeHead(401, { 'www-authenticate': challenge('error="invalid_token"') }).end();
        return;
      }
      // A resumed stream (the answer of a call in flight) is refused: its token "expired".
      if (req.method === 'GET' && req.headers['last-event-id']) {
        res.writeHead(401, { 'www-authenticate': challenge('error="invalid_token"') }).end();
        return;
      }
      const parsed = body
        ? (JSON.parse(body) as {
            method?: string;
            params?: { name?: string; arguments?: { text?: string } };
          })
        : undefined;
      const tool = parsed?.method === 'tools/call' ? (parsed.params?.name ?? '') : null;
      const text = parsed?.params?.arguments?.text;
      if (tool !== null && rejectNext) {
        rejectNext = false;
        posts.push({ tool, ...(text ? { text } : {}), let_through: false });
        res.writeHead(401, { 'www-authenticate': challenge('error="invalid_token"') }).end();
        return;
      }
      if (tool !== null && !scopes.includes(NEEDS[tool] ?? 'none')) {
        posts.push({ tool, let_through: false });
        res
          .writeHead(403, {
            'www-authenticate': challenge(`error="insufficient_scope", scope="${NEEDS[tool]}"`),
          })
          .end();
        return;
      }
      if (tool !== null) posts.push({ tool, ...(text ? { text } : {}), let_through: true });
      if (tool === 'add_note' && cutNext) {
        cutNext = false;
        // The note is stored; the answer's stream opens, then ends when the token "expires".
        notes.push(text ?? '');
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(`id: ${randomUUID()}\nretry: 50\ndata: \n\n`);
        return;
      }
      if (req.method !== 'POST') {
        res.writeHead(405).end();
        return;
      }
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
      const server = notesServer();
      res.on('close', () => void transport.close().then(() => server.close()));
      await server.connect(transport);
      await transport.handleRequest(req, res, parsed);
    })();
  });
});

afterAll(async () => {
  await new Promise<void>((r) => rs.close(() => r()));
  await new Promise<void>((r) => as.close(() => r()));
});

/** A cookie-keeping client that walks the provider's login and consent pages like a person. */
async function authorize(url: string): Promise<void> {
  const jar = new Map<string, string>();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
  };
  let next: { url: string; init?: RequestInit } = { url };
  for (let step = 0; step < 20; step++) {
    const res = await fetch(next.url, {
      ...next.init,
      redirect: 'manual',
      headers: { ...(next.init?.headers as Record<string, string>), cookie: cookie() },
    });
    keep(res);
    const location = res.headers.get('location');
    if (location) {
      await res.arrayBuffer();
      const target = new URL(location, next.url);
      if (target.pathname === '/callback') {
        // The loopback redirect to `candor upstream login`: it answers once the tokens are stored.
        const done = await fetch(target);
        expect(done.status, await done.text()).toBe(200);
        return;
      }
      next = { url: target.href };
      continue;
    }
    const html = await res.text();
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    if (!action)
      throw new Error(`no form at ${next.url} (HTTP ${res.status}): ${html.slice(0, 300)}`);
    const fields = new URLSearchParams();
    for (const [tag] of html.matchAll(/<input[^>]*>/g)) {
      const name = /name="([^"]*)"/.exec(tag)?.[1];
      if (name) fields.set(name, /value="([^"]*)"/.exec(tag)?.[1] ?? '');
    }
    if (fields.has('login')) fields.set('login', 'ada');
    if (fields.has('password')) fields.set('password', 'any');
    next = {
      url: new URL(action.replace(/&amp;/g, '&'), next.url).href,
      init: {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: fields.toString(),
      },
    };
  }
  throw new Error('the authorization did not finish');
}

/** Runs the CLI; `onLine` sees each stdout line as it comes. */
function cli(
  args: string[],
  cwd: string,
  onLine?: (line: string) => void,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'candor.js'), ...args], {
      cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let pending = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString('utf8');
      pending += d.toString('utf8');
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        onLine?.(pending.slice(0, nl));
        pending = pending.slice(nl + 1);
      }
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    child.on('close', (status) => done({ status, stdout, stderr }));
  });
}

async function call(
  gw: Awaited<ReturnType<typeof connectStdio>>,
  name: string,
  args: Record<string, unknown>,
): Promise<Envelope> {
  const r = await gw.client.callTool({ name, arguments: args });
  return envelopeSchema.parse(r.structuredContent);
}

/** A local OTLP/HTTP receiver: every body it was sent. */
async function otlpReceiver(): Promise<{
  url: string;
  bodies: () => string;
  close: () => Promise<void>;
}> {
  let all = '';
  const s = createServer((req, res) => {
    void readBody(req).then((b) => {
      all += b;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
    bodies: () => all,
    close: () => new Promise<void>((r) => s.close(() => r())),
  };
}

describe('an upstream behind OAuth (auth: oauth)', () => {
  it('logs in through the loopback redirect, calls, refreshes unseen, classifies every auth failure honestly and leaks no token', async () => {
    const dir = tempDir('candor-up-oauth-');
    const keyFile = join(dir, 'vault.key');
    const vaultPath = join(dir, 'vault.json');
    expect((await createKeyFile(keyFile)).ok).toBe(true);
    const v = await initVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
    if (!v.ok) throw new Error(v.failure.message);
    v.value.close();
    const receiver = await otlpReceiver();
    const config = writeConfig(
      dir,
      `vault: { key_file: ${JSON.stringify(keyFile)}, path: ${JSON.stringify(vaultPath)} }
telemetry: { otlp: ${receiver.url}, metrics_interval_ms: 3600000 }
upstreams:
  notes:
    url: ${JSON.stringify(mcpUrl)}
    auth: oauth
    deadline_ms: 20000
    tools:
      add_note:
        lookup:
          tool: find_notes
          arguments: { text: '{{input.text}}' }
          match: { kind: count, array: notes }
        probe:
          arguments: { text: probe-note }
`,
    );

    // Before any login: status says so (exit 1), and serve refuses to start without tokens.
    const before = await cli(['upstream', 'status', '--config', config], dir);
    expect(before.status).toBe(1);
    expect(before.stdout).toContain('notes: not logged in: candor upstream login notes');

    // Login: the URL is printed; the test plays the person in the browser.
    let driven: Promise<void> = Promise.resolve();
    let started = false;
    const login = await cli(
      ['upstream', 'login', 'notes', '--config', config, '--timeout-s', '30'],
      dir,
      (line) => {
        if (line.startsWith('http') && !started) {
          started = true;
          driven = authorize(line);
        }
      },
    );
    await driven;
    expect(login.status, login.stderr).toBe(0);
    const authUrl = new URL(login.stdout.trim());
    expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authUrl.searchParams.get('resource')).toBe(mcpUrl);
    expect(authUrl.searchParams.get('redirect_uri')).toMatch(
      /^http:\/\/127\.0\.0\.1:\d+\/callback$/,
    );
    expect(authUrl.searchParams.get('scope')?.split(' ')).toEqual(
      expect.arrayContaining(['notes:read', 'notes:write']),
    );
    expect(login.stderr).toContain('logged in');

    const status = await cli(['upstream', 'status', '--config', config, '--json'], dir);
    expect(status.status, status.stderr).toBe(0);
    const [row] = JSON.parse(status.stdout) as Array<Record<string, unknown>>;
    expect(row).toMatchObject({
      upstream: 'notes',
      state: 'logged_in',
      issuer,
      resource: mcpUrl,
      refreshable: true,
    });
    expect(row!['scopes']).toEqual(expect.arrayContaining(['notes:read', 'notes:write']));
    expect(typeof row!['expires_at']).toBe('string');

    const gw = await connectStdio(
      ['--config', config, '--ledger', `sqlite:${join(dir, 'ledger.db')}`],
      {},
      dir,
    );
    const envelopes: Envelope[] = [];
    const run = async (name: string, args: Record<string, unknown>) => {
      const e = await call(gw, name, args);
      envelopes.push(e);
      return e;
    };
    try {
      // A call succeeds with the token from the vault.
      expect(await run('notes_add_note', { text: 'first' })).toMatchObject({
        ok: true,
        category: 'succeeded',
        remote_effect: 'applied',
      });
      expect(notes).toEqual(['first']);

      // The token expires; the next call is refreshed first, without the agent noticing.
      const refreshesBefore = refreshGrants;
      await sleep(TTL * 1000 + 500);
      expect(await run('notes_add_note', { text: 'second' })).toMatchObject({
        ok: true,
        category: 'succeeded',
      });
      expect(refreshGrants).toBeGreaterThan(refreshesBefore);
      expect(posts.filter((p) => p.text === 'second')).toEqual([
        { tool: 'add_note', text: 'second', let_through: true },
      ]);

      // A 401 on the call itself (the upstream rejects a token Candor still thought valid): it
      // refused the request, so Candor refreshes and sends it once more; done once.
      rejectNext = true;
      expect(await run('notes_add_note', { text: 'third' })).toMatchObject({
        ok: true,
        category: 'succeeded',
      });
      expect(posts.filter((p) => p.text === 'third').map((p) => p.let_through)).toEqual([
        false,
        true,
      ]);
      expect(notes.filter((n) => n === 'third')).toHaveLength(1);

      // Insufficient scope: refused before the tool ran, the scope named, nothing done.
      const denied = await run('notes_purge_notes', {});
      expect(denied).toMatchObject({
        ok: false,
        category: 'authorization_denied',
        retry: 'never',
        remote_effect: 'none',
        data: { refusal: { code: 'insufficient_scope', scope: 'notes:admin' } },
      });
      expect(notes).toEqual(['first', 'second', 'third']);

      // A 401 after the request was written (its answer's stream ended, the resumption refused):
      // unknown, never retried blindly; the duplicate guard holds the agent's repeat.
      cutNext = true;
      const lost = await run('notes_add_note', { text: 'fourth' });
      expect(lost).toMatchObject({
        ok: false,
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
      });
      const again = await run('notes_add_note', { text: 'fourth' });
      expect(again).toMatchObject({ retry: 'reconcile_first', operation_id: lost.operation_id });
      expect(posts.filter((p) => p.text === 'fourth')).toHaveLength(1);
      const settled = await run('reconcile_operation', { operation_id: lost.operation_id });
      expect(settled).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
      expect(notes.filter((n) => n === 'fourth')).toHaveLength(1);

      // `candor probe mcp` on the same upstream, in its own process with the vault's tokens.
      const probe = await cli(
        [
          'probe',
          'mcp',
          '--config',
          config,
          '--ledger',
          `sqlite:${join(dir, 'probe.db')}`,
          '--tool',
          'add_note',
        ],
        dir,
      );
      expect(probe.stderr + probe.stdout).toContain('duplicates on retry');
      expect(notes.filter((n) => n === 'probe-note')).toHaveLength(2);

      // The refresh token is revoked; once the access token expires, the refresh is refused:
      // escalate, a person must log in again, and nothing reaches the upstream.
      for (const t of refreshTokens) await t.destroy();
      await sleep(TTL * 1000 + 500);
      const postsBefore = posts.length;
      const stopped = await run('notes_add_note', { text: 'fifth' });
      expect(stopped).toMatchObject({
        ok: false,
        category: 'local_failure',
        retry: 'escalate',
        remote_effect: 'none',
        data: { refusal: { code: 'login_required' } },
      });
      expect((stopped.data as { refusal: { detail: string } }).refusal.detail).toContain(
        'candor upstream login notes',
      );
      expect(posts.length).toBe(postsBefore);
      expect(notes).not.toContain('fifth');
    } finally {
      await gw.close();
    }
    const after = await cli(['upstream', 'status', '--config', config], dir);
    expect(after.status).toBe(1);
    expect(after.stdout).toContain('LOGIN REQUIRED');
    expect(after.stdout).toContain('the upstream asked for: notes:admin');

    // No token in any result, ledger byte, log line, span, status output or the vault file.
    await receiver.close();
    const ledgerBytes = ['ledger.db', 'ledger.db-wal', 'probe.db', 'probe.db-wal']
      .map((f) => join(dir, f))
      .filter((f) => existsSync(f))
      .map((f) => readFileSync(f).toString('latin1'))
      .join('');
    const exported = receiver.bodies();
    expect(exported).toContain('notes_add_note');
    const everything = [
      JSON.stringify(envelopes),
      ledgerBytes,
      gw.stderr(),
      exported,
      login.stdout + login.stderr,
      status.stdout,
      after.stdout,
      readFileSync(vaultPath, 'utf8'),
    ].join('\n');
    expect(canaries.size).toBeGreaterThan(3);
    for (const token of canaries) expect(everything.includes(token), `token leaked`).toBe(false);
  }, 120_000);
});
