// A C2SP tlog-witness (c2sp.org/tlog-witness) `add-checkpoint` endpoint and its client. The witness
// keeps, per log origin, the latest checkpoint it cosigned; it cosigns a new checkpoint only when
// the log's signature verifies and a consistency proof shows it extends that state, so a log that
// rewrites or rolls back its history can no longer collect cosignatures. The check-and-persist step
// is serialized: two concurrent requests can never roll the stored size back.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { cosignatureLine, openCheckpoint, parseCheckpointText } from './checkpoint.js';
import { quote } from '../../core/quote.js';
import { verifyConsistency } from './merkle.js';
import {
  SigType,
  formatSignatureLine,
  parseNote,
  signatureKeyLabel,
  strictBase64,
  type NoteSigner,
  type NoteVerifier,
} from './note.js';

export interface WitnessEntry {
  size: number;
  root: Buffer;
}

/** Where the witness remembers the latest cosigned checkpoint per origin. */
export interface WitnessState {
  get(origin: string): Promise<WitnessEntry | undefined>;
  /** Must be durable when the promise resolves (the witness answers only afterwards). */
  set(origin: string, entry: WitnessEntry): Promise<void>;
}

export function memoryWitnessState(): WitnessState {
  const m = new Map<string, WitnessEntry>();
  return {
    get: (o) => Promise.resolve(m.get(o)),
    set: (o, e) => {
      m.set(o, e);
      return Promise.resolve();
    },
  };
}

/** JSON file state, replaced atomically (write to a temporary file, then rename). */
export function fileWitnessState(path: string): WitnessState {
  const load = async (): Promise<Record<string, { size: number; root: string }>> => {
    try {
      return JSON.parse(await readFile(path, 'utf8')) as Record<
        string,
        { size: number; root: string }
      >;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw err;
    }
  };
  return {
    async get(origin) {
      const e = (await load())[origin];
      return e ? { size: e.size, root: Buffer.from(e.root, 'base64') } : undefined;
    },
    async set(origin, entry) {
      const all = await load();
      all[origin] = { size: entry.size, root: entry.root.toString('base64') };
      const tmp = `${path}.tmp-${process.pid}`;
      await writeFile(tmp, `${JSON.stringify(all, null, 2)}\n`, { flush: true });
      await rename(tmp, path);
    },
  };
}

export interface WitnessConfig {
  /** The witness's cosigning key (type 0x04). */
  signer: NoteSigner;
  /** Log verifier keys (type 0x01); a log's origin is its key name. */
  logs: readonly NoteVerifier[];
  state: WitnessState;
}

export interface WitnessResponse {
  status: number;
  contentType: string;
  body: string;
}

const text = (
  status: number,
  body: string,
  contentType = 'text/plain; charset=utf-8',
): WitnessResponse => ({
  status,
  contentType,
  body: body.endsWith('\n') ? body : `${body}\n`,
});

const MAX_PROOF_LINES = 63;

