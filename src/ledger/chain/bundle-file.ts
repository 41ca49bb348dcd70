// Streaming verification of a bundle file. The reading thread reads fixed chunks, splits them into
// lines (`BundleReader`), and queues each chunk's records for hashing; whichever thread is free
// hashes a whole chunk (`hashChunk`: chain, leaf and subtree hashes), and the reading thread takes
// the hashed chunks back in file order to check seqs and prev_hash links and extend the tree
// (`RecordScanner.pushChunk`). Hashing is all but a few hashes per chunk, so the threads can share
// it evenly; with no worker the reading thread hashes every chunk itself, through the same code.
import { hash } from 'node:crypto';
import { open, type FileHandle } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { BundleReader, judge, type VerifyOptions } from './bundle.js';
import { hashChunk, treeOutputBytes } from './chunk-hash.js';
import { HashWorkerError, HashWorkers } from './hash-worker.js';
import { RecordScanner } from './scan.js';
import { VerifyCode, type VerifyReport } from './verify.js';

const NL = 0x0a;
const CHUNK = 1 << 20;
/** No bundle line (header, record, checkpoint) comes near this; reading stops beyond it. */
const MAX_LINE_BYTES = 64 << 20;
/** Below this file size a worker costs more to start (tens of ms of CPU) than it saves. */
const PARALLEL_MIN_BYTES = 8 << 20;
/** Most worker threads `workersByDefault` asks for (the reading thread hashes too). */
const MAX_WORKERS = 3;
/** Chunks queued per worker: one to hash and one ready, so it never waits for a message. */
const DEPTH = 2;
/** Chunks beyond the workers' queues: the one being read and those hashed here awaiting their turn. */
const SPARE = 3;
/** The chunks' tree hashes are carved out of blocks this large (allocating each costs more). */
const TREE_BLOCK = 4 << 20;
/** One spare byte before each chunk's data: the first record's leaf hash borrows it for 0x00. */
const PREFIX = 1;

export interface FileVerifyOptions extends VerifyOptions {
  /** Read size (bytes); lines longer than a chunk grow it, up to 64 MiB. */
  chunkSize?: number;
  /**
   * Worker threads that share the hashing with this thread (0: this thread only). Default:
   * `workersByDefault`. The verdict is the same either way.
   */
  workers?: number;
  /**
   * Whether this thread also hashes chunks when there are workers (default true): the chunks the
   * workers have no room for, and those queued that no worker has started when this thread needs
   * them. `false` leaves every chunk to the workers (tests, measurements).
   */
  readerHashes?: boolean;
}

/**
 * Worker threads `verifyBundleFile` uses for a file of `bytes` when not told: none for small files
 * (a thread costs tens of milliseconds of CPU to start), on one CPU, or when the machine is heavily
 * oversubscribed (1-minute load average at twice the CPUs or more: a worker would find no core);
 * otherwise one per CPU the load average leaves idle, at least one, at most 3 and one less than the
 * CPUs. The reading thread takes back every chunk a worker has not started, so a starved worker
 * does not hold it up, but it still costs its start and more CPU in all (measured in
 * bench/README.md: at load average 8-9 on 2 CPUs one worker lost in wall time).
 */
export function workersByDefault(bytes: number): number {
  const cpus = availableParallelism();
  const load = loadavg()[0]!;
  if (bytes < PARALLEL_MIN_BYTES || cpus < 2 || load >= cpus * 2) return 0;
  return Math.max(1, Math.min(MAX_WORKERS, cpus - 1, Math.floor(cpus - load)));
}

/**
 * Verifies a bundle file by streaming it through fixed chunks: records are hashed as they are read
 * and never kept, so memory stays flat for any bundle size (the tree keeps 64 bytes per record,
 * the chunks in flight at most (workers × 2 + 3) chunk sizes).
 */
export async function verifyBundleFile(
  path: string,
  opts: FileVerifyOptions = {},
): Promise<VerifyReport> {
  const fh = await open(path, 'r');
  try {
    const workers = opts.workers ?? workersByDefault((await fh.stat()).size);
    if (workers > 0) {
      try {
        return await verifyStream(fh, opts, workers);
      } catch (e) {
        // A thread that cannot start or dies is an environment problem, never a verdict: verify
        // again on this thread (unless the caller asked for workers explicitly).
        if (!(e instanceof HashWorkerError) || opts.workers !== undefined) throw e;
      }
    }
    return await verifyStream(fh, opts, 0);
  } catch (e) {
    throw namingFile(e, path);
  } finally {
    await fh.close();
  }
}

/**
 * A failed read names no file (`EIO: i/o error, read`): the error is given the path, as `open`'s
 * errors have it, so the CLI's one-line message says which file could not be read.
 */
function namingFile(e: unknown, path: string): unknown {
  const err = e as NodeJS.ErrnoException;
  if (!(e instanceof Error) || typeof err.code !== 'string' || err.path !== undefined) return e;
  err.path = path;
  err.message = `${err.message} ${JSON.stringify(path)}`;
  return err;
}

