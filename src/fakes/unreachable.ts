// `before_bytes` faults happen before any request byte can leave the client, so the fake cannot
// inject them on its own socket. It hands out URLs that fail that way instead, all on loopback:
//   refused       a 127.0.0.1 port that was bound and released (nothing listens: ECONNREFUSED),
//                 chosen below the system's ephemeral range where there is one: a port handed
//                 out by the kernel for \`listen(0)\` could be handed out again to another
//                 server while the URL is in use, which would then answer (and apply) a request
//                 meant to be refused.
//   unresolvable  a host under `.invalid` (RFC 6761). Resolving it with the system resolver may
//                 send a DNS query off the machine, so tests pass `lookupRefusingInvalid` as the
//                 client's `lookup`: it fails like NXDOMAIN without any query.
//   blackhole     a 127.0.0.1 listener whose accept queue is full and never drained, so the kernel
//                 drops further SYNs and the client's connect never completes (connect timeout).
//                 The listener lives in a worker thread that blocks its own event loop, because a
//                 Node listener in a running loop accepts eagerly and the queue would never fill.
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { Worker } from 'node:worker_threads';

export async function refusedUrl(): Promise<string> {
  const below = ephemeralFloor();
  if (below !== null && below > 2048) {
    // Ports the kernel never hands out for listen(0): only a server told this exact port could
    // take it. Start somewhere random so that two fakes rarely probe the same ports.
    const span = below - 1024;
    const start = 1024 + Math.floor(Math.random() * span);
    for (let i = 0; i < 64; i++) {
      const port = 1024 + ((start - 1024 + i * 7919) % span);
      if (await bindsAndReleases(port)) return `http://127.0.0.1:${port}`;
    }
  }
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** The lowest port of the kernel's ephemeral range (Linux), or null where it cannot be read. */
function ephemeralFloor(): number | null {
  try {
    const text = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8');
    const low = Number(text.trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 1024 && low <= 65535 ? low : null;
  } catch {
    return null;
  }
}

/** Whether nothing listens on 127.0.0.1:`port` (it could be bound, and is released again). */
function bindsAndReleases(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () =>
      server.close(() => resolve(true)),
    );
  });
}

export function unresolvableUrl(port: number): string {
  return `http://candor-fake.invalid:${port}`;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** A `lookup` for net/undici that fails `.invalid` names locally and delegates the rest. */
export function lookupRefusingInvalid(
  hostname: string,
  options: LookupOptions,
  callback: LookupCallback,
): void {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  if (name === 'invalid' || name.endsWith('.invalid')) {
    const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
    err.code = 'ENOTFOUND';
    err.syscall = 'getaddrinfo';
    process.nextTick(() => callback(err, ''));
    return;
  }
  dnsLookup(hostname, options, callback as never);
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const server = net.createServer();
server.on('error', (e) => parentPort.postMessage({ error: String(e) }));
server.listen({ host: '127.0.0.1', port: 0, backlog: 1 }, () => {
  parentPort.postMessage({ port: server.address().port });
  // Block this thread's loop: the listening socket stays open and nothing is accepted.
  Atomics.wait(new Int32Array(workerData), 0, 0);
  server.close();
});
`;

export interface Blackhole {
  url: string;
  close(): Promise<void>;
}

/**
 * Start a black-holed listener. `probeMs` bounds how long one filler connection may take before
 * the queue counts as full (loopback handshakes take well under a millisecond).
 */
export async function startBlackhole(probeMs = 100): Promise<Blackhole> {
  const flag = new SharedArrayBuffer(4);
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: flag });
  const port = await new Promise<number>((resolve, reject) => {
    worker.once('message', (m: { port?: number; error?: string }) =>
      m.port === undefined
        ? reject(new Error(m.error ?? 'blackhole listener failed'))
        : resolve(m.port),
    );
    worker.once('error', reject);
  });
  const fillers: net.Socket[] = [];
  const release = async (): Promise<void> => {
    for (const s of fillers) s.destroy();
    Atomics.store(new Int32Array(flag), 0, 1);
    Atomics.notify(new Int32Array(flag), 0);
    await worker.terminate();
  };
  // Fill the accept queue: the first connect that does not complete within probeMs proves it full.
  for (let i = 0; i < 16; i++) {
    const s = net.connect({ host: '127.0.0.1', port });
    s.on('error', () => undefined);
    fillers.push(s);
    const connected = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), probeMs);
      s.once('connect', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    if (!connected) {
      s.destroy();
      fillers.pop();
      return { url: `http://127.0.0.1:${port}`, close: release };
    }
  }
  await release();
  throw new Error('blackhole: the accept queue never filled');
}
