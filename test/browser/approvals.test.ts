// The approvals page in a real browser (Debian's chromium, driven by playwright-core), signed in
// through a real local OpenID provider's own login pages (oidc-provider), in front of the team
// gateway: an agent (client-credentials token) calls a per-call action through the MCP SDK client
// and is held; a person signs in, sees the exact request, approves with a reason; the held call
// proceeds and the fake receives it once. The agent's own principal signing in is refused under the
// four-eyes rule, and a cross-site form POST decides nothing. Outside CI a missing chromium skips
// with a printed reason; under CI=true it fails.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalQueue } from '../../src/approvals/approvers/queue.js';
import { createResourceServer } from '../../src/auth/resource-server.js';
import { parseConfig } from '../../src/config/load.js';
import { startFakeService, type FakeService } from '../../src/fakes/index.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/store.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { serveHttp, type HttpGateway } from '../../src/mcp/http.js';
import { composeGateway } from '../../src/mcp/start.js';
import type { Gateway } from '../../src/mcp/gateway.js';
import { approverSignIn } from '../../src/web/approver-signin.js';
import { startUi, type StartedUi } from '../../src/web/server.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from '../fixtures/mcp/config.js';
import { listenLoginIssuer, type AgentClient, type LoginIssuer } from '../support/oidc-login.js';

const CHROMIUM = '/usr/bin/chromium';

function chromiumSkipReason(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  if (process.env.CI === 'true')
    throw new Error(`CI=true but ${CHROMIUM} is missing (apt-get install chromium)`);
  const reason = `skipping browser tests: ${CHROMIUM} not found (apt-get install chromium)`;
  console.warn(reason);
  return reason;
}

const skip = chromiumSkipReason();

const AGENT: AgentClient = {
  client_id: 'agent-a',
  client_secret: 'secret-a-0123456789abcdef',
  scope: 'mcp:tools',
};
const WEB_CLIENT = 'candor-approvals';