/** Handles one add-checkpoint request body. Not reentrant: callers serialize (see `serialize`). */
export async function addCheckpoint(body: Buffer, cfg: WitnessConfig): Promise<WitnessResponse> {
  let msg: string;
  try {
    msg = new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    return text(400, 'request body is not UTF-8');
  }
  const split = msg.indexOf('\n\n');
  if (split < 0) return text(400, 'missing blank line before the checkpoint');
  const [oldLine, ...proofLines] = msg.slice(0, split).split('\n');
  const old = /^old (0|[1-9][0-9]{0,15})$/.exec(oldLine ?? '');
  if (!old) return text(400, 'first line must be "old <size>"');
  const oldSize = Number(old[1]);
  if (proofLines.length > MAX_PROOF_LINES) return text(400, 'too many consistency proof lines');
  const proof: Buffer[] = [];
  for (const l of proofLines) {
    const h = strictBase64(l);
    if (!h || h.length !== 32) return text(400, 'a consistency proof line is not a base64 hash');
    proof.push(h);
  }
  const note = msg.slice(split + 2);
  const parsed = parseNote(note);
  if (!parsed.ok) return text(400, `malformed checkpoint: ${parsed.failure}`);
  const checkpoint = parseCheckpointText(parsed.value.text);
  if (!checkpoint.ok) return text(400, `malformed checkpoint: ${checkpoint.failure}`);
  const origin = checkpoint.value.origin;
  const keys = cfg.logs.filter((k) => k.name === origin);
  if (keys.length === 0) return text(404, `unknown log origin ${JSON.stringify(origin)}`);
  const opened = openCheckpoint(note, keys, { origin });
  if (!opened.ok)
    return text(403, `no valid signature from a trusted key of this log: ${opened.failure}`);
  const cp = opened.value.checkpoint;
  if (oldSize > cp.size)
    return text(400, `old size ${oldSize} is larger than the checkpoint size ${cp.size}`);
  const stored = (await cfg.state.get(origin)) ?? { size: 0, root: Buffer.alloc(0) };
  if (oldSize !== stored.size) return text(409, String(stored.size), 'text/x.tlog.size');
  if (oldSize === cp.size) {
    if (proof.length > 0) return text(422, 'proof must be empty when the size is unchanged');
    if (cp.size > 0 && !stored.root.equals(cp.root)) {
      return text(
        409,
        'same size as the stored checkpoint but a different root hash: the log forked',
      );
    }
  } else if (!verifyConsistency(oldSize, cp.size, stored.root, cp.root, proof)) {
    return text(422, `consistency proof from size ${oldSize} to ${cp.size} does not verify`);
  }
  await cfg.state.set(origin, { size: cp.size, root: cp.root });
  const line = cosignatureLine(opened.value.text, cfg.signer);
  if (!line.ok) return text(500, line.failure);
  return text(200, line.value);
}

/** Runs async tasks one at a time, in arrival order. */
function serialize(): <T>(task: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(task: () => Promise<T>): Promise<T> => {
    const run = tail.then(task, task);
    tail = run.catch(() => undefined);
    return run;
  };
}

const MAX_BODY = 64 * 1024;
/** How much of an over-long body is read and discarded so the client sees the 413, not a reset. */
const MAX_DRAIN = 16 * 1024 * 1024;
const DRAIN_MS = 5_000;

