// Crash test of the listing projectors (SQLite schema 7, PostgreSQL schema 6): a child appends in a
// loop (its projector running after its commits) and is killed with SIGKILL at seeded random points. After every kill,
// the listing as the crash left it must be the exact projection of the events up to its cursor (a
// batch and its cursor commit together), and once a writer opens the file again, the listing,
// counts, sessions and tags must equal a full re-projection of every event (here: the memory
// store fed the same events).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededRandom } from '../src/core/time.js';
import type { StoredEvent } from '../src/ledger/events.js';
import type { OperationsQuery } from '../src/ledger/listing.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { openPostgresLedger } from '../src/ledger/postgres/store.js';
import { openSqliteLedger } from '../src/ledger/sqlite/store.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { bundleForChildren, killAfterReady, type CompiledTree } from './fixtures/ledger/compile.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from './support/postgres.js';

const TRIALS = Number(process.env['CANDOR_PROJECTION_CRASH_TRIALS'] ?? 30);
const SEED = Number(process.env['CANDOR_CRASH_SEED'] ?? 737373);

let tree: CompiledTree;
const dir = mkdtempSync(join(tmpdir(), 'candor-projection-crash-'));
// One bundled file per killed writer to load, not the ledger's module tree file by file.
const pgSkip = postgresSkipReason();
let server: ThrowawayPostgres | undefined;
beforeAll(async () => {
  tree = await bundleForChildren(['test/fixtures/ledger/writer.ts']);
  if (pgSkip === undefined) server = await startPostgres();
}, 120_000);
afterAll(async () => {
  tree?.remove();
  rmSync(dir, { recursive: true, force: true });
  await server?.stop();
});

/** Runs one writer (the crash mode of test/fixtures/ledger/writer.ts) and kills it. */
async function runAndKill(args: Record<string, unknown>, delayMs: number): Promise<void> {
  await killAfterReady(tree.script('test/fixtures/ledger/writer.js'), args, delayMs);
}

const QUERIES: OperationsQuery[] = [
  { limit: 500 },
  { states: ['open', 'unknown'], limit: 500 },
  { states: ['succeeded', 'failed'], limit: 500 },
  { order: 'opened', limit: 500 },
  { action: 'create_thing', action_class: 'create', limit: 500 },
];

/**
 * What the listing answers, without the trail (the memory store has none); `fresh: false` reads it
 * as it stands.
 */
async function listing(store: LedgerStore, sessions: string[], fresh = true): Promise<unknown> {
  const pages = [];
  for (const q of QUERIES) {
    const { trails: _trails, ...page } = await store.operations({ ...q, fresh });
    pages.push(page);
  }
  const { trails: _t, ...facets } = await store.facets(500, { fresh });
  const bySession = [];
  for (const s of sessions)
    bySession.push((await store.query({ session_id: s })).map((e) => e.seq));
  return { pages, facets, bySession };
}

/** The memory store's listing of `events` (a full re-projection, same seqs). */
async function reprojection(events: readonly StoredEvent[], sessions: string[]): Promise<unknown> {
  const memory = openMemoryLedger();
  const plain = events.map(({ seq: _s, v: _v, prev_hash: _p, hash: _h, ...e }) => e);
  for (let i = 0; i < plain.length; i += 500) await memory.append(plain.slice(i, i + 500));
  try {
    return await listing(memory, sessions);
  } finally {
    await memory.close();
  }
}

/** Where the killed writer writes, and how the test reads what it left. */
interface Backend {
  url: string;
  /** The projection's cursor as the crash left it. */
  cursor(): Promise<number>;
  /** A store that answers as the listing stands (projects nothing). */
  reader(): Promise<LedgerStore>;
  /** A store that writes (and so resumes the projection). */
  writer(): Promise<LedgerStore>;
}

