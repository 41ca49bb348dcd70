// Adversarial checks of the streaming verifier: a seeded differential test against the in-memory
// path and an independent root computation (merkle.ts), on every hashing path, and hashing threads
// that die mid-run (through a wrapped `Worker` that exits on a chosen chunk ticket).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import type * as Os from 'node:os';
import type * as WorkerThreads from 'node:worker_threads';
import { GENESIS_HASH, type NewEvent } from '../events.js';
import { sealRecord } from '../record.js';
import { checkpointFor, encodeBundle, parseBundle, verifyBundle } from './bundle.js';
import { verifyBundleFile } from './bundle-file.js';
import { HashWorkerError } from './hash-worker.js';
import { leafHash, rootOf } from './merkle.js';
import { SigType, generateKey, parseSignerKey } from './note.js';

/** Which chunk ticket makes a hashing thread exit, and whether before or after claiming it. */
const hooks = vi.hoisted(() => ({
  dieAt: 0,
  claimFirst: false,
  cpus: 0,
  /** The nth worker construction (1-based) throws; every worker made is kept here. */
  failStart: 0,
  made: [] as { threadId: number }[],
}));

vi.mock('node:worker_threads', async (importOriginal) => {
  const real = await importOriginal<typeof WorkerThreads>();
  class Worker extends real.Worker {
    constructor(source: string, options: WorkerThreads.WorkerOptions) {
      let src = source;
      if (hooks.dieAt > 0) {
        const die = `if (m.ticket === ${hooks.dieAt}) process.exit(7);`;
        src = hooks.claimFirst
          ? src.replace('hashChunk(hash, new', `${die} hashChunk(hash, new`)
          : src.replace("parentPort.on('message', (m) => {", `$& ${die}`);
        if (src === source) throw new Error('the worker source changed: update the test hook');
      }
      if (hooks.failStart > 0 && hooks.made.length + 1 === hooks.failStart) {
        throw new Error('no room for another thread');
      }
      super(src, options);
      hooks.made.push(this);
    }
  }
  return { ...real, Worker };
});

vi.mock('node:os', async (importOriginal) => {
  const real = await importOriginal<typeof Os>();
  return {
    ...real,
    availableParallelism: () => hooks.cpus || real.availableParallelism(),
    loadavg: () => (hooks.cpus ? [0, 0, 0] : real.loadavg()),
  };
});

const signer = (() => {
  const k = generateKey('candor.test/log', SigType.ed25519, Buffer.alloc(32, 1));
  const s = parseSignerKey(k.signerKey);
  if (!s.ok) throw new Error(s.failure);
  return { key: k, signer: s.value };
})();

const dir = mkdtempSync(join(tmpdir(), 'candor-bundle-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => {
  hooks.dieAt = 0;
  hooks.claimFirst = false;
  hooks.cpus = 0;
  hooks.failStart = 0;
  hooks.made = [];
});

/** A small seeded generator (replayable from the printed seed). */
function random(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return Math.floor((s / 2 ** 32) * n);
  };
}

function records(n: number, pick: (n: number) => number): Buffer[] {
  const out: Buffer[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    // Mostly short records, some longer than the small chunk sizes below.
    const pad = 'x'.repeat(pick(5) === 0 ? pick(2000) : pick(40));
    const e: NewEvent = {
      kind: 'attempt_finished',
      at: 1_767_225_600_000 + seq,
      session_id: null,
      operation_id: `op_${seq}`,
      correlation_id: `c-${seq}${pad}`,
      data: {
        attempt_id: `att_${seq}`,
        dispatch_state: 'sent_no_response',
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
        rule: 'read_timeout_after_send',
        phases: { started_at: seq },
        response: null,
        duration_ms: seq,
        diagnostics_ref: `d "é" \\ ${seq}`,
        diagnostics: null,
      },
    };
    const { record, bytes } = sealRecord(e, seq, prev);
    prev = record.hash;
    out.push(bytes);
  }
  return out;
}

