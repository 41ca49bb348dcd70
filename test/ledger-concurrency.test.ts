// Concurrency: 4 processes × 2,000 appends on one SQLite file, and 4 clients × 2,000 appends on one
// PostgreSQL database, all released at once. Expect one linear chain of 8,000 events, nothing
// lost, and each writer's events in the order it appended them.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectLinearChain } from '../src/ledger/contract.case.js';
import { openLedger } from '../src/ledger/open.js';
import { compileForChildren, type CompiledTree } from './fixtures/ledger/compile.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from './support/postgres.js';

const WRITERS = 4;
// 2,000 each in the suite; scripts/test-node.sh --short-campaigns runs fewer on the other Node.js
// versions.
const PER_WRITER = Number(process.env['CANDOR_CONCURRENT_APPENDS'] ?? 2_000);

let tree: CompiledTree;
const dir = mkdtempSync(join(tmpdir(), 'candor-conc-'));
const pgSkip = postgresSkipReason();
let server: ThrowawayPostgres | undefined;

beforeAll(async () => {
  tree = compileForChildren();
  if (pgSkip === undefined) server = await startPostgres();
});
afterAll(async () => {
  await server?.stop();
  tree?.remove();
  rmSync(dir, { recursive: true, force: true });
});

interface WriterResult {
  tag: string;
  acks: { seq: number; hash: string; op: string }[];
}

function startWriter(
  url: string,
  tag: string,
): { child: ChildProcess; ready: Promise<void>; done: Promise<WriterResult> } {
  const args = { url, durability: 'process', mode: 'load', seed: 1, tag, count: PER_WRITER };
  const child = spawn(
    process.execPath,
    [tree.script('test/fixtures/ledger/writer.js'), JSON.stringify(args)],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((r) => (markReady = r));
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString('utf8');
    if (out.startsWith('ready\n')) markReady();
  });
  child.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
  const done = new Promise<WriterResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0 || !out.endsWith('done\n')) {
        reject(new Error(`writer ${tag} failed (code ${code}): ${err}`));
        return;
      }
      const acks = out
        .split('\n')
        .filter((l) => l.startsWith('ack '))
        .map((l) => {
          const [, seq, hash, op] = l.split(' ');
          return { seq: Number(seq), hash: hash!, op: op! };
        });
      resolve({ tag, acks });
    });
  });
  return { child, ready, done };
}

async function hammer(url: string): Promise<void> {
  // Create the schema before the race so every writer starts appending at once.
  const first = await openLedger(url);
  if (!first.ok) throw new Error(first.failure.message);
  await first.value.close();

  const writers = Array.from({ length: WRITERS }, (_, i) => startWriter(url, `w${i}`));
  await Promise.all(writers.map((w) => w.ready));
  for (const w of writers) w.child.stdin!.end('go\n');
  const results = await Promise.all(writers.map((w) => w.done));

  const opened = await openLedger(url, { mustExist: true });
  if (!opened.ok) throw new Error(opened.failure.message);
  const store = opened.value;
  try {
    const all = await store.read();
    expect(all).toHaveLength(WRITERS * PER_WRITER);
    expectLinearChain(all);
    for (const r of results) {
      expect(r.acks).toHaveLength(PER_WRITER);
      let last = 0;
      r.acks.forEach((a, i) => {
        expect(a.op).toBe(`op_${r.tag}_${i}`);
        expect(a.seq).toBeGreaterThan(last);
        expect(all[a.seq - 1]!.hash).toBe(a.hash);
        expect(all[a.seq - 1]!.operation_id).toBe(a.op);
        last = a.seq;
      });
    }
    // Interleaving proves the writers really ran at the same time.
    const owners = all.map((e) => e.session_id);
    const switches = owners.filter((o, i) => i > 0 && o !== owners[i - 1]).length;
    expect(switches).toBeGreaterThan(WRITERS);
    expect(await store.unresolved()).toHaveLength(WRITERS * PER_WRITER);
  } finally {
    await store.close();
  }
}

describe('ledger concurrency', () => {
  it(
    `SQLite: ${WRITERS} processes × ${PER_WRITER} appends on one file form one linear chain`,
    () => hammer(`sqlite:${join(dir, 'conc.db')}`),
    180_000,
  );

  it.skipIf(pgSkip !== undefined)(
    `PostgreSQL: ${WRITERS} clients × ${PER_WRITER} appends form one linear chain`,
    () => hammer(`${server!.url}?schema=concurrency`),
    180_000,
  );
});