describe.skipIf(skip !== undefined)('approvals page in chromium', { timeout: 180_000 }, () => {
  let dir: string;
  let idp: LoginIssuer;
  let fake: FakeService;
  let ledger: LedgerStore;
  let uiStore: LedgerStore;
  let gateway: Gateway;
  let http: HttpGateway;
  let ui: StartedUi;
  let browser: Browser;
  let attacker: Server;
  let attackerUrl: string;
  let approvalsDir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'candor-approvals-web-'));
    approvalsDir = join(dir, 'approvals');
    idp = await listenLoginIssuer();
    fake = await startFakeService({ seed: 33, tokens: [{ name: 'agent', token: TEST_TOKEN }] });
    const yaml = `${testConfigYaml({ origin: fake.url, ledger: `sqlite:${join(dir, 'ledger.db')}` })}
mcp:
  http:
    auth:
      issuer: ${idp.issuer}
      scopes: [mcp:tools]
approvals:
  approver: console
  classes: { create: per_call }
  wait_ms: 150000
  dir: ${approvalsDir}
  four_eyes: true
  web:
    issuer: ${idp.issuer}
    client_id: ${WEB_CLIENT}
`;
    const loaded = parseConfig(yaml, join(dir, 'candor.yaml'));
    if (!loaded.ok) throw new Error(loaded.failure.message);
    ledger = openSqliteLedger(join(dir, 'ledger.db'));
    uiStore = openSqliteLedger(join(dir, 'ledger.db'));
    gateway = composeGateway({
      loaded: loaded.value,
      ledger,
      env: { [TEST_TOKEN_VAR]: TEST_TOKEN },
    }).gateway;
    const auth = loaded.value.config.mcp!.http!.auth!;
    http = await serveHttp(gateway, 0, {
      log: () => undefined,
      auth: (resource) => createResourceServer({ auth, resource }),
    });
    const approvals = loaded.value.config.approvals!;
    ui = await startUi({
      store: uiStore,
      ledger: 'sqlite:ledger.db',
      approvals: {
        queue: approvalQueue(approvals.dir),
        signIn: approverSignIn({ config: approvals.web! }),
        four_eyes: approvals.four_eyes,
      },
    });
    await idp.start({
      agents: [AGENT],
      resource: http.resource,
      web: { client_id: WEB_CLIENT, redirect_uri: `${ui.url}approvals/callback` },
    });
    // Another site (localhost is not 127.0.0.1's site) with a form that posts a decision.
    attacker = createServer((req, res) => {
      const target = new URL(req.url ?? '/', 'http://x').searchParams.get('target') ?? '';
      res.writeHead(200, { 'content-type': 'text/html' }).end(
        `<!doctype html><form id="f" method="post" action="${target}">
           <input name="decision" value="approve"><input name="reason" value="x">
           <input name="request_fingerprint" value="sha256:x"><input name="csrf" value="guess">
         </form><script>document.getElementById('f').submit()</script>`,
      );
    });
    await new Promise<void>((r) => attacker.listen({ host: '127.0.0.1', port: 0 }, r));
    attackerUrl = `http://localhost:${(attacker.address() as AddressInfo).port}/`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await ui?.close();
    await gateway?.idle();
    await http?.close();
    await new Promise<void>((r) => (attacker ? attacker.close(() => r()) : r()));
    await uiStore?.close();
    await ledger?.close();
    await fake?.close();
    await idp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh browser (its own cookies) that never reaches beyond this machine. */
  async function person(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    await context.route('**/*', (route) => {
      const host = new URL(route.request().url()).hostname;
      return host === '127.0.0.1' || host === 'localhost' ? route.continue() : route.abort();
    });
    return { context, page: await context.newPage() };
  }

  /** The element's text once it is there. */
  async function text(loc: ReturnType<Page['locator']>): Promise<string> {
    await loc.waitFor();
    return ((await loc.textContent()) ?? '').replace(/\s+/g, ' ').trim();
  }

  /** Signs in at the approvals page through the provider's own login and consent pages. */
  async function signIn(page: Page, login: string): Promise<void> {
    await page.goto(`${ui.url}approvals`);
    await page.click('#sign-in');
    await page.waitForURL((u) => u.href.startsWith(idp.issuer));
    await page.fill('input[name="login"]', login);
    await page.fill('input[name="password"]', 'any password');
    await page.click('button[type="submit"]');
    // The provider asks for consent once per client; then it redirects back.
    await page.waitForURL((u) => u.href.startsWith(ui.url) || u.href.includes('/interaction/'));
    if (!page.url().startsWith(ui.url)) {
      await page.click('button[type="submit"]');
      await page.waitForURL((u) => u.href.startsWith(ui.url));
    }
    expect(await text(page.locator('#approver'))).toContain(login);
  }

  it('an approver signs in, sees the exact request, approves; four-eyes and cross-site refused', async () => {
    const token = await idp.token(AGENT, 'mcp:tools');
    const client = new Client({ name: 'agent-a', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(http.url), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    // The agent's call is held by the gate until a person decides.
    const held = client.callTool(
      { name: 'create_record', arguments: { title: 'payroll run 12' } },
      undefined,
      { timeout: 170_000 },
    );
    let settled = false;
    void held.finally(() => (settled = true));
    const queue = approvalQueue(approvalsDir);
    let cards = await queue.pending(Date.now());
    while (cards.length === 0) {
      await new Promise((r) => setTimeout(r, 100));
      cards = await queue.pending(Date.now());
    }
    const card = cards[0]!;
    expect(card.requested_by).toMatchObject({ subject: 'agent-a', issuer: idp.issuer });
    expect(fake.groundTruth().length).toBe(0);

    // 1. The agent's own principal signs in: it sees the card, and its approval is refused.
    const self = await person();
    await signIn(self.page, 'agent-a');
    const section = self.page.locator(`#approval-${card.approval_id}`);
    expect(await text(section.locator('.req-method'))).toBe('POST');
    await self.page.fill(`#reason-${card.approval_id}`, 'looks fine to me');
    await section.locator('button[value="approve"]').click();
    const refusal = self.page.locator('#refusal');
    await refusal.waitFor();
    expect(await refusal.getAttribute('data-code')).toBe('self_approval');
    expect(await text(refusal)).toContain('four-eyes');
    await self.context.close();
    expect(await queue.decisionFor(card.approval_id)).toBeNull();

    // 2. Another person signs in and reads the exact request the engine will send.
    const alice = await person();
    await signIn(alice.page, 'alice');
    const mine = alice.page.locator(`#approval-${card.approval_id}`);
    expect(await text(mine.locator('.req-url'))).toBe(`${fake.url}/v1/records`);
    const body = await text(mine.locator('.req-body'));
    expect(JSON.parse(body)).toEqual({ title: 'payroll run 12', client_ref: card.operation_id });
    const headers = await text(mine.locator('.req-headers'));
    expect(headers).toContain('content-type: application/json');
    expect(headers).toContain(`x-candor-call-id: `);
    expect(headers).toContain('added when sent');
    expect(headers).not.toContain(TEST_TOKEN);
    const asked = await text(mine.locator('.requested-by'));
    expect(asked).toContain('an agent');
    expect(asked).toContain('agent-a');

    // 3. A cross-site form, in alice's signed-in browser, posting an approval: refused.
    const target = `${ui.url}approvals/${card.approval_id}/decide`;
    const answer = alice.page.waitForResponse((r) => r.url() === target);
    await alice.page.goto(`${attackerUrl}?target=${encodeURIComponent(target)}`);
    expect((await answer).status()).toBe(403);
    expect(await queue.decisionFor(card.approval_id)).toBeNull();
    expect((await ledger.read()).filter((e) => e.kind === 'approval_decided')).toEqual([]);
    expect(settled).toBe(false);

    // 4. Alice approves with a reason: the held call proceeds and the fake receives it once.
    await alice.page.goto(`${ui.url}approvals`);
    await alice.page.fill(`#reason-${card.approval_id}`, 'payroll run approved by finance');
    await alice.page.locator(`#approval-${card.approval_id} button[value="approve"]`).click();
    expect(await text(alice.page.locator('#decided'))).toBe('Approved');
    const result = await held;
    expect(result.structuredContent).toMatchObject({ ok: true, category: 'succeeded' });
    await client.close();
    await alice.context.close();
    const received = fake.groundTruth().filter((g) => g.event === 'received');
    expect(received).toHaveLength(1);
    expect(fake.resources.all('records').map((r) => r['title'])).toEqual(['payroll run 12']);

    // 5. The ledger: who asked (an agent, agent-a), who approved (alice at the issuer), why, for
    // which request.
    const events = await ledger.query({ operation_id: card.operation_id });
    const requested = events.find((e) => e.kind === 'approval_requested')!;
    expect(requested.data).toMatchObject({
      requested_by: { kind: 'token', subject: 'agent-a', issuer: idp.issuer },
      requested_via: 'agent',
    });
    const decided = events.filter((e) => e.kind === 'approval_decided');
    expect(decided).toHaveLength(1);
    expect(decided[0]!.data).toMatchObject({
      approval_id: card.approval_id,
      decision: 'approved',
      approver: `oidc:alice@${idp.issuer}`,
      decided_by: { kind: 'oidc', subject: 'alice', issuer: idp.issuer },
      reason: 'payroll run approved by finance',
      request_fingerprint: card.request_fingerprint,
      requested_via: 'agent',
    });
    expect(readdirSync(join(approvalsDir, 'decisions'))).toEqual([`${card.approval_id}.json`]);
  });
});