/** One random damage (or none), by line where it is about lines; named for the failure message. */
function damage(buf: Buffer, pick: (n: number) => number): [Buffer, string] {
  const lines = buf.toString('latin1').split('\n');
  const li = 1 + pick(Math.max(1, lines.length - 2));
  const join_ = (sep = '\n'): Buffer => Buffer.from(lines.join(sep), 'latin1');
  switch (pick(11)) {
    case 0: {
      const b = Buffer.from(buf);
      if (b.length > 0) b[pick(b.length)]! ^= 1 + pick(255);
      return [b, 'flip a byte'];
    }
    case 1:
      lines.splice(li, 1);
      return [join_(), `drop line ${li + 1}`];
    case 2: {
      const j = 1 + pick(lines.length - 1);
      [lines[li], lines[j]] = [lines[j]!, lines[li]!];
      return [join_(), `swap lines ${li + 1} and ${j + 1}`];
    }
    case 3:
      lines.splice(li, 0, lines[li]!);
      return [join_(), `duplicate line ${li + 1}`];
    case 4: {
      const at = buf.indexOf('"prev_hash":"', pick(buf.length));
      const b = Buffer.from(buf);
      if (at >= 0) b[at + 13 + pick(64)] = 0x30 + pick(10);
      return [b, `alter a prev_hash at ${at}`];
    }
    case 5: {
      const at = pick(buf.length + 1);
      return [buf.subarray(0, at), `truncate at ${at}`];
    }
    case 6:
      return [join_('\r\n'), 'CRLF line ends'];
    case 7:
      lines.splice(li, 0, '');
      return [join_(), `empty line before line ${li + 1}`];
    case 8: {
      const b = Buffer.from(buf);
      const at = pick(b.length);
      b[at] = [0x00, 0xff, 0xc3, 0x0a][pick(4)]!;
      return [b, `NUL, invalid UTF-8 or newline at ${at}`];
    }
    case 9: {
      const c = lines.findIndex((l) => l.startsWith('{"checkpoint"'));
      if (c >= 0) lines[c] = lines[c]!.replace(/\\n(\d+)\\n/, (_m, d: string) => `\\n${+d + 1}\\n`);
      return [join_(), 'checkpoint size changed'];
    }
    default:
      lines[0] = lines[0]!.replace('"witness_keys":[]', '"witness_keys":[1]');
      return [join_(), 'header changed'];
  }
}

const PATHS = [
  { workers: 0 },
  { workers: 1, readerHashes: false },
  { workers: 1 },
  { workers: 2, readerHashes: false },
  { workers: 3 },
  { workers: 3, readerHashes: false },
] as const;
/** Tree shapes: sizes around powers of two. */
const SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65];
const CHUNKS = [2, 7, 61, 300, 1000, 4096, 1 << 20];

describe('streaming verification, differential', () => {
  it('random valid and damaged bundles: same verdict as in memory on every path, roots independent', async () => {
    const seed = 20_261_201;
    const pick = random(seed);
    const runs = 48;
    const codes = new Set<string>();
    for (let run = 0; run < runs; run++) {
      const recs = records(SIZES[pick(SIZES.length)]!, pick);
      const checkpoints = Array.from({ length: pick(3) }, () =>
        checkpointFor(recs.slice(0, pick(recs.length + 1)), signer.signer),
      );
      let data = encodeBundle({
        origin: signer.signer.name,
        logKey: signer.key.verifierKey,
        records: recs,
        checkpoints,
      });
      const what: string[] = [];
      for (let d = run % 3; d > 0; d--) {
        const [next, name] = damage(data, pick);
        data = next;
        what.push(name);
      }
      const opts = pick(2) === 0 ? { logKeys: [signer.key.verifierKey] } : {};
      const path = join(dir, `diff-${run}.jsonl`);
      writeFileSync(path, data);
      const parsed = parseBundle(data);
      const mem = verifyBundle(parsed, opts);
      codes.add(mem.code);
      // Independent of the chunked hashing: the root by the reference tree (merkle.ts).
      const label = `seed ${seed} run ${run} (${what.join(', ') || 'intact'}, ${recs.length} records)`;
      expect(mem.root, label).toBe(
        rootOf(parsed.records.slice(0, mem.size).map(leafHash)).toString('hex'),
      );
      const chunkSize = CHUNKS[pick(CHUNKS.length)]!;
      for (const p of [PATHS[0], PATHS[1 + (run % (PATHS.length - 1))]!]) {
        const r = await verifyBundleFile(path, { ...opts, chunkSize, ...p });
        expect(r, `${label} @${chunkSize} ${JSON.stringify(p)}`).toEqual(mem);
      }
    }
    // The damage reaches the record codes and the framing codes, not only INTACT.
    expect([...codes]).toEqual(expect.arrayContaining(['INTACT', 'MODIFIED', 'BAD_CHECKPOINT']));
    expect(codes.size).toBeGreaterThanOrEqual(5);
    // Each run starts hashing threads (tens of ms of CPU each, far more on a loaded machine).
  }, 120_000);

  it('every chunk size from 2 bytes to past the longest line: records straddle every way', async () => {
    const pick = random(3);
    const recs = records(6, pick);
    const data = encodeBundle({
      origin: signer.signer.name,
      logKey: signer.key.verifierKey,
      records: recs,
      checkpoints: [checkpointFor(recs.slice(0, 5), signer.signer)],
    });
    const lines = data.toString('latin1').split('\n');
    const longest = Math.max(...lines.map((l) => l.length));
    // Damaged copies: a record edited, and the final newline gone.
    const edited = Buffer.from(data.toString('latin1').replace('"op_3"', '"op_X"'), 'latin1');
    const unterminated = data.subarray(0, data.length - 1);
    for (const [name, bytes] of [
      ['intact', data],
      ['edited', edited],
      ['unterminated', unterminated],
    ] as const) {
      const path = join(dir, `straddle-${name}.jsonl`);
      writeFileSync(path, bytes);
      const mem = verifyBundle(parseBundle(bytes));
      expect(mem.code, name).toBe(
        { intact: 'INTACT', edited: 'MODIFIED', unterminated: 'BAD_CHECKPOINT' }[name],
      );
      // Every small size, and each line's length give or take two (a line that just fits, just
      // misses its newline, or leaves one byte of the next line).
      const around = lines.flatMap((l) => [l.length - 1, l.length, l.length + 1, l.length + 2]);
      const sizes = [...new Set([...Array.from({ length: 79 }, (_, i) => i + 2), ...around])];
      for (const chunkSize of sizes.filter((c) => c >= 2)) {
        const r = await verifyBundleFile(path, { chunkSize, workers: 0 });
        expect(r, `${name} @${chunkSize}`).toEqual(mem);
      }
      // Through a worker too, at sizes around the longest line.
      for (const chunkSize of [2, 3, longest - 1, longest, longest + 1, longest + 2]) {
        const r = await verifyBundleFile(path, { chunkSize, workers: 1, readerHashes: false });
        expect(r, `${name} @${chunkSize} on a worker`).toEqual(mem);
      }
    }
  }, 120_000);
});

