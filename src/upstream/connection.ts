// One upstream MCP server, reached as a client over stdio (a child process) or Streamable HTTP.
// The connection is opened on first use and again after the upstream went away (a child that
// exited is respawned for the next call; the call that was in flight stays unknown).
//
// Evidence, not error text: the client's transport is observed, so a call knows whether its
// request was handed to the upstream (written to the child's stdin, or the HTTP POST got past
// connecting) and what came back for exactly that request id (a result, or a JSON-RPC error).
import {
  Client,
  deserializeMessage,
  StreamableHTTPClientTransport,
  type Transport as ClientTransport,
} from '@modelcontextprotocol/client';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { McpErrorCode, reportedCode } from '../core/error-code.js';
import { authFactsOf, type AuthFacts } from './oauth/session.js';
import {
  boundedFetch,
  tooLarge,
  UPSTREAM_MAX_MESSAGE_BYTES,
  UPSTREAM_MESSAGE_TOO_LARGE,
} from './bounded.js';

/** How to reach an upstream; secrets already resolved (they stay in the child env or headers). */
export type UpstreamEndpoint =
  | { kind: 'stdio'; command: string; args: string[]; env: Record<string, string>; cwd?: string }
  | {
      kind: 'http';
      url: string;
      headers: Record<string, string>;
      /** OAuth upstreams: the fetch that adds the token (src/upstream/oauth/session.ts). */
      fetch?: (url: string | URL, init?: RequestInit) => Promise<Response>;
    };

/** What a tool listing says about one upstream tool. */
export interface UpstreamTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: {
    readOnlyHint?: boolean;
    destructiveHint?: boolean;
    idempotentHint?: boolean;
    openWorldHint?: boolean;
  };
}

/** Where one call got to, from what the transport saw. */
export type CallFacts =
  | { stage: 'not_connected'; error_code: McpErrorCode }
  | { stage: 'not_written'; error_code: McpErrorCode }
  | {
      stage: 'written';
      ended: 'closed' | 'deadline' | 'cancelled' | 'error';
      error_code: McpErrorCode;
    }
  | { stage: 'answered'; message: { result?: unknown; error?: { code: number } } }
  /**
   * The upstream's auth stopped the call before the tool request was accepted: no credential to
   * send (nothing left), or the upstream answered 401/403 (it refused; nothing was done).
   */
  | { stage: 'auth'; facts: AuthFacts };

export interface UpstreamConnection {
  readonly name: string;
  listTools(): Promise<UpstreamTool[]>;
  call(
    tool: string,
    args: Record<string, unknown>,
    opts: {
      id: string;
      deadline_ms: number;
      signal?: AbortSignal | undefined;
      /** On a lookup: the operation's recorded caller (see McpRequest.operation_caller). */
      operation_caller?: { issuer: string | null; subject: string } | null | undefined;
    },
  ): Promise<CallFacts>;
  close(): Promise<void>;
}

/** The `_meta` key that carries Candor's attempt (or lookup) id on each proxied call. */
export const CALL_ID_META = 'dev.candor/call_id';

type Message = Record<string, unknown> & { id?: unknown; method?: unknown };
type Watch = {
  written: boolean;
  answer: Message | null;
  closed: boolean;
  /** Its answer (or the stream it was on) went past the message size limit. */
  overflow: boolean;
  done: () => void;
  requestId?: unknown;
  /** Set when the request's own POST was stopped by auth (see CallFacts `auth`). */
  auth?: AuthFacts;
};