function sqliteBackend(): Backend {
  const path = join(dir, 'projection.db');
  return {
    url: `sqlite:${path}`,
    cursor: () => {
      const raw = new Database(path, { readonly: true });
      try {
        return Promise.resolve(
          raw.prepare('SELECT seq FROM ledger_projection').pluck().get() as number,
        );
      } finally {
        raw.close();
      }
    },
    reader: () => Promise.resolve(openSqliteLedger(path, { readOnly: true })),
    writer: () => Promise.resolve(openSqliteLedger(path)),
  };
}

function postgresBackend(): Backend {
  const url = (): string => {
    if (!server) throw new Error('PostgreSQL server not started');
    return server.url;
  };
  const schema = 'projection_crash';
  return {
    get url() {
      return `${url()}${url().includes('?') ? '&' : '?'}schema=${schema}`;
    },
    cursor: async () => {
      const client = new pg.Client({ connectionString: url() });
      await client.connect();
      try {
        const res = await client.query<{ seq: string }>(
          `SELECT seq FROM ${schema}.ledger_projection`,
        );
        return Number(res.rows[0]!.seq);
      } finally {
        await client.end();
      }
    },
    reader: () => openPostgresLedger(url(), { schema, projects: false }),
    writer: () => openPostgresLedger(url(), { schema }),
  };
}

describe.each([
  ['SQLite', undefined, sqliteBackend],
  ['PostgreSQL', pgSkip, postgresBackend],
] as const)('ledger listing projector crash safety (%s, SIGKILL)', (name, skip, backendOf) => {
  if (skip !== undefined) console.warn(`skipping the ${name} projector crash test: ${skip}`);
  const run = it.skipIf(skip !== undefined);
  run(
    `leaves the listing at a batch boundary and resumes it over ${TRIALS} kills (seed ${SEED})`,
    async () => {
      const rnd = seededRandom(SEED);
      const backend = backendOf();
      const sessions: string[] = [];
      let trailing = 0;
      for (let trial = 0; trial < TRIALS; trial++) {
        const durability = trial % 2 === 0 ? 'process' : 'power';
        // Up to a few projector intervals (20 ms) after the writer is ready.
        const delay = 2 + (rnd.bytes(1)[0]! % 120);
        sessions.push(`ses_t${trial}`);
        await runAndKill(
          {
            url: backend.url,
            durability,
            mode: 'crash',
            seed: SEED + trial,
            tag: `t${trial}`,
            count: 0,
          },
          delay,
        );
        const cursor = await backend.cursor();

        // As the crash left it: a reader projects nothing before answering.
        const reader = await backend.reader();
        try {
          const all = await reader.read();
          expect(cursor, `trial ${trial}: cursor within the events`).toBeLessThanOrEqual(
            all.length,
          );
          const page = await reader.operations({ limit: 1, fresh: false });
          if (cursor < all.length) {
            trailing++;
            expect(page.trails?.events, `trial ${trial}: the trail is reported`).toBe(
              all.length - cursor,
            );
          } else expect(page.trails).toBeUndefined();
          const projected = all.filter((e) => e.seq <= cursor);
          const { bySession: _q, ...stored } = (await listing(reader, [], false)) as Record<
            string,
            unknown
          >;
          const { bySession: _r, ...expected } = (await reprojection(projected, [])) as Record<
            string,
            unknown
          >;
          expect(stored, `trial ${trial} (seed ${SEED}): listing at cursor ${cursor}`).toEqual(
            expected,
          );
        } finally {
          await reader.close();
        }

        // A writer opens the file: the projection resumes from the cursor.
        const store = await backend.writer();
        try {
          const all = await store.read();
          const { trails } = await store.operations({ limit: 1, fresh: false });
          expect(trails, `trial ${trial}: resumed at open`).toBeUndefined();
          expect(await listing(store, sessions), `trial ${trial} (seed ${SEED})`).toEqual(
            await reprojection(all, sessions),
          );
        } finally {
          await store.close();
        }
      }
      // Some kills must have left the listing behind the events, or nothing was resumed.
      expect(trailing).toBeGreaterThan(0);
    },
    300_000,
  );
});
