// `before_bytes` faults happen before any request byte can leave the client, so the fake cannot
// inject them on its own socket. It hands out URLs that fail that way instead, all on loopback:
//   refused       a 127.0.0.1 port that was bound and released (nothing listens: ECONNREFUSED).
//   unresolvable  a host under `.invalid` (RFC 6761). Resolving it with the system resolver may
//                 send a DNS query off the machine, so tests pass `lookupRefusingInvalid` as the
//                 client's `lookup`: it fails like NXDOMAIN without any query.
//   blackhole     a 127.0.0.1 listener whose accept queue is full and never drained, so the kernel
//                 drops further SYNs and the client's connect never completes (connect timeout).
//                 The listener lives in a worker thread that blocks its own event loop, because a
//                 Node listener in a running loop accepts eagerly and the queue would never fill.
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import net from 'node:net';
import { Worker } from 'node:worker_threads';

export async function refusedUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
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
