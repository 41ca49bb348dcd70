// Issue 12, item 10: no wait on PostgreSQL is unbounded. A server that accepts TCP and never
// answers makes the CLI exit 3 with one line (it used to hang for minutes), and one that answers
// the startup and then goes silent fails the query instead of hanging. Both servers here are real
// sockets on loopback; no PostgreSQL install is needed.
import { spawn } from 'node:child_process';
import { createServer, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { LedgerError } from '../../src/ledger/ledger-error.js';
import { openPostgresLedger, POSTGRES_TIMEOUTS } from '../../src/ledger/postgres/store.js';

const CLI = fileURLToPath(new URL('../../bin/candor.js', import.meta.url));

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

/** A TCP server; `onSocket` decides what (if anything) it ever says. */
async function listen(onSocket: (socket: Socket) => void): Promise<number> {
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
    onSocket(socket);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}

/**
 * Speaks just enough of the PostgreSQL protocol to finish the startup (AuthenticationOk,
 * ReadyForQuery), records the startup parameters, then never answers a query.
 */
function silentAfterStartup(params: Record<string, string>[]): (socket: Socket) => void {
  return (socket) => {
    let buf = Buffer.alloc(0);
    let started = false;
    socket.on('data', (chunk) => {
      if (started) return; // queries are read and never answered
      buf = Buffer.concat([buf, chunk]);
      if (buf.length < 8) return;
      const len = buf.readInt32BE(0);
      if (buf.length < len) return;
      const code = buf.readInt32BE(4);
      if (code === 80877103) {
        // SSLRequest: no TLS here.
        buf = buf.subarray(len);
        socket.write('N');
        return;
      }
      const fields = buf.subarray(8, len).toString('utf8').split('\0');
      const got: Record<string, string> = {};
      for (let i = 0; i + 1 < fields.length && fields[i] !== ''; i += 2) {
        got[fields[i]!] = fields[i + 1]!;
      }
      params.push(got);
      started = true;
      const authOk = Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0]);
      const ready = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);
      socket.write(Buffer.concat([authOk, ready]));
    });
  };
}

function runCli(args: string[]): Promise<{ code: number | null; err: string; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    // A safety net only (the old behaviour hung for minutes): a kill shows up as code null.
    const guard = setTimeout(() => child.kill('SIGKILL'), 25_000);
    child.on('close', (code) => {
      clearTimeout(guard);
      resolve({ code, err, out });
    });
  });
}

describe('PostgreSQL ledger timeouts', () => {
  it.each([
    ['ops list', ['ops', 'list']],
    ['ops show', ['ops', 'show', 'op_01ABC']],
  ])(
    '%s against a server that accepts TCP and never answers: exit 3, one line, no stack',
    async (_name, args) => {
      const port = await listen(() => undefined);
      const r = await runCli([...args, '--ledger', `postgres://candor@127.0.0.1:${port}/candor`]);
      expect(r.code).toBe(3);
      expect(r.out).toBe('');
      const lines = r.err.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^candor ops: cannot open ledger \(OPEN_FAILED\): .*timeout/i);
      expect(r.err).not.toMatch(/\n\s+at |Error:/);
    },
    30_000,
  );

  it('a server that goes silent after the startup fails the open instead of hanging', async () => {
    const params: Record<string, string>[] = [];
    const port = await listen(silentAfterStartup(params));
    const opened = openPostgresLedger(`postgres://candor@127.0.0.1:${port}/candor`, {
      timeouts: { connect_ms: 2_000, query_ms: 300 },
    });
    await expect(opened).rejects.toBeInstanceOf(LedgerError);
    await expect(opened).rejects.toMatchObject({ code: 'OPEN_FAILED' });
    await expect(opened).rejects.toThrow(/timeout/i);
    // The server-side limits travel in the startup message of every connection.
    expect(params.length).toBeGreaterThan(0);
    expect(params[0]).toMatchObject({
      statement_timeout: String(POSTGRES_TIMEOUTS.statement_ms),
      idle_in_transaction_session_timeout: String(POSTGRES_TIMEOUTS.idle_in_transaction_ms),
    });
  });
});
