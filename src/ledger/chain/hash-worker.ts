// Hashing threads for `verifyBundleFile`. The reading thread reads the bundle into
// SharedArrayBuffer-backed chunks, finds the record lines, and queues each chunk for a thread;
// any thread then runs `hashChunk` (chunk-hash.ts) on it: chain, leaf and subtree hashes, written
// into the chunk's shared output. Nothing is copied between threads. A chunk's state word decides
// who hashes it: it holds the chunk's ticket while queued; the worker and the reading thread both
// try to swap it for minus the ticket (compare-and-swap) and only the winner hashes, then stores
// 0 (done). So the reading thread takes back any chunk a
// worker has not started (a worker still starting up, or one the machine gives no CPU) instead of
// waiting for it, and a chunk is never hashed twice.
//
// The worker's code is a string evaluated by `node:worker_threads` (so it runs the same from
// `dist/` and under the test runner); `hashChunk` is put in as its own source text.
import { Worker } from 'node:worker_threads';
import { hashChunk } from './chunk-hash.js';

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { hash } = require('node:crypto');
const hashChunk = ${hashChunk.toString()};
parentPort.on('message', (m) => {
  const state = new Int32Array(m.state);
  if (Atomics.compareExchange(state, 0, m.ticket, -m.ticket) === m.ticket) {
    hashChunk(hash, new Uint8Array(m.data), new Int32Array(m.ranges), m.n, m.first, new Uint8Array(m.chains), new Uint8Array(m.tree, m.treeAt, m.treeBytes));
    Atomics.store(state, 0, 0);
  }
  parentPort.postMessage(m.id);
});
`;

/** A hashing thread could not start or stopped: an environment problem, never a verdict. */
export class HashWorkerError extends Error {
  override readonly name = 'HashWorkerError';
}

/** One chunk's hashing job; every buffer is shared with the worker it is posted to. */
export interface Task {
  /** One Int32: `ticket` while queued, `-ticket` while being hashed, 0 once hashed. */
  state: SharedArrayBuffer;
  ticket: number;
  data: SharedArrayBuffer;
  ranges: SharedArrayBuffer;
  n: number;
  first: number;
  chains: SharedArrayBuffer;
  /** The chunk's tree hashes go to `tree[treeAt, treeAt + treeBytes)`. */
  tree: SharedArrayBuffer;
  treeAt: number;
  treeBytes: number;
}

interface Member {
  worker: Worker;
  /** Posted tasks the worker has not answered, by id. */
  pending: Map<number, () => void>;
}

/** The main thread's side of a fixed set of hashing threads. */
export class HashWorkers {
  readonly #members: Member[] = [];
  #nextId = 0;
  #failure: HashWorkerError | null = null;
  #waiters: (() => void)[] = [];

  constructor(count: number) {
    for (let i = 0; i < count; i++) {
      let worker: Worker;
      try {
        worker = new Worker(WORKER_SOURCE, { eval: true });
      } catch (e) {
        // The threads already started would keep the process alive: stop them, and report an
        // environment problem (so the caller can verify on its own thread).
        for (const m of this.#members) void m.worker.terminate();
        const why = e instanceof Error ? e.message : String(e);
        throw new HashWorkerError(`a hashing thread could not start: ${why}`, { cause: e });
      }
      const m: Member = { worker, pending: new Map() };
      m.worker.on('message', (id: number) => {
        m.pending.get(id)?.();
        m.pending.delete(id);
        this.#wake();
      });
      m.worker.on('error', (e) => this.#fail(e));
      m.worker.on('exit', (code) => this.#fail(new Error(`it exited with code ${code}`)));
      this.#members.push(m);
    }
  }

  #fail(e: Error): void {
    this.#failure ??= new HashWorkerError(`a hashing thread failed: ${e.message}`, { cause: e });
    for (const m of this.#members) {
      for (const answered of m.pending.values()) answered();
      m.pending.clear();
    }
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters.splice(0);
    for (const w of waiters) w();
  }

  /** Resolves once a worker has answered a task (or one has failed). */
  answer(): Promise<void> {
    if (this.#failure) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Why a thread stopped, once one has: a task it took may never be DONE. */
  get failure(): HashWorkerError | null {
    return this.#failure;
  }

  /**
   * Queues `task` on the worker with the fewest unanswered tasks, if it has fewer than `depth`;
   * returns a promise resolved once that worker has answered (hashed it, or found it taken) or
   * stopped, or null when every worker is that busy or one has failed (then the caller hashes the
   * chunk itself).
   */
  offer(task: Task, depth: number): Promise<void> | null {
    if (this.#failure) return null;
    let best: Member | undefined;
    for (const m of this.#members) if (!best || m.pending.size < best.pending.size) best = m;
    if (!best || best.pending.size >= depth) return null;
    const id = this.#nextId++;
    const member = best;
    const answered = new Promise<void>((resolve) => member.pending.set(id, resolve));
    member.worker.postMessage({ id, ...task });
    return answered;
  }

  async close(): Promise<void> {
    await Promise.all(
      this.#members.map((m) => {
        m.worker.removeAllListeners('exit');
        return m.worker.terminate();
      }),
    );
  }
}
