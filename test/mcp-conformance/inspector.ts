// The MCP Inspector CLI (`@modelcontextprotocol/inspector --cli`, 2.12: both protocol eras through
// `--protocol-era`, schema portability checks through `--strict`), run as its users run it: one
// process per request, `--format json`, under the Node 22 it needs (node22.ts).
//
// The CLI has no per-request timeout, and starting it takes seconds under load, so a deadline on
// the whole process would time its startup. A deadline on one method is kept instead by a loopback
// proxy between the CLI and an HTTP gateway: the timer starts when the request reaches the proxy,
// stops when its answer has been handed back to the CLI, and kills the CLI if it fires first.
import { spawn } from 'node:child_process';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Node22 } from './node22.js';
import type { Target } from './clients.js';

export type InspectorEra = 'legacy' | 'modern';

export interface InspectorRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout as JSON (`{ result }`, `{ error }`, with `schemaFindings` under --strict), or null. */
  json: Record<string, unknown> | null;
  /** Why the CLI was killed (its request missed the deadline), or null. */
  hung: string | null;
}

/** A deadline on the answer to every request of one JSON-RPC method (HTTP targets only). */
export interface Deadline {
  method: string;
  ms: number;
}

/** JSON-RPC methods named by a request body (a message or a batch); none if it is not JSON. */
function methodsOf(body: string): string[] {
  try {
    const parsed = JSON.parse(body) as unknown;
    return (Array.isArray(parsed) ? parsed : [parsed])
      .map((m) => (m as { method?: unknown } | null)?.method)
      .filter((m): m is string => typeof m === 'string');
  } catch {
    return [];
  }
}

interface Proxy {
  url: string;
  close(): Promise<void>;
}

/** Forwards every request to `upstream`, arming `onLate` for each `deadline.method` request. */
async function deadlineProxy(
  upstream: string,
  deadline: Deadline,
  onLate: (why: string) => void,
): Promise<Proxy> {
  const up = new URL(upstream);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let timer: NodeJS.Timeout | undefined;
      if (req.method === 'POST' && methodsOf(body.toString('utf8')).includes(deadline.method)) {
        timer = setTimeout(
          () =>
            onLate(
              `${deadline.method} hung: no answer within ${deadline.ms} ms of the request reaching the gateway; the Inspector was killed`,
            ),
          deadline.ms,
        );
        res.once('finish', () => clearTimeout(timer));
        res.once('close', () => clearTimeout(timer));
      }
      const headers = { ...req.headers, host: up.host };
      const fwd = httpRequest(
        { host: up.hostname, port: up.port, path: req.url, method: req.method, headers },
        (upRes) => {
          res.writeHead(upRes.statusCode ?? 502, upRes.headers);
          upRes.pipe(res);
        },
      );
      fwd.once('error', (e) => {
        if (!res.headersSent) res.writeHead(502);
        res.end(String(e));
      });
      fwd.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}${up.pathname}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Runs `inspector --cli --format json --protocol-era ERA ARGS… TARGET` and collects its output.
 * With a deadline (HTTP targets), the CLI is killed when an answer to that method is late.
 */
export async function inspect(
  n22: Node22,
  target: Target,
  era: InspectorEra,
  args: readonly string[],
  home: string,
  deadline?: Deadline,
): Promise<InspectorRun> {
  if (deadline && target.kind !== 'http')
    throw new Error('inspect: a deadline needs an HTTP target (it is kept by a proxy)');
  let hung: string | null = null;
  let kill = (): void => {};
  const proxy =
    deadline && target.kind === 'http'
      ? await deadlineProxy(target.url, deadline, (why) => {
          hung ??= why;
          kill();
        })
      : null;
  const launcher = join(
    n22.modules,
    '@modelcontextprotocol',
    'inspector',
    'clients',
    'launcher',
    'build',
    'index.js',
  );
  const targetArgs =
    target.kind === 'http'
      ? ['--transport', 'http', '--server-url', proxy?.url ?? target.url]
      : [
          ...Object.entries(target.env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
          '--cwd',
          target.cwd,
          '--',
          target.command,
          ...target.args,
        ];
  const child = spawn(
    n22.node,
    [launcher, '--cli', '--format', 'json', '--protocol-era', era, ...args, ...targetArgs],
    // Its catalog and credential files go to a throwaway HOME.
    { env: { PATH: process.env['PATH'] ?? '', HOME: home, ...n22.env } },
  );
  kill = () => child.kill('SIGKILL');
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const run = await new Promise<Omit<InspectorRun, 'hung'>>((resolve) => {
    child.once('close', (code) => {
      let json: Record<string, unknown> | null = null;
      try {
        json = JSON.parse(stdout) as Record<string, unknown>;
      } catch {
        json = null;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
  await proxy?.close();
  return { ...run, hung };
}
