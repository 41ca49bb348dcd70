// `candor ui --host 0.0.0.0` as a person runs it: the real command (bin/candor.js) bound to every
// interface answers a browser on this machine's own non-loopback address (with the token), still
// refuses a foreign Host name (DNS rebinding), and Ctrl-C (SIGINT) ends it within 1 s while a tab
// holds keep-alive connections and the live event stream open.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/store.js';

const CHROMIUM = '/usr/bin/chromium';
const BIN = fileURLToPath(new URL('../../bin/candor.js', import.meta.url));

/** The first non-loopback IPv4 address of this machine, or null. */
function lanAddress(): string | null {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return null;
}

const lan = lanAddress();

function skipReason(): string | undefined {
  if (!existsSync(CHROMIUM)) {
    if (process.env.CI === 'true')
      throw new Error(`CI=true but ${CHROMIUM} is missing (apt-get install chromium)`);
    return `${CHROMIUM} not found (apt-get install chromium)`;
  }
  // A machine with no non-loopback interface has nothing to test here, CI or not.
  if (lan === null) return 'this machine has no non-loopback IPv4 address';
  return undefined;
}

const skip = skipReason();
if (skip !== undefined) console.warn(`skipping candor ui --host 0.0.0.0 tests: ${skip}`);

/** Status of a GET sent to `address:port` with the given Host header. */
function statusFor(address: string, port: number, host: string, path = '/'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: address, port, path, headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe.skipIf(skip !== undefined)('candor ui --host 0.0.0.0', { timeout: 120_000 }, () => {
  let dir: string;
  let child: ChildProcess;
  let exited: Promise<{ code: number | null; at: number }>;
  let context: BrowserContext | undefined;
  let url: URL;
  let stderr = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'candor-ui-host-'));
    const db = join(dir, 'ledger.db');
    const store = openSqliteLedger(db);
    await store.append([
      {
        kind: 'gate_changed',
        at: Date.now(),
        session_id: null,
        operation_id: null,
        correlation_id: null,
        data: { locked: false, by: 'test' },
      },
    ]);
    await store.close();
    child = spawn(
      process.execPath,
      [BIN, 'ui', '--ledger', `sqlite:${db}`, '--host', '0.0.0.0', '--port', '0'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    exited = new Promise((resolve) =>
      child.once('exit', (code) => resolve({ code, at: performance.now() })),
    );
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    let out = '';
    const printed = await new Promise<string>((resolve, reject) => {
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /open (http:\/\/\S+\/\?token=\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      void exited.then(() => reject(new Error(`candor ui exited early: ${stderr}`)));
    });
    url = new URL(printed);
    expect(url.hostname).toBe('0.0.0.0');
  }, 180_000);

  afterAll(async () => {
    await context?.close();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("answers a browser on this machine's own address, refuses foreign names, and Ctrl-C ends it within 1 s", async () => {
    const port = Number(url.port);
    const token = url.searchParams.get('token')!;
    // The machine's LAN address is one it is bound to; a name it does not know is refused.
    expect(await statusFor(lan!, port, `${lan}:${port}`, `/?token=${token}`)).toBe(303);
    expect(await statusFor(lan!, port, `evil.example:${port}`, `/?token=${token}`)).toBe(403);
    expect(await statusFor(lan!, port, `${lan}:${port + 1}`, `/?token=${token}`)).toBe(403);
    expect(await statusFor(lan!, port, `${lan}:${port}`, '/')).toBe(401);

    context = await chromium.launchPersistentContext(join(dir, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
    const events = new Promise<void>((resolve) =>
      context!.on('request', (r) => {
        if (new URL(r.url()).pathname === '/events') resolve();
      }),
    );
    const page = context.pages()[0] ?? (await context.newPage());
    const res = await page.goto(`http://${lan}:${port}/?token=${token}`);
    expect(res?.status()).toBe(200);
    expect(await page.locator('h1').first().textContent()).toContain('Operations');
    // The tab holds the live stream (and its keep-alive connection) open.
    await events;

    const sent = performance.now();
    child.kill('SIGINT');
    const { code, at } = await exited;
    console.log(`candor ui stopped ${Math.round(at - sent)} ms after SIGINT`);
    expect(code).toBe(0);
    expect(at - sent, `candor ui took ${Math.round(at - sent)} ms to stop`).toBeLessThan(1_000);
    expect(stderr).toContain('reachable beyond this machine');
  });
});
