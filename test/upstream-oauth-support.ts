// Helpers of the OAuth-upstream suites: a person walking oidc-provider's login and consent pages,
// the CLI as a child process, and a local OTLP/HTTP receiver (every span body it was sent).
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { ROOT } from './fixtures/mcp/stdio.js';

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((r) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => r(body));
  });
}

/**
 * A cookie-keeping client that walks the provider's login and consent pages like a person who
 * logs in as `account`; resolves with the loopback redirect's status (200: the tokens were kept).
 */
export async function authorize(url: string, account: string): Promise<number> {
  const jar = new Map<string, string>();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  let next: { url: string; init?: RequestInit } = { url };
  for (let step = 0; step < 20; step++) {
    const res = await fetch(next.url, {
      ...next.init,
      redirect: 'manual',
      headers: { ...(next.init?.headers as Record<string, string>), cookie: cookie() },
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    const location = res.headers.get('location');
    if (location) {
      await res.arrayBuffer();
      const target = new URL(location, next.url);
      if (target.pathname === '/callback') {
        const done = await fetch(target);
        await done.arrayBuffer();
        return done.status;
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
    if (fields.has('login')) fields.set('login', account);
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
export function cli(
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

/** `candor upstream login ...` with the person (logging in as `account`) played by the test. */
export async function loginAs(
  args: string[],
  cwd: string,
  account: string,
): Promise<{ status: number | null; stdout: string; stderr: string; redirect: number | null }> {
  let driven: Promise<number | null> = Promise.resolve(null);
  let started = false;
  const r = await cli(['upstream', 'login', ...args, '--timeout-s', '30'], cwd, (line) => {
    if (line.startsWith('http') && !started) {
      started = true;
      driven = authorize(line, account);
    }
  });
  return { ...r, redirect: await driven };
}

/** A local OTLP/HTTP receiver: every body it was sent. */
export async function otlpReceiver(): Promise<{
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
