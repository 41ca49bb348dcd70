// Issues signed checkpoints into the ledger itself: a `checkpoint` event carrying the C2SP signed
// note of the Merkle tree over every record before it. The writer keeps the tree incrementally and
// reads only the records appended since its last look (other processes may append too).
//
// A witness is trusted only through the key it was configured with: what it returns is checked
// (`checkCosignatures`) before a byte of it enters the hash chain. A witness that does not answer,
// or answers with anything but a valid cosignature over this exact checkpoint, leaves the
// checkpoint signed by the log alone, with the reason on the event (`witness_problem`).
import type { Clock } from '../../core/time.js';
import { systemClock } from '../../core/time.js';
import type { StoredEvent } from '../events.js';
import type { LedgerStore } from '../store.js';
import { signCheckpoint } from './checkpoint.js';
import { capLine, quote } from '../../core/quote.js';
import { checkCosignatures, requestCosignature } from './witness.js';
import { storedBytes } from './export.js';
import { leafHash } from './merkle.js';
import { MerkleLog } from './merkle-log.js';
import type { NoteSigner, NoteVerifier } from './note.js';

export interface WitnessOptions {
  /** A C2SP tlog-witness (`candor witness serve`) base URL. */
  url: string;
  /** The witness's verifier key (type 0x04): only its valid cosignatures are stored. */
  key: NoteVerifier;
  /**
   * Before a sensitive action, the checkpoint must be cosigned: the witness is asked again until
   * `waitMs` has passed, and otherwise the action is held (see `beforeSensitive`).
   */
  required?: boolean;
  /** How long a sensitive action waits for a cosignature when `required` (default 10 s). */
  waitMs?: number;
  /** Per-request limit (default 5 s, never beyond what is left of `waitMs`). */
  requestTimeoutMs?: number;
  /** How far a cosignature's timestamp may be from now (default 600 s). */
  maxSkewSeconds?: number;
  /** Largest witness answer read (default 64 KiB); a larger one is cut off, not buffered. */
  maxAnswerBytes?: number;
}

export interface CheckpointerOptions {
  ledger: LedgerStore;
  /** The log's Ed25519 signing key; its name should equal `origin`. */
  signer: NoteSigner;
  origin: string;
  /** Issue a checkpoint once this many records arrived since the last one (default 1000). */
  every?: number;
  clock?: Clock;
  /** Waits between requests to a witness that did not cosign (injected for tests). */
  sleep?: (ms: number) => Promise<void>;
  /** Where a witness that answered badly or not at all is reported (one line each). */
  log?: (line: string) => void;
  /** A witness that must cosign each checkpoint; see `WitnessOptions`. */
  witness?: WitnessOptions;
  /** Every checkpoint event stored (e.g. for a span event when the witness reports a fork). */
  onCheckpoint?: (event: StoredEvent) => void;
}

/** Whether the checkpoint before a sensitive action was witnessed as the configuration requires. */
export type SensitiveCheck =
  | { held: false }
  | {
      held: true;
      witness: string;
      url: string;
      problem: string;
      /** Set when the witness has cosigned a larger tree of this log (see `WitnessProblemCode`). */
      problem_code?: WitnessProblemCode;
      waited_ms: number;
    };

export interface Checkpointer {
  /** Signs and appends a checkpoint of everything stored so far (null if nothing new). */
  checkpoint(): Promise<StoredEvent | null>;
  /** Checkpoints when `every` records arrived since the last checkpoint. */
  maybe(): Promise<StoredEvent | null>;
  /**
   * `maybe()` in the background: what a call does after its answer is settled, so that a slow or
   * hostile witness never holds the call (a failure goes to `log`, one line).
   */
  maybeLater(): void;
  /** Resolves once every background checkpoint started so far has finished (before closing). */
  idle(): Promise<void>;
  /**
   * The checkpoint before a sensitive action. When the witness is `required` and has not cosigned
   * within `waitMs`, the answer is `held` and the action must not be dispatched.
   */
  beforeSensitive(): Promise<SensitiveCheck>;
}

/**
 * Why a witness did not cosign, as a stable code (stored as `witness_problem_code`):
 * - `fork`: the witness has cosigned a tree of this log at least as large with a different history
 *   (a larger size than this checkpoint, or the same size and another root) — a possible fork or
 *   rollback of the log; asking again cannot help, so `witness_required` stops at once;
 * - `too_large`: its answer passed `maxAnswerBytes`; `timeout`: no complete answer in time;
 * - `unreachable`: no connection; `refused`: any other non-200; `bad_answer`: 200 but no valid line.
 */