export function upstreamConnection(
  name: string,
  endpoint: () => Promise<UpstreamEndpoint>,
  options: {
    log?: (line: string) => void;
    connect_timeout_ms?: number;
    /** The largest message read from the upstream (default 16 MiB, `UPSTREAM_MAX_MESSAGE_BYTES`). */
    max_message_bytes?: number;
    /** Called after the upstream was started again (not the first time), e.g. to list its tools anew. */
    onReopen?: () => void;
  } = {},
): UpstreamConnection {
  let opens = 0;
  let live: Promise<{ client: Client; watches: Map<string, Watch>; gone: () => boolean }> | null =
    null;
  const log = options.log ?? (() => undefined);
  const max = options.max_message_bytes ?? UPSTREAM_MAX_MESSAGE_BYTES;

  async function open() {
    const ep = await endpoint();
    const watches = new Map<string, Watch>();
    let closed = false;
    /** Past the size limit: the calls it concerns are told so (their outcome is unknown). */
    const overflowed = (which: Iterable<Watch>): void => {
      log(
        `upstream ${name}: a message went past the limit of ${max} bytes (max_message_bytes); the connection is closed (${UPSTREAM_MESSAGE_TOO_LARGE})`,
      );
      for (const w of which) {
        w.overflow = true;
        w.done();
      }
    };
    const inner: ClientTransport =
      ep.kind === 'stdio'
        ? new StdioClientTransport({
            command: ep.command,
            args: ep.args,
            // Only the safe defaults of this process's environment plus the configured values.
            env: { ...getDefaultEnvironment(), ...ep.env },
            stderr: 'pipe',
            // One line is one message: the SDK closes the child past this many buffered bytes.
            maxBufferSize: max,
            ...(ep.cwd !== undefined ? { cwd: ep.cwd } : {}),
          })
        : new StreamableHTTPClientTransport(new URL(ep.url), {
            requestInit: { headers: ep.headers },
            // Bounded answers, read through the OAuth fetch that adds the token when there is one.
            fetch: boundedFetch(
              max,
              (request) => {
                const meta = (request as { params?: { _meta?: Record<string, unknown> } } | null)
                  ?.params?._meta;
                const callId = meta?.[CALL_ID_META];
                const watch = typeof callId === 'string' ? watches.get(callId) : undefined;
                overflowed(watch ? [watch] : []);
              },
              ...(ep.fetch ? [ep.fetch] : []),
            ),
          });
    if (inner instanceof StdioClientTransport)
      tagStdioOverflow(inner, max, () => {
        // The SDK is closing the child: the next call starts a new one, and every call in flight
        // on this one is cut off by this message.
        closed = true;
        overflowed([...watches.values()].filter((w) => w.written));
      });
    const byRequest = new Map<unknown, Watch>();
    const innerSend = inner.send.bind(inner);
    inner.send = async (message, sendOptions) => {
      const m = message as Message;
      const meta = (m['params'] as { _meta?: Record<string, unknown> } | undefined)?._meta;
      const callId = m.method === 'tools/call' ? meta?.[CALL_ID_META] : undefined;
      const watch = typeof callId === 'string' ? watches.get(callId) : undefined;
      if (watch) {
        watch.requestId = m.id;
        byRequest.set(m.id, watch);
        // HTTP: from here on the POST may reach the server (a refused connect is told apart
        // below); stdio: written once the child's stdin took the line.
        if (ep.kind === 'http') watch.written = true;
      }
      // HTTP: a response stream that ends without this request's answer (and without a resumed
      // stream bringing it) ends the wait at once instead of at the deadline.
      const options =
        watch && ep.kind === 'http'
          ? {
              ...sendOptions,
              onRequestStreamEnd: () => {
                sendOptions?.onRequestStreamEnd?.();
                if (watch.answer) return;
                watch.closed = true;
                watch.done();
              },
            }
          : sendOptions;
      try {
        await innerSend(message, options);
      } catch (error) {
        if (watch && ep.kind === 'http' && notConnected(error)) watch.written = false;
        const auth = authFactsOf(error);
        if (watch && auth) {
          // Refused before the tool request was accepted (or never sent): nothing was done.
          watch.auth = auth;
          watch.written = false;
        }
        throw error;
      }
      if (watch) watch.written = true;
    };
    const client = new Client({ name: 'candor', version: '1' }, { capabilities: {} });
    const timeout = options.connect_timeout_ms ?? 30_000;
    await client.connect(inner, { timeout });
    // Installed after connect (the client sets its own handlers there): observe, then hand on.
    const clientOnMessage = inner.onmessage;
    inner.onmessage = (message, extra) => {
      const m = message as Message;
      const watch = 'method' in m ? undefined : byRequest.get(m.id);
      if (watch) {
        watch.answer = m;
        byRequest.delete(m.id);
      }
      clientOnMessage?.(message, extra);
      watch?.done();
    };
    const clientOnClose = inner.onclose;
    inner.onclose = () => {
      closed = true;
      for (const w of watches.values()) {
        w.closed = true;
        w.done();
      }
      clientOnClose?.();
    };
    if (inner instanceof StdioClientTransport) {
      inner.stderr?.on('data', (chunk: Buffer) => {
        for (const line of chunk.toString('utf8').split('\n'))
          if (line.trim()) log(`upstream ${name}: ${line.slice(0, 500)}`);
      });
    }
    return { client, watches, gone: () => closed };
  }

  async function connected() {
    if (live) {
      const current = await live.catch(() => null);
      if (current && !current.gone()) return current;
      live = null;
    }
    live = open();
    try {
      const opened = await live;
      if (opens++ > 0) options.onReopen?.();
      return opened;
    } catch (error) {
      live = null;
      throw error;
    }
  }

  return {
    name,
    async listTools() {
      const { client } = await connected();
      const { tools } = await client.listTools();
      return tools as unknown as UpstreamTool[];
    },
    async call(tool, args, opts) {
      let c: Awaited<ReturnType<typeof connected>>;
      try {
        c = await connected();
      } catch (error) {
        // Connecting (initialize) was stopped by auth: the tool request was never sent.
        const auth = authFactsOf(error);
        if (auth) return { stage: 'auth', facts: auth };
        return { stage: 'not_connected', error_code: codeOf(error) };
      }
      let settle!: () => void;
      const answered = new Promise<void>((r) => (settle = r));
      const watch: Watch = {
        written: false,
        answer: null,
        closed: false,
        overflow: false,
        done: () => settle(),
      };
      c.watches.set(opts.id, watch);
      const local = new AbortController();
      let ended: 'deadline' | 'cancelled' | null = null;
      const timer = setTimeout(() => {
        ended = 'deadline';
        local.abort();
      }, opts.deadline_ms);
      const onAbort = () => {
        ended ??= 'cancelled';
        local.abort();
      };
      if (opts.signal?.aborted) onAbort();
      else opts.signal?.addEventListener('abort', onAbort, { once: true });
      let error: unknown = null;
      try {
        // The client forwards an abort upstream as notifications/cancelled.
        const sent = c.client
          .callTool(
            { name: tool, arguments: args, _meta: { [CALL_ID_META]: opts.id } },
            { signal: local.signal, timeout: opts.deadline_ms + 60_000 },
          )
          .catch((e: unknown) => {
            error = e;
          });
        await Promise.race([sent, answered]);
        // The raw answer may arrive before the client's own processing finished: let it.
        if (watch.answer) await sent;
      } finally {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        c.watches.delete(opts.id);
      }
      if (watch.answer)
        return {
          stage: 'answered',
          message: watch.answer as Extract<CallFacts, { stage: 'answered' }>['message'],
        };
      const code = watch.overflow
        ? UPSTREAM_MESSAGE_TOO_LARGE
        : error
          ? codeOf(error)
          : McpErrorCode.no_answer;
      if (watch.auth && !watch.written) return { stage: 'auth', facts: watch.auth };
      if (!watch.written) return { stage: 'not_written', error_code: code };
      if (watch.overflow) return { stage: 'written', ended: 'error', error_code: code };
      return {
        stage: 'written',
        ended: watch.closed ? 'closed' : (ended ?? 'error'),
        error_code: code,
      };
    },
    async close() {
      const current = live ? await live.catch(() => null) : null;
      live = null;
      await current?.client.close().catch(() => undefined);
    },
  };
}

