// Every message an upstream MCP server sends is read up to a size limit (`max_message_bytes`,
// default 16 MiB): past it, reading stops and the connection is closed, so a hostile or broken
// upstream costs at most the limit in memory, never its message's length. The call whose answer
// went past it is told `UPSTREAM_MESSAGE_TOO_LARGE` (the request was written: its outcome is
// unknown). Time is bounded elsewhere: each call's `deadline_ms`, the connect timeout.
import type { FetchLike } from '@modelcontextprotocol/client';
import { McpErrorCode } from '../core/error-code.js';

/**
 * Default largest upstream message (one stdio line, one HTTP answer, one SSE event): above the
 * SDK's own 10 MB stdio default, so tools that worked before still do.
 */
export const UPSTREAM_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** The code of a call whose upstream answer went past the limit. */
export const UPSTREAM_MESSAGE_TOO_LARGE = McpErrorCode.message_too_large;

/** An error carrying the code (the SDK hands it to `onerror` or rejects the call with it). */
export function tooLarge(max: number): Error {
  return Object.assign(new Error(`an upstream message went past the limit of ${max} bytes`), {
    code: UPSTREAM_MESSAGE_TOO_LARGE,
  });
}

/**
 * A fetch for the Streamable HTTP client transport whose response bodies stop at `max` bytes: a
 * JSON answer as a whole, an event stream per event (bytes since the last blank line). Past it the
 * body errors with the code and the connection is cancelled; `over` is told the JSON-RPC request
 * the response answered (the POST body's message), or null for the standalone GET stream.
 */
export function boundedFetch(
  max: number,
  over: (request: unknown) => void,
  base: FetchLike = fetch,
): FetchLike {
  return async (url, init) => {
    const res = await base(url, init);
    if (!res.body) return res;
    const sse = (res.headers.get('content-type') ?? '').includes('text/event-stream');
    let size = 0;
    let lastWasNewline = false;
    const limited = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          if (sse) {
            const end = lastEventEnd(chunk, lastWasNewline);
            size = end < 0 ? size + chunk.length : chunk.length - end;
            lastWasNewline = chunk.length > 0 && chunk[chunk.length - 1] === 0x0a;
          } else {
            size += chunk.length;
          }
          if (size > max) {
            over(requestOf(init?.body));
            controller.error(tooLarge(max));
            return;
          }
          controller.enqueue(chunk);
        },
      }),
    );
    return new Response(limited, {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  };
}

/**
 * The offset just past the last event boundary (an empty line: `\n\n`, also across the previous
 * chunk's end) in `chunk`, or -1 when it holds none. `\r\n\r\n` ends with `\n\r\n`: its last
 * `\n` is found by looking past an optional `\r`.
 */
function lastEventEnd(chunk: Uint8Array, prevEndedWithNewline: boolean): number {
  for (let i = chunk.length - 1; i >= 0; i--) {
    if (chunk[i] !== 0x0a) continue;
    let j = i - 1;
    if (j >= 0 && chunk[j] === 0x0d) j--;
    if (j >= 0 ? chunk[j] === 0x0a : prevEndedWithNewline) return i + 1;
  }
  return -1;
}

/** The JSON-RPC message a POST carried (Candor's own, so small), or null. */
function requestOf(body: unknown): unknown {
  if (typeof body !== 'string') return null;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return null;
  }
}