export type WitnessProblemCode =
  'fork' | 'too_large' | 'timeout' | 'unreachable' | 'refused' | 'bad_answer';

type Cosigned =
  | { ok: true; lines: string }
  | { ok: false; code: WitnessProblemCode; problem: string; witness_size?: number };

export function createCheckpointer(options: CheckpointerOptions): Checkpointer {
  const { ledger, signer, origin, witness } = options;
  const every = options.every ?? 1000;
  const clock = options.clock ?? systemClock;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const log = new MerkleLog();
  let lastSize = 0;
  let witnessedSize = 0;

  /** One round with the witness: cosignature lines proving consistency with what it saw last. */
  async function cosignOnce(
    w: WitnessOptions,
    size: number,
    note: string,
    timeoutMs: number,
  ): Promise<Cosigned> {
    const text = note.slice(0, note.lastIndexOf('\n\n') + 1);
    try {
      let old = witnessedSize;
      let sizeFromWitness = false;
      for (let tries = 0; tries < 2; tries++) {
        const proof = old > 0 && old < size ? log.consistencyProof(old, size) : [];
        const r = await requestCosignature(
          w.url,
          old,
          proof,
          note,
          AbortSignal.timeout(timeoutMs),
          w.maxAnswerBytes,
        );
        if (!r.ok) {
          if (r.code === 'too_large') {
            return {
              ok: false,
              code: 'too_large',
              problem: `witness answered badly: ${r.message}`,
            };
          }
          // The witness knows a different size (e.g. this writer restarted): prove from there.
          if (r.status === 409 && r.size !== undefined && r.size <= size) {
            old = r.size;
            sizeFromWitness = true;
            continue;
          }
          if (r.status === 409 && r.size !== undefined) {
            return {
              ok: false,
              code: 'fork',
              witness_size: r.size,
              problem: `possible fork or rollback: the witness has cosigned a tree of size ${r.size} of this log, larger than this checkpoint's size ${size}`,
            };
          }
          // A 409 without a size to a request at the witness's own size: same size, other root.
          if (r.status === 409 && old === size) {
            return {
              ok: false,
              code: 'fork',
              witness_size: size,
              problem: `possible fork or rollback: the witness has cosigned a tree of size ${size} of this log with a different root than this checkpoint's size ${size}`,
            };
          }
          // Proved from the witness's own size and still refused: its tree at that size differs.
          if (r.status === 422 && sizeFromWitness) {
            return {
              ok: false,
              code: 'fork',
              witness_size: old,
              problem: `possible fork or rollback: the witness has cosigned a tree of size ${old} of this log that this checkpoint's size ${size} does not extend`,
            };
          }
          return {
            ok: false,
            code: 'refused',
            problem: `witness refused (${r.status}): ${quote(r.message, 120)}`,
          };
        }
        const checked = checkCosignatures(
          r.cosignatures,
          text,
          w.key,
          clock.now(),
          w.maxSkewSeconds,
        );
        if (checked.problems.length > 0) {
          options.log?.(
            capLine(
              `checkpoint ${size}: witness ${w.url} answered badly: ${checked.problems.join('; ')}`,
              400,
            ),
          );
        }
        if (checked.lines === '') {
          return {
            ok: false,
            code: 'bad_answer',
            problem: capLine(`witness answered badly: ${checked.problems.join('; ')}`),
          };
        }
        return { ok: true, lines: checked.lines };
      }
      return {
        ok: false,
        code: 'refused',
        problem: 'witness kept reporting a different tree size',
      };
    } catch (err) {
      const e = err as { name?: string; cause?: { code?: string } };
      const timeout = e.name === 'TimeoutError' || e.name === 'AbortError';
      const why = timeout
        ? `no complete answer within ${timeoutMs} ms`
        : quote(String(e.cause?.code ?? 'no answer'), 40);
      return {
        ok: false,
        code: timeout ? 'timeout' : 'unreachable',
        problem: `witness did not answer: ${why}`,
      };
    }
  }

  /** Asks the witness; when `waitMs` is given, asks again with backoff until that much time passed. */
  async function cosign(
    w: WitnessOptions,
    size: number,
    note: string,
    waitMs: number | null,
  ): Promise<Cosigned & { waited: number }> {
    const perRequest = w.requestTimeoutMs ?? 5_000;
    const started = clock.now();
    // Time spent sleeping counts even under a clock that does not move, so the wait is bounded.
    let slept = 0;
    const elapsed = (): number => Math.max(clock.now() - started, slept);
    let delay = 100;
    // A last round cut short by what was left of the wait says less than an earlier answer did.
    let answered: Cosigned | null = null;
    for (;;) {
      const left = waitMs === null ? perRequest : waitMs - elapsed();
      const budget = Math.max(1, Math.min(perRequest, left));
      let r = await cosignOnce(w, size, note, budget);
      if (!r.ok && r.code !== 'timeout') answered = r;
      else if (!r.ok && answered && budget < perRequest) r = answered;
      const waited = elapsed();
      // A fork is not a witness outage: asking again cannot change the witness's larger tree.
      if (r.ok || waitMs === null || r.code === 'fork' || waited + delay >= waitMs)
        return { ...r, waited };
      await sleep(delay);
      slept += delay;
      delay = Math.min(delay * 2, 2_000);
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

  async function issue(
    waitMs: number | null,
  ): Promise<{ stored: StoredEvent | null; cosigned: (Cosigned & { waited: number }) | null }> {
    await sync();
    const size = log.size;
    if (size === 0 || size === lastSize) return { stored: null, cosigned: null };
    const root = log.root(size);
    const signed = signCheckpoint({ origin, size, root, extensions: [] }, signer);
    if (!signed.ok) throw new Error(`checkpoint: ${signed.failure}`);
    let note = signed.value;
    let cosigned: (Cosigned & { waited: number }) | null = null;
    if (witness) {
      cosigned = await cosign(witness, size, note, waitMs);
      if (cosigned.ok) {
        note += cosigned.lines;
        witnessedSize = size;
      } else {
        options.log?.(`checkpoint ${size} stored unwitnessed: ${cosigned.problem}`);
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
          ...(witness ? { witnessed: cosigned?.ok === true } : {}),
          ...(cosigned && !cosigned.ok
            ? {
                witness_problem: cosigned.problem,
                witness_problem_code: cosigned.code,
                ...(cosigned.witness_size !== undefined
                  ? { witness_size: cosigned.witness_size }
                  : {}),
              }
            : {}),
        },
      },
    ]);
    if (stored) options.onCheckpoint?.(stored);
    lastSize = size;
    return { stored: stored ?? null, cosigned };
  }

  // Serialised: two checkpoints never race each other for the same tree.
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = chain.then(fn, fn);
    chain = next.catch(() => undefined);
    return next;
  };

  const maybe = (): Promise<StoredEvent | null> =>
    serial(async () => {
      await sync();
      return log.size - lastSize >= every ? (await issue(null)).stored : null;
    });
  let background: Promise<void> = Promise.resolve();
  let queued = false;

  return {
    checkpoint: () => serial(async () => (await issue(null)).stored),
    maybe,
    maybeLater() {
      // One background round waiting is enough: it reads everything appended until it starts.
      if (queued) return;
      queued = true;
      background = background.then(async () => {
        queued = false;
        await maybe().catch((err: unknown) => {
          options.log?.(
            capLine(`checkpoint failed: ${quote(String((err as Error)?.message ?? err), 120)}`),
          );
        });
      });
    },
    idle: () => background,
    beforeSensitive: () =>
      serial(async (): Promise<SensitiveCheck> => {
        const required = witness?.required === true;
        const { cosigned } = await issue(required ? (witness.waitMs ?? 10_000) : null);
        if (!required || cosigned?.ok === true) return { held: false };
        // Nothing new to checkpoint: what counts is whether the last checkpoint was witnessed.
        if (!cosigned && witnessedSize === lastSize) return { held: false };
        return {
          held: true,
          witness: witness.key.name,
          url: witness.url,
          problem: cosigned ? cosigned.problem : 'the latest checkpoint is not witnessed',
          ...(cosigned && !cosigned.ok ? { problem_code: cosigned.code } : {}),
          waited_ms: cosigned ? cosigned.waited : 0,
        };
      }),
  };
}