/** A chunk of the file and everything its hashing needs; shared memory when there are workers. */
interface Slot {
  data: Buffer;
  /** Record ranges (start, end pairs) in `data`, or in `local`. */
  ranges: Int32Array;
  /** The chunk's chain hashes (reused); `tree` is its leaf and subtree hashes (kept by the tree). */
  chains: Uint8Array;
  tree: Uint8Array;
  /**
   * The chunk's ticket while queued, minus it once a thread has taken it, 0 once hashed: a late
   * message about an earlier chunk in this slot finds another ticket and leaves it alone.
   */
  state: Int32Array;
  ticket: number;
  n: number;
  first: number;
  /** The chunk's records copied out when some were not in `data` as read (base64 lines). */
  local: Buffer | null;
  /** Settles when the worker the chunk was offered to has answered (or stopped). */
  answered: Promise<void> | null;
}

async function verifyStream(
  fh: FileHandle,
  opts: FileVerifyOptions,
  workerCount: number,
): Promise<VerifyReport> {
  const shared = workerCount > 0;
  const bytes = (n: number): Uint8Array =>
    shared ? new Uint8Array(new SharedArrayBuffer(n)) : new Uint8Array(n);
  const buffer = (n: number): Buffer =>
    shared ? Buffer.from(new SharedArrayBuffer(n)) : Buffer.allocUnsafe(n);
  const ints = (n: number): Int32Array =>
    shared ? new Int32Array(new SharedArrayBuffer(4 * n)) : new Int32Array(n);
  let treeBlock = bytes(0);
  let treeUsed = 0;
  /** Room for a chunk's tree hashes, which the tree keeps: carved from shared blocks. */
  const treeBytes = (n: number): Uint8Array => {
    if (treeUsed + n > treeBlock.length) {
      treeBlock = bytes(Math.max(TREE_BLOCK, n));
      treeUsed = 0;
    }
    treeUsed += n;
    return treeBlock.subarray(treeUsed - n, treeUsed);
  };
  const size = Math.max(2, opts.chunkSize ?? CHUNK) + PREFIX;
  const newSlot = (dataBytes: number): Slot => ({
    data: buffer(dataBytes),
    ranges: ints(256),
    chains: bytes(0),
    tree: bytes(0),
    state: ints(1),
    ticket: 0,
    n: 0,
    first: 0,
    local: null,
    answered: null,
  });
  const maxSlots = shared ? workerCount * DEPTH + SPARE : 1;
  let slots = 1;
  const free: Slot[] = [];
  /** Chunks queued or hashed, not yet taken back: file order. */
  const queue: Slot[] = [];
  const scanner = new RecordScanner();
  const workers = shared ? new HashWorkers(workerCount) : null;
  let cur = newSlot(size);
  let records = 0;
  let tickets = 0;
  const readerHashes = opts.readerHashes ?? true;
  /** Records of `cur` that are not in `cur.data` as read, by their index in the chunk. */
  const decoded = new Map<number, Buffer>();

  const addRange = (s: number, e: number): void => {
    if (2 * cur.n + 2 > cur.ranges.length) {
      const bigger = ints(2 * cur.ranges.length);
      bigger.set(cur.ranges);
      cur.ranges = bigger;
    }
    cur.ranges[2 * cur.n] = s;
    cur.ranges[2 * cur.n + 1] = e;
    cur.n++;
  };
  const reader = new BundleReader((b, s, e) => {
    if (b !== cur.data) decoded.set(cur.n, b.subarray(s, e));
    addRange(s, e);
  });

  const hashHere = (slot: Slot): void => {
    const d = slot.local ?? slot.data;
    const view = new Uint8Array(d.buffer, d.byteOffset, d.length);
    hashChunk(hash, view, slot.ranges, slot.n, slot.first, slot.chains, slot.tree);
    Atomics.store(slot.state, 0, 0);
  };
  /** Copies the chunk's records behind spare bytes when some of them were decoded. */
  const gather = (slot: Slot): void => {
    let total = 0;
    for (let i = 0; i < slot.n; i++) {
      total += 1 + (decoded.get(i)?.length ?? slot.ranges[2 * i + 1]! - slot.ranges[2 * i]!);
    }
    const local = Buffer.allocUnsafe(total);
    let at = 0;
    for (let i = 0; i < slot.n; i++) {
      const rec = decoded.get(i) ?? slot.data.subarray(slot.ranges[2 * i], slot.ranges[2 * i + 1]);
      local.set(rec, at + 1);
      slot.ranges[2 * i] = at + 1;
      slot.ranges[2 * i + 1] = at + 1 + rec.length;
      at += 1 + rec.length;
    }
    slot.local = local;
    decoded.clear();
  };
  /** Queues `cur`'s records: offered to a worker, else hashed here. */
  const dispatch = async (): Promise<void> => {
    const slot = cur;
    if (slot.n === 0) return;
    slot.first = records;
    records += slot.n;
    if (slot.chains.length < 32 * slot.n) slot.chains = bytes(40 * slot.n);
    slot.tree = treeBytes(treeOutputBytes(slot.first, slot.n));
    slot.ticket = ++tickets;
    Atomics.store(slot.state, 0, slot.ticket);
    slot.local = null;
    slot.answered = null;
    if (decoded.size > 0) gather(slot);
    if (!slot.local && workers) {
      const task = {
        state: slot.state.buffer as SharedArrayBuffer,
        ticket: slot.ticket,
        data: slot.data.buffer as SharedArrayBuffer,
        ranges: slot.ranges.buffer as SharedArrayBuffer,
        n: slot.n,
        first: slot.first,
        chains: slot.chains.buffer as SharedArrayBuffer,
        tree: slot.tree.buffer as SharedArrayBuffer,
        treeAt: slot.tree.byteOffset,
        treeBytes: slot.tree.length,
      };
      slot.answered = workers.offer(task, DEPTH);
      // Without the reading thread's help, wait for a worker to have room.
      while (!slot.answered && !readerHashes) {
        if (workers.failure) throw workers.failure;
        await workers.answer();
        slot.answered = workers.offer(task, DEPTH);
      }
    }
    if (!slot.answered) hashHere(slot);
    queue.push(slot);
  };
  /**
   * Takes the oldest chunk back: hashes it here if no worker has started it (unless told not to
   * help), else waits for it.
   */
  const retire = async (): Promise<void> => {
    const slot = queue.shift()!;
    if (readerHashes && Atomics.compareExchange(slot.state, 0, slot.ticket, -slot.ticket) > 0) {
      hashHere(slot);
    } else if (Atomics.load(slot.state, 0) !== 0) {
      await slot.answered;
      if (Atomics.load(slot.state, 0) !== 0) {
        throw workers?.failure ?? new HashWorkerError('a hashing thread did not finish a chunk');
      }
    }
    take(slot);
  };
  const take = (slot: Slot): void => {
    scanner.pushChunk(slot.local ?? slot.data, slot.ranges, slot.n, slot.chains, slot.tree);
    slot.n = 0;
    slot.local = null;
    free.push(slot);
  };
  /** A free slot for the next chunk (`cur` itself when there is only one). */
  const nextSlot = async (): Promise<Slot> => {
    while (free.length === 0 && slots >= maxSlots) await retire();
    const next = free.pop();
    if (next) return next;
    slots++;
    return newSlot(size);
  };

  try {
    let have = PREFIX;
    let pos = 0;
    for (;;) {
      if (have === cur.data.length) {
        if (have - PREFIX >= MAX_LINE_BYTES) {
          // Bounded memory: a line this long is no record (a single-line file, /dev/zero).
          reader.problem ??= {
            code: VerifyCode.BAD_CHECKPOINT,
            first_bad_seq: null,
            message: `a line longer than ${MAX_LINE_BYTES >> 20} MiB: not a Candor bundle`,
          };
          have = PREFIX;
          break;
        }
        // No complete line yet in this chunk, so no record of it is queued: grow it in place.
        const bigger = buffer(cur.data.length * 2);
        cur.data.copy(bigger, 0, 0, have);
        cur.data = bigger;
      }
      const { bytesRead } = await fh.read(cur.data, have, cur.data.length - have, pos);
      if (bytesRead === 0) break;
      pos += bytesRead;
      const end = have + bytesRead;
      const buf = cur.data;
      let from = PREFIX;
      for (let at = buf.indexOf(NL, from); at >= 0 && at < end; at = buf.indexOf(NL, from)) {
        reader.line(buf, from, at);
        from = at + 1;
      }
      if (from === PREFIX) {
        have = end;
        continue;
      }
      const prev = cur;
      // A chunk without records (header, checkpoints) is free again at once.
      if (prev.n === 0) free.push(prev);
      await dispatch();
      // Take back whatever is already hashed, so the tree and the checks keep pace.
      while (queue.length > 0 && Atomics.load(queue[0]!.state, 0) === 0) {
        take(queue.shift()!);
      }
      const rest = end - from;
      cur = await nextSlot();
      // The unfinished line moves to the front of the next chunk (or of this one: memmove). A
      // chunk grown for a long line shrinks back once the lines are short again.
      const need = rest + PREFIX;
      if (cur.data.length < need || (cur.data.length > size && need < size)) {
        const data = buffer(Math.max(size, need));
        prev.data.copy(data, PREFIX, from, end);
        cur.data = data;
      } else {
        prev.data.copy(cur.data, PREFIX, from, end);
      }
      have = need;
    }
    if (have > PREFIX) reader.line(cur.data, PREFIX, have);
    reader.end(have > PREFIX);
    await dispatch();
    while (queue.length > 0) await retire();
    return judge(
      scanner.finish(),
      { header: reader.header, checkpoints: reader.checkpoints, problem: reader.problem },
      opts,
    );
  } finally {
    await workers?.close();
  }
}