/**
 * The SDK's stdio read buffer copies everything it holds on each chunk (quadratic in a long line)
 * and throws past `maxBufferSize`. It is replaced by a linear one with the same three members that
 * throws the coded error past `max` (a line or its unfinished rest); the SDK then closes the child.
 * When a later SDK renames the buffer, the limit still holds (the option), only the code is lost.
 */
function tagStdioOverflow(inner: StdioClientTransport, max: number, over: () => void): void {
  const holder = inner as unknown as { _readBuffer?: { append?: unknown } };
  if (typeof holder._readBuffer?.append !== 'function') return;
  holder._readBuffer = new LineBuffer(max, over);
}

/** Newline-delimited JSON-RPC messages, held in chunks until their newline arrives. */
class LineBuffer {
  #chunks: Buffer[] = [];
  #size = 0;
  #lines: string[] = [];
  constructor(
    private readonly max: number,
    private readonly over: () => void,
  ) {}

  append(chunk: Buffer): void {
    let start = 0;
    for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, start)) {
      this.#take(chunk.subarray(start, i));
      this.#lines.push(Buffer.concat(this.#chunks).toString('utf8').replace(/\r$/, ''));
      this.#chunks = [];
      this.#size = 0;
      start = i + 1;
    }
    if (start < chunk.length) this.#take(chunk.subarray(start));
  }

  #take(piece: Buffer): void {
    if (this.#size + piece.length > this.max) {
      this.clear();
      this.over();
      throw tooLarge(this.max);
    }
    this.#chunks.push(piece);
    this.#size += piece.length;
  }

  readMessage(): unknown {
    for (let line = this.#lines.shift(); line !== undefined; line = this.#lines.shift()) {
      try {
        return deserializeMessage(line);
      } catch (error) {
        // Not JSON (a stray log line on stdout): skipped, as the SDK's own buffer does.
        if (error instanceof SyntaxError) continue;
        throw error;
      }
    }
    return null;
  }

  clear(): void {
    this.#chunks = [];
    this.#size = 0;
    this.#lines = [];
  }
}

/** An HTTP send that failed before a connection existed (nothing reached the server). */
function notConnected(error: unknown): boolean {
  const code = codeOf(error);
  return code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN';
}

/**
 * A stable code for diagnostics: the error's own code or its cause's, as reported, never its
 * message.
 */
function codeOf(error: unknown): McpErrorCode {
  for (let e: unknown = error, depth = 0; e && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return reportedCode(code);
    if (typeof code === 'number') return reportedCode(`code_${code}`);
    e = (e as { cause?: unknown }).cause;
  }
  return McpErrorCode.error;
}
