// The gateway's stdio transport: newline-delimited JSON-RPC on stdin/stdout, written here (not the
// SDK's) for what a gateway owes its client when a frame is bad:
//   - A line over `maxLineBytes` is dropped as it streams (memory stays bounded), answered with an
//     Invalid Request error (with its id when one can be read from the line's ends) and one log
//     line; the gateway keeps serving.
//   - A line that is not JSON, or not a JSON-RPC message, is answered with a parse / invalid
//     request error and logged as one line (never its content: it may hold secrets).
//   - A 2025-era request before `initialize` is refused (Invalid Request); a 2026-07-28 request
//     carries its own protocol version in `_meta` and needs no opening.
import type { Readable, Writable } from 'node:stream';
import {
  parseJSONRPCMessage,
  type JSONRPCMessage,
  type Transport,
} from '@modelcontextprotocol/server';

export const DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024;

/** The `_meta` key that marks a 2026-07-28 request (protocol revision carried per request). */
const MODERN_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
/** Methods a client may send before (or instead of) `initialize`. */
const OPENING = new Set(['initialize', 'server/discover', 'ping']);

export interface StdioOptions {
  stdin?: Readable;
  stdout?: Writable;
  log?: (line: string) => void;
  maxLineBytes?: number;
}

type Id = string | number | null;

/** Reads a JSON-RPC id from the visible ends of a line too long to parse. */
function idFromEnds(head: string, tail: string): Id {
  const lead =
    /"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"[^"\\]{0,200}")/.exec(head) ??
    /^\s*\{\s*"id"\s*:\s*(-?\d+|"[^"\\]{0,200}")/.exec(head) ??
    /"id"\s*:\s*(-?\d+|"[^"\\]{0,200}")\s*\}\s*$/.exec(tail);
  if (!lead?.[1]) return null;
  return JSON.parse(lead[1]) as string | number;
}

function idOf(value: unknown): Id {
  const id = (value as { id?: unknown } | null)?.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

export class GatewayStdioTransport implements Transport {
  onclose?: (() => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onmessage?: ((message: JSONRPCMessage) => void) | undefined;

  private readonly stdin: Readable;
  private readonly stdout: Writable;
  private readonly log: (line: string) => void;
  private readonly max: number;
  private chunks: Buffer[] = [];
  private size = 0;
  /** Set while the rest of an over-long line is being dropped. */
  private over: { head: string; tail: string; bytes: number } | null = null;
  private initialized = false;
  private closed = false;

  constructor(options: StdioOptions = {}) {
    this.stdin = options.stdin ?? process.stdin;
    this.stdout = options.stdout ?? process.stdout;
    this.log = options.log ?? (() => undefined);
    this.max = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  }

  start(): Promise<void> {
    this.stdin.on('data', this.onData);
    this.stdin.on('end', this.onEnd);
    this.stdin.on('close', this.onEnd);
    this.stdin.on('error', this.onStreamError);
    this.stdout.on('error', this.onStreamError);
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the stdio transport is closed'));
    return new Promise((resolve) => {
      if (this.stdout.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.stdout.once('drain', () => resolve());
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.stdin.off('data', this.onData);
    this.stdin.off('end', this.onEnd);
    this.stdin.off('close', this.onEnd);
    this.stdin.pause();
    this.chunks = [];
    this.onclose?.();
    return Promise.resolve();
  }

  private readonly onEnd = (): void => void this.close();

  private readonly onStreamError = (error: Error): void => {
    if (!this.closed) this.onerror?.(error);
  };

  private readonly onData = (chunk: Buffer): void => {
    let rest = chunk;
    for (;;) {
      const nl = rest.indexOf(0x0a);
      const part = nl === -1 ? rest : rest.subarray(0, nl);
      this.take(part);
      if (nl === -1) return;
      this.endLine();
      rest = rest.subarray(nl + 1);
    }
  };

  private take(part: Buffer): void {
    if (part.length === 0) return;
    if (this.over) {
      this.over.bytes += part.length;
      this.over.tail = (this.over.tail + part.toString('latin1')).slice(-4096);
      return;
    }
    this.chunks.push(part);
    this.size += part.length;
    if (this.size > this.max) {
      const all = Buffer.concat(this.chunks);
      this.over = {
        head: all.subarray(0, 4096).toString('latin1'),
        tail: all.subarray(-4096).toString('latin1'),
        bytes: all.length,
      };
      this.chunks = [];
      this.size = 0;
    }
  }

  private endLine(): void {
    if (this.over) {
      const { head, tail, bytes } = this.over;
      this.over = null;
      const id = idFromEnds(head, tail);
      this.log(
        `candor serve: stdio: refused a message of ${bytes} bytes (limit ${this.max}); still serving`,
      );
      this.reply(id, -32600, `Invalid Request: message over ${this.max} bytes`);
      return;
    }
    const line = Buffer.concat(this.chunks).toString('utf8').replace(/\r$/, '');
    this.chunks = [];
    this.size = 0;
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      this.log(`candor serve: stdio: a line of ${line.length} characters is not JSON; ignored`);
      this.reply(null, -32700, 'Parse error: the line is not JSON');
      return;
    }
    let message: JSONRPCMessage;
    try {
      message = parseJSONRPCMessage(value);
    } catch {
      this.log('candor serve: stdio: a line is JSON but not a JSON-RPC message; ignored');
      this.reply(idOf(value), -32600, 'Invalid Request: not a JSON-RPC message');
      return;
    }
    if (!this.admits(message)) return;
    this.onmessage?.(message);
  }

  /** Refuses 2025-era requests before `initialize`; notifications before it are dropped. */
  private admits(message: JSONRPCMessage): boolean {
    if (this.initialized || !('method' in message)) return true;
    const method = message.method;
    if (method === 'initialize') {
      this.initialized = true;
      return true;
    }
    const meta = (message.params as { _meta?: Record<string, unknown> } | undefined)?._meta;
    if (OPENING.has(method) || (meta && MODERN_VERSION_KEY in meta)) return true;
    if ('id' in message) {
      this.reply(
        message.id,
        -32600,
        `Invalid Request: ${method} before initialize (send initialize first)`,
      );
    }
    return false;
  }

  private reply(id: Id, code: number, message: string): void {
    if (this.closed) return;
    this.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } })}\n`);
  }
}
