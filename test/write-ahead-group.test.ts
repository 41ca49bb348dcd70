// The write-ahead rule under group commit: concurrent actions share ledger commits (and an
// operation's opening shares the commit of its first attempt_started), yet no request byte
// reaches the destination before its attempt_started is committed. The destination here is a
// real socket server that, on the first byte of each request, reads the ledger file through its
// own SQLite connection — which sees committed transactions only — and later matches the
// request's attempt id against what was committed at that moment.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAction } from '../src/engine/action.js';
import { staticCredentials } from '../src/engine/ports.js';
import type { NewEvent, StoredEvent } from '../src/ledger/events.js';
import { openSqliteLedger } from '../src/ledger/sqlite/store.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { createRuntime } from '../src/runtime.js';

interface Arrival {
  attemptId: string;
  /** The attempt ids whose attempt_started a separate reader saw committed at the first byte. */
  committedAtFirstByte: Set<string>;
}

/** A destination that checks the ledger file at each request's first byte. */
async function destination(
  dbPath: string,
): Promise<{ server: Server; url: string; arrivals: Arrival[]; firstArrival: Promise<void> }> {
  const reader = new Database(dbPath, { readonly: true, fileMustExist: true });
  const committed = reader.prepare(
    "SELECT bytes FROM ledger_events WHERE kind = 'attempt_started'",
  );
  const arrivals: Arrival[] = [];
  let arrived: () => void = () => undefined;
  const firstArrival = new Promise<void>((r) => (arrived = r));
  let n = 0;
  const server = createServer((socket: Socket) => {
    let buffered = Buffer.alloc(0);
    let seen: Set<string> | null = null;
    socket.on('data', (chunk: Buffer) => {
      // Synchronously, before anything else runs in this process: what is committed right now.
      seen ??= new Set(
        (committed.all() as { bytes: Buffer }[]).map(
          (r) =>
            (JSON.parse(r.bytes.toString('utf8')) as { data: { attempt_id: string } }).data
              .attempt_id,
        ),
      );
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffered.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buffered.length < end + 4 + length) return;
      const attemptId = /\r\nx-candor-attempt-id: *(\S+)/i.exec(head)?.[1] ?? '';
      arrivals.push({ attemptId, committedAtFirstByte: seen });
      arrived();
      const body = JSON.stringify({ id: `thg_${++n}`, state: 'created' });
      socket.end(
        `HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
      );
    });
  });
  server.on('close', () => reader.close());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { server, url: `http://127.0.0.1:${port}`, arrivals, firstArrival };
}

/** `l` with another append (the store's methods keep their own `this`). */
function withAppend(
  l: LedgerStore,
  append: (events: readonly NewEvent[]) => Promise<StoredEvent[]>,
): LedgerStore {
  return {
    append,
    read: (from, limit) => l.read(from, limit),
    query: (q) => l.query(q),
    unresolved: () => l.unresolved(),
    operations: (q) => l.operations(q),
    facets: (sessions) => l.facets(sessions),
    close: () => l.close(),
  };
}

const dirs: string[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function runConcurrent(wrap: (l: LedgerStore, firstArrival: Promise<void>) => LedgerStore) {
  const dir = mkdtempSync(join(tmpdir(), 'candor-wal-group-'));
  dirs.push(dir);
  const path = join(dir, 'ledger.db');
  const store = openSqliteLedger(path);
  const dest = await destination(path);
  servers.push(dest.server);
  let inFlight = 0;
  let maxInFlight = 0;
  const counted = withAppend(store, async (events) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    try {
      return await store.append(events);
    } finally {
      inFlight--;
    }
  });
  const ledger = wrap(counted, dest.firstArrival);
  const action = defineAction({
    name: 'create_thing',
    class: 'create',
    subject: 'the thing',
    input: z.object({ name: z.string() }),
    request: (i, ctx) => ({
      method: 'POST',
      path: '/v1/things',
      body: { ...i, client_ref: ctx.correlation_id },
    }),
    response: z.looseObject({ id: z.string(), state: z.string() }),
    remoteRef: (d) => d.id,
    destination: { origin: dest.url, authority_ref: 'vault:t' },
  });
  const runtime = createRuntime({
    ledger,
    credentials: staticCredentials({ 'vault:t': { authorization: 'Bearer wal-group-token' } }),
  });
  const envelopes = await Promise.all(
    Array.from({ length: 16 }, (_, i) => runtime.run(action, { name: `thing-${i}` })),
  );
  await runtime.close();
  const events = await store.read();
  await store.close();
  return { envelopes, arrivals: dest.arrivals, events, maxInFlight };
}

describe('write-ahead under group commit', () => {
  it('no request byte reaches the server before its attempt_started is committed', async () => {
    const { envelopes, arrivals, events, maxInFlight } = await runConcurrent((l) => l);
    // Concurrent appends were there to be grouped.
    expect(maxInFlight).toBeGreaterThan(1);
    expect(envelopes.map((e) => e.category)).toEqual(Array(16).fill('succeeded'));
    expect(arrivals).toHaveLength(16);
    for (const a of arrivals) {
      expect(a.attemptId).toMatch(/^att_/);
      expect(a.committedAtFirstByte.has(a.attemptId)).toBe(true);
    }
    // Each operation: opened and its attempt started in one commit (adjacent records), then
    // finished and resolved together.
    const kinds = (op: string) =>
      events.filter((e) => e.operation_id === op).map((e) => `${e.seq}:${e.kind}`);
    for (const env of envelopes) {
      const k = kinds(env.operation_id!);
      expect(k.map((x) => x.split(':')[1])).toEqual([
        'operation_opened',
        'attempt_started',
        'attempt_finished',
        'operation_resolved',
      ]);
      const seqs = k.map((x) => Number(x.split(':')[0]));
      expect(seqs[1]).toBe(seqs[0]! + 1);
      expect(seqs[3]).toBe(seqs[2]! + 1);
    }
  });

  it('has teeth: a ledger that acknowledges before it commits is caught', async () => {
    // Acknowledges at once and commits only once a request has reached the destination: bytes
    // then leave before the commit (ordered by that event, not by a timer).
    const early = (l: LedgerStore, firstArrival: Promise<void>): LedgerStore =>
      withAppend(l, (events) => {
        const later = firstArrival.then(() => l.append(events));
        void later.catch(() => undefined);
        return Promise.resolve(
          events.map((e) => ({ ...e, seq: 0, v: 1, prev_hash: '', hash: '' })),
        );
      });
    const { arrivals } = await runConcurrent(early);
    expect(arrivals.length).toBeGreaterThan(0);
    expect(arrivals.some((a) => !a.committedAtFirstByte.has(a.attemptId))).toBe(true);
  });
});
