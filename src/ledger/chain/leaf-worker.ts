// A second thread for `verifyBundleFile`: it computes the RFC 9162 leaf hashes H(0x00 || bytes)
// and the tree's node hashes while the main thread reads the file and does the chain hashes and
// field checks. Nothing is copied between the threads: the main thread reads the bundle into
// SharedArrayBuffer-backed chunks and posts, per chunk, the byte ranges of its records; the worker
// writes the leaf hash's 0x00 into the spare byte before each record (the previous line's newline,
// or the chunk's first byte), which the main thread no longer reads once it has split the chunk.
// At the end the worker transfers the tree's levels (32 bytes per hash) back: `MerkleLog.fromLevels`.
//
// When the worker falls behind, the main thread sends a chunk's leaf hashes instead of its ranges
// and the worker only builds the tree from them (see `flush` in bundle.ts).
//
// The worker's code is a string evaluated by `node:worker_threads` (so it runs the same from
// `dist/` and under the test runner) and needs only node:crypto. Its level building is the
// `MerkleLog.pushLatin1` rule (level h + 1 gains H(0x01 || a || b) of the last two hashes whenever
// level h holds an even number of them); `bundle.test.ts` compares both paths' reports.
import { Worker } from 'node:worker_threads';
import { HASHES_PER_BLOCK, MerkleLog } from './merkle-log.js';

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { hash } = require('node:crypto');
const PER_BLOCK = ${HASHES_PER_BLOCK};
const levels = [];
const lengths = [];
const scratch = Buffer.allocUnsafe(65);
function append(h, s) {
  const blocks = (levels[h] ??= []);
  const i = lengths[h] ?? 0;
  let b = blocks[Math.floor(i / PER_BLOCK)];
  if (!b) blocks.push((b = new Uint8Array(32 * PER_BLOCK)));
  const at = (i % PER_BLOCK) * 32;
  for (let j = 0; j < 32; j++) b[at + j] = s.charCodeAt(j);
  lengths[h] = i + 1;
}
function pushLeaf(leaf) {
  append(0, leaf);
  for (let h = 0; lengths[h] % 2 === 0; h++) {
    const i = lengths[h] - 2;
    const b = levels[h][Math.floor(i / PER_BLOCK)];
    const from = (i % PER_BLOCK) * 32;
    scratch[0] = 1;
    for (let j = 0; j < 64; j++) scratch[1 + j] = b[from + j];
    append(h + 1, hash('sha256', scratch, 'binary'));
  }
}
parentPort.on('message', (m) => {
  if (m.end) {
    const out = levels.map((blocks, h) => ({ blocks, length: lengths[h] }));
    parentPort.postMessage({ levels: out }, levels.flat().map((b) => b.buffer));
    return;
  }
  const r = m.ranges;
  if (r === null) {
    for (const leaf of m.leaves) pushLeaf(leaf);
    parentPort.postMessage({ done: m.id });
    return;
  }
  const data = Buffer.from(m.data);
  let li = 0;
  for (let i = 0; i < r.length; i += 2) {
    const s = r[i];
    if (s < 0) {
      pushLeaf(m.leaves[li++]);
      continue;
    }
    data[s - 1] = 0;
    pushLeaf(hash('sha256', data.subarray(s - 1, r[i + 1]), 'binary'));
  }
  parentPort.postMessage({ done: m.id });
});
`;

/** The hashing thread could not start or stopped: an environment problem, never a verdict. */
export class LeafWorkerError extends Error {
  override readonly name = 'LeafWorkerError';
}

interface Levels {
  levels: { blocks: Uint8Array[]; length: number }[];
}

/**
 * The main thread's side. `post` hands over one chunk's record ranges and resolves once the
 * worker is done with that chunk (its memory may then be reused); `finish` returns the tree.
 */
export class LeafWorker {
  readonly #worker: Worker;
  readonly #pending = new Map<number, () => void>();
  #nextId = 0;
  #failure: LeafWorkerError | null = null;
  #onLevels: ((l: Levels) => void) | null = null;
  #onFailure: ((e: LeafWorkerError) => void) | null = null;

  constructor() {
    this.#worker = new Worker(WORKER_SOURCE, { eval: true });
    this.#worker.on('message', (m: { done?: number } & Partial<Levels>) => {
      if (m.done !== undefined) {
        this.#pending.get(m.done)?.();
        this.#pending.delete(m.done);
      } else if (m.levels) {
        this.#onLevels?.({ levels: m.levels });
      }
    });
    const fail = (e: Error): void => {
      this.#failure ??= new LeafWorkerError(`the hashing thread failed: ${e.message}`, {
        cause: e,
      });
      for (const resolve of this.#pending.values()) resolve();
      this.#pending.clear();
      this.#onFailure?.(this.#failure);
    };
    this.#worker.on('error', fail);
    this.#worker.on('exit', (code) => fail(new Error(`it exited with code ${code}`)));
  }

  /** Chunks posted that the worker has not finished. */
  get backlog(): number {
    return this.#pending.size;
  }

  /**
   * Hashes the records at `ranges` (pairs start, end) of `data`; a pair whose start is -1 takes
   * the next precomputed leaf hash from `leaves` (32 latin1 characters: records the main thread
   * had to decode or copy). Byte `start - 1` of each range is overwritten. With `ranges` null,
   * every leaf of the chunk is in `leaves` and only the tree is left to the worker.
   */
  post(data: SharedArrayBuffer, ranges: Int32Array | null, leaves: string[]): Promise<void> {
    if (this.#failure) return Promise.resolve();
    const id = this.#nextId++;
    const done = new Promise<void>((resolve) => this.#pending.set(id, resolve));
    this.#worker.postMessage({ id, data, ranges, leaves });
    return done;
  }

  /** The tree over every leaf posted so far; stops the worker. */
  async finish(): Promise<MerkleLog> {
    try {
      const got = await new Promise<Levels>((resolve, reject) => {
        if (this.#failure) return reject(this.#failure);
        this.#onLevels = resolve;
        this.#onFailure = reject;
        this.#worker.postMessage({ end: true });
      });
      return MerkleLog.fromLevels(got.levels);
    } finally {
      await this.close();
    }
  }

  async close(): Promise<void> {
    this.#worker.removeAllListeners('exit');
    await this.#worker.terminate();
  }
}