/** The body, or null once it passes MAX_BODY (the rest is then drained, not buffered). */
function readBody(req: IncomingMessage): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (declared > MAX_BODY) {
      resolve(null);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer): void => {
      size += c.length;
      if (size > MAX_BODY) {
        req.off('data', onData);
        resolve(null);
      } else chunks.push(c);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * After a 413: read and discard what the client is still sending (bounded in bytes and time), so
 * that it gets to read the answer instead of a connection reset; then the connection closes.
 */
function drainThenClose(req: IncomingMessage): void {
  let drained = 0;
  const timer = setTimeout(() => req.destroy(), DRAIN_MS);
  timer.unref();
  req.on('data', (c: Buffer) => {
    drained += c.length;
    if (drained > MAX_DRAIN) req.destroy();
  });
  req.on('close', () => clearTimeout(timer));
  req.resume();
}

export interface RunningWitness {
  /** Base URL, e.g. `http://127.0.0.1:41234` (the submission prefix). */
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** Starts the witness HTTP service: `POST /add-checkpoint`. Port 0 picks a free port. */
export async function startWitness(
  cfg: WitnessConfig,
  opts: { host?: string; port?: number } = {},
): Promise<RunningWitness> {
  if (cfg.signer.type !== SigType.cosignature_v1)
    throw new TypeError('witness key must be a type 0x04 key');
  const queue = serialize();
  const server = createServer((req, res) => {
    const reply = (r: WitnessResponse, close = false): void => {
      res.writeHead(r.status, {
        'content-type': r.contentType,
        'content-length': Buffer.byteLength(r.body),
        ...(close ? { connection: 'close' } : {}),
      });
      res.end(r.body);
    };
    if (req.url !== '/add-checkpoint') return reply(text(404, 'not found'));
    if (req.method !== 'POST') return reply(text(405, 'use POST'));
    readBody(req)
      .then(async (body) => {
        if (body === null) {
          drainThenClose(req);
          return reply(text(413, `request larger than ${MAX_BODY} bytes`), true);
        }
        reply(await queue(() => addCheckpoint(body, cfg)));
      })
      .catch(() => reply(text(500, 'witness error')));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}`,
    server,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/** Default limit on a witness's answer: a cosignature line is ~100 bytes; 64 KiB is generous. */
export const WITNESS_MAX_ANSWER_BYTES = 64 * 1024;

export type CosignResult =
  | { ok: true; cosignatures: string }
  | {
      ok: false;
      status: number;
      message: string;
      /** The witness's size on 409 */
      size?: number;
      /** `too_large`: the answer passed `maxBytes` and was not read further. */
      code?: 'too_large';
    };

/**
 * Reads at most `maxBytes` of a response body as a stream (never buffering more than that),
 * cancelling the rest: null when the body is larger.
 */
export async function readBounded(res: Response, maxBytes: number): Promise<Buffer | null> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > maxBytes || !res.body) {
    await res.body?.cancel().catch(() => undefined);
    return res.body ? null : Buffer.alloc(0);
  }
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/**
 * Client: submits a checkpoint with a consistency proof from `oldSize`; returns the cosignature
 * lines. The answer is read up to `maxBytes` only; `signal` bounds the whole exchange, body
 * included (a witness trickling one byte a second is cut off by it).
 */
export async function requestCosignature(
  witnessUrl: string,
  oldSize: number,
  proof: readonly Uint8Array[],
  checkpointNote: string,
  signal?: AbortSignal,
  maxBytes = WITNESS_MAX_ANSWER_BYTES,
): Promise<CosignResult> {
  const body = `old ${oldSize}\n${proof.map((p) => `${Buffer.from(p).toString('base64')}\n`).join('')}\n${checkpointNote}`;
  const res = await fetch(`${witnessUrl.replace(/\/$/, '')}/add-checkpoint`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'text/plain; charset=utf-8' },
    ...(signal ? { signal } : {}),
  });
  const bytes = await readBounded(res, maxBytes);
  if (bytes === null) {
    return {
      ok: false,
      status: res.status,
      code: 'too_large',
      message: `answer larger than ${maxBytes} bytes (not read further)`,
    };
  }
  const reply = bytes.toString('utf8');
  if (res.status === 200) return { ok: true, cosignatures: reply };
  if (
    res.status === 409 &&
    (res.headers.get('content-type') ?? '').startsWith('text/x.tlog.size')
  ) {
    return { ok: false, status: 409, message: 'stale old size', size: Number(reply.trim()) };
  }
  return { ok: false, status: res.status, message: reply.trim() };
}

export interface CosignatureCheck {
  /** The lines kept: valid cosignatures from the expected witness key over this exact text. */
  lines: string;
  /** Why each other line (or the whole body) was not kept. */
  problems: string[];
}

/**
 * Client side of trust in a witness: of what a witness returned, keep only lines that are valid
 * tlog-cosignatures (type 0x04) from `witness` over exactly `checkpointText`, timestamped within
 * `maxSkewSeconds` of `nowMs`. Anything else — an HTML page, a line from another key, a bad
 * signature, a stale or future time — is a problem to report, never bytes to store in the ledger.
 */
export function checkCosignatures(
  body: string,
  checkpointText: string,
  witness: NoteVerifier,
  nowMs: number,
  maxSkewSeconds = 600,
): CosignatureCheck {
  const excerpt = quote(body, 80);
  const parsed = parseNote(`${checkpointText}\n${body}`);
  if (!parsed.ok || parsed.value.text !== checkpointText) {
    return { lines: '', problems: [`not a cosignature line: ${excerpt}`] };
  }
  const kept: string[] = [];
  const problems: string[] = [];
  const now = Math.floor(nowMs / 1000);
  for (const sig of parsed.value.sigs) {
    const who = signatureKeyLabel(sig);
    if (sig.name !== witness.name || sig.keyId !== witness.keyId) {
      problems.push(`a line from an unknown key ${who}`);
    } else if (
      witness.type !== SigType.cosignature_v1 ||
      !witness.verify(checkpointText, sig.sig)
    ) {
      problems.push(`an invalid cosignature from ${who}`);
    } else {
      const at = Number(sig.sig.readBigUInt64BE(0));
      if (Math.abs(at - now) > maxSkewSeconds) {
        problems.push(`a cosignature from ${who} timestamped ${at}, ${at - now} s from now`);
      } else {
        // A line returned twice is one cosignature: stored once.
        const line = formatSignatureLine(sig);
        if (!kept.includes(line)) kept.push(line);
      }
    }
  }
  return { lines: kept.join(''), problems };
}
