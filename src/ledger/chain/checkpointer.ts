// Issues signed checkpoints into the ledger itself: a `checkpoint` event carrying the C2SP signed
// note of the Merkle tree over every record before it. The writer keeps the tree incrementally and
// reads only the records appended since its last look (other processes may append too).
import type { Clock } from '../../core/time.js';
import { systemClock } from '../../core/time.js';
import type { StoredEvent } from '../events.js';
import type { LedgerStore } from '../store.js';
import { signCheckpoint } from './checkpoint.js';
import { requestCosignature } from './witness.js';
import { storedBytes } from './export.js';
import { leafHash } from './merkle.js';
import { MerkleLog } from './merkle-log.js';
import type { NoteSigner } from './note.js';

export interface CheckpointerOptions {
  ledger: LedgerStore;
  /** The log's Ed25519 signing key; its name should equal `origin`. */
  signer: NoteSigner;
  origin: string;
  /** Issue a checkpoint once this many records arrived since the last one (default 1000). */
  every?: number;
  clock?: Clock;
  /**
   * A C2SP tlog-witness (`candor witness serve`) that must cosign each checkpoint; its cosignature
   * lines are added to the note before the checkpoint is stored. A witness that does not answer
   * leaves the checkpoint signed by the log alone (`witnessed: false` on the event).
   */
  witness?: { url: string };
}

export interface Checkpointer {
  /** Signs and appends a checkpoint of everything stored so far (null if nothing new). */
  checkpoint(): Promise<StoredEvent | null>;
  /** Checkpoints when `every` records arrived since the last checkpoint. */
  maybe(): Promise<StoredEvent | null>;
}

export function createCheckpointer(options: CheckpointerOptions): Checkpointer {
  const { ledger, signer, origin } = options;
  const every = options.every ?? 1000;
  const clock = options.clock ?? systemClock;
  const log = new MerkleLog();
  let lastSize = 0;
  let witnessedSize = 0;

  /** Cosignature lines from the witness, proving consistency with what it saw last; null on failure. */
  async function cosign(url: string, size: number, note: string): Promise<string | null> {
    try {
      let old = witnessedSize;
      for (let tries = 0; tries < 2; tries++) {
        const proof = old > 0 && old < size ? log.consistencyProof(old, size) : [];
        const r = await requestCosignature(url, old, proof, note);
        if (r.ok) return r.cosignatures;
        // The witness knows a different size (e.g. this writer restarted): prove from there.
        if (r.status === 409 && r.size !== undefined && r.size <= size) {
          old = r.size;
          continue;
        }
        return null;
      }
      return null;
    } catch {
      return null;
    }
  }
  let chain: Promise<unknown> = Promise.resolve();

  async function sync(): Promise<void> {
    for (;;) {
      const page = await ledger.read(log.size + 1, 5000);
      if (page.length === 0) return;
      for (const rec of page) log.push(leafHash(storedBytes(rec)));
    }
  }

  async function issue(): Promise<StoredEvent | null> {
    await sync();
    const size = log.size;
    if (size === 0 || size === lastSize) return null;
    const root = log.root(size);
    const signed = signCheckpoint({ origin, size, root, extensions: [] }, signer);
    if (!signed.ok) throw new Error(`checkpoint: ${signed.failure}`);
    let note = signed.value;
    let witnessed = false;
    if (options.witness) {
      const cosigned = await cosign(options.witness.url, size, note);
      if (cosigned !== null) {
        note += cosigned;
        witnessed = true;
        witnessedSize = size;
      }
    }
    const [stored] = await ledger.append([
      {
        kind: 'checkpoint',
        at: clock.now(),
        session_id: null,
        operation_id: null,
        correlation_id: null,
        data: {
          size,
          root_hash: root.toString('hex'),
          note,
          ...(options.witness ? { witnessed } : {}),
        },
      },
    ]);
    lastSize = size;
    return stored ?? null;
  }

  // Serialised: two checkpoints never race each other for the same tree.
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = chain.then(fn, fn);
    chain = next.catch(() => undefined);
    return next;
  };

  return {
    checkpoint: () => serial(issue),
    maybe: () =>
      serial(async () => {
        await sync();
        return log.size - lastSize >= every ? issue() : null;
      }),
  };
}
