// Which connection a request gets: counted by the server (real sockets), with the pool's clock
// injected so the window is crossed without waiting.
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpPool, keepAliveMs, type HttpPool } from './pool.js';
import { DEFAULT_TIMEOUTS, sendHttp } from './transport.js';

/** A keep-alive HTTP server that counts connections; `hint` is its Keep-Alive timeout (s) or none. */
async function server(hint: number | null): Promise<{ url: string; connections: () => number }> {
  let count = 0;
  const s = createServer((socket) => {
    count++;
    let buf = '';
    socket.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      while (buf.includes('\r\n\r\n')) {
        buf = buf.slice(buf.indexOf('\r\n\r\n') + 4);
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n${hint === null ? '' : `keep-alive: timeout=${hint}\r\n`}\r\n{}`,
        );
      }
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(s.address() as { port: number }).port}`,
    connections: () => count,
  };
}

const servers: Server[] = [];
const pools: HttpPool[] = [];
afterEach(async () => {
  for (const p of pools.splice(0)) await p.close();
  for (const s of servers.splice(0)) {
    await new Promise<void>((r) => s.close(() => r()));
  }
});

function get(url: string, pool: HttpPool, reuse: boolean) {
  return sendHttp({
    origin: url,
    method: 'POST',
    path: '/x',
    headers: {},
    body: '{}',
    attemptId: 'att_test',
    timeouts: DEFAULT_TIMEOUTS,
    reuseConnection: reuse,
    pool,
  });
}

describe('http pool', () => {
  it('a write without an honoured key reuses a connection only within the window below the keep-alive hint', async () => {
    let t = 0;
    const pool = createHttpPool({ now: () => t });
    pools.push(pool);
    const s = await server(5);
    expect((await get(s.url, pool, false)).status).toBe(200);
    t += 100; // well within min(1 s, 5 s / 4)
    expect((await get(s.url, pool, false)).status).toBe(200);
    expect(s.connections()).toBe(1);
    t += 1_500; // past the window, still within the server's 5 s
    expect((await get(s.url, pool, false)).status).toBe(200);
    expect(s.connections()).toBe(2);
    // A read (or a write under an honoured key) may take the older idle connection.
    t += 1_500;
    expect((await get(s.url, pool, true)).status).toBe(200);
    expect(s.connections()).toBe(2);
  });

  it('a server that announces no keep-alive time gets a fresh connection for such a write', async () => {
    const pool = createHttpPool({ now: () => 0 });
    pools.push(pool);
    const s = await server(null);
    await get(s.url, pool, false);
    await get(s.url, pool, false);
    expect(s.connections()).toBe(2);
    // Nor is such a write's connection left for anyone: the next read opens its own, then keeps it.
    await get(s.url, pool, true);
    expect(s.connections()).toBe(3);
    await get(s.url, pool, true);
    expect(s.connections()).toBe(3);
  });

  it('reads the keep-alive hint', () => {
    expect(keepAliveMs('timeout=5')).toBe(5000);
    expect(keepAliveMs('timeout=5, max=100')).toBe(5000);
    expect(keepAliveMs('max=100')).toBeNull();
    expect(keepAliveMs(undefined)).toBeNull();
    expect(keepAliveMs('timeout=0')).toBeNull();
  });
});