describe('a hashing thread that dies mid-run', () => {
  const pick = random(7);
  const recs = records(200, pick);
  const data = encodeBundle({ origin: null, logKey: null, records: recs });
  const path = join(dir, 'die.jsonl');
  writeFileSync(path, data);
  const mem = verifyBundle(parseBundle(data));

  it('before claiming its chunk: the reading thread hashes what it left, same verdict', async () => {
    hooks.dieAt = 5;
    expect(mem).toMatchObject({ code: 'INTACT', size: 200 });
    for (const workers of [1, 3]) {
      expect(await verifyBundleFile(path, { chunkSize: 500, workers })).toEqual(mem);
    }
  });

  it('when the reading thread may not help: an environment error, never a verdict', async () => {
    hooks.dieAt = 5;
    const r = verifyBundleFile(path, { chunkSize: 500, workers: 1, readerHashes: false });
    await expect(r).rejects.toBeInstanceOf(HashWorkerError);
    await expect(r).rejects.toThrow(/exited with code 7/);
  });

  it('after claiming its chunk: an error when workers were asked for, else verified on one thread', async () => {
    hooks.dieAt = 5;
    hooks.claimFirst = true;
    // Every chunk left to the workers, so the thread does claim ticket 5 before it exits.
    const r = verifyBundleFile(path, { chunkSize: 500, workers: 2, readerHashes: false });
    await expect(r).rejects.toBeInstanceOf(HashWorkerError);
    await expect(r).rejects.toThrow(/exited with code 7/);
    // Workers by default (a large file, idle CPUs): when the reading thread has not taken ticket 5
    // back first, the thread dies holding it and the file is verified again on this thread alone;
    // either way the verdict is the in-memory one.
    hooks.cpus = 4;
    const big = Buffer.concat([data, Buffer.alloc(9 << 20, 0x20), Buffer.from('\n')]);
    const bigPath = join(dir, 'die-big.jsonl');
    writeFileSync(bigPath, big);
    expect(await verifyBundleFile(bigPath, { chunkSize: 500 })).toEqual(
      verifyBundle(parseBundle(big)),
    );
  });
});

describe('a hashing thread that cannot start', () => {
  it('stops the threads already started and reports an environment error; by default, one thread', async () => {
    const pick = random(9);
    const data = encodeBundle({ origin: null, logKey: null, records: records(30, pick) });
    const path = join(dir, 'no-start.jsonl');
    writeFileSync(path, data);
    hooks.failStart = 2;
    const r = verifyBundleFile(path, { chunkSize: 500, workers: 3 });
    await expect(r).rejects.toBeInstanceOf(HashWorkerError);
    await expect(r).rejects.toThrow(/could not start: no room for another thread/);
    expect(hooks.made).toHaveLength(1);
    // A thread left running would keep the CLI process alive after its verdict.
    await vi.waitFor(() => expect(hooks.made[0]!.threadId).toBe(-1));
    // Workers by default (a large file, idle CPUs): verified on this thread alone.
    hooks.made = [];
    hooks.cpus = 4;
    const big = Buffer.concat([data, Buffer.alloc(9 << 20, 0x20), Buffer.from('\n')]);
    const bigPath = join(dir, 'no-start-big.jsonl');
    writeFileSync(bigPath, big);
    expect(await verifyBundleFile(bigPath)).toEqual(verifyBundle(parseBundle(big)));
    expect(hooks.made).toHaveLength(1);
  });
});

describe('a file that cannot be read', () => {
  it.skipIf(process.platform !== 'linux')(
    'a read error names the file (open succeeds, read fails: /proc/self/mem is EIO)',
    async () => {
      for (const workers of [0, 2]) {
        const r = verifyBundleFile('/proc/self/mem', { workers });
        await expect(r).rejects.toMatchObject({ code: 'EIO', path: '/proc/self/mem' });
        await expect(r).rejects.toThrow('"/proc/self/mem"');
      }
    },
  );
});
