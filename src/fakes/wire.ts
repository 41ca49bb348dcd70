// A small incremental HTTP/1.1 request parser for the fake service. It exists because the fake must
// control every byte (and misframe on purpose), which node:http does not allow. It handles the
// request line, headers, Content-Length and chunked bodies (trailers are read and dropped), and it
// stops after each complete message so the connection can decide, between phases, whether to keep
// reading at all (a fault may close the socket before the body is read).

/** One parsed request head. Header names are lower-cased; repeated headers are joined by ", ". */
export interface RequestHead {
  method: string;
  /** Request target as sent (path plus query). */
  target: string;
  /** `HTTP/1.1` or `HTTP/1.0`. */
  version: string;
  headers: Record<string, string>;
  /** Total bytes of the request line and header block, including the blank line. */
  headBytes: number;
}

export type ParseEvent =
  | { kind: 'head'; head: RequestHead }
  | { kind: 'body'; body: Buffer }
  | { kind: 'error'; code: ParseErrorCode; message: string };

export const ParseErrorCode = {
  bad_request_line: 'bad_request_line',
  bad_header: 'bad_header',
  head_too_large: 'head_too_large',
  bad_content_length: 'bad_content_length',
  ambiguous_length: 'ambiguous_length',
  bad_chunk: 'bad_chunk',
  body_too_large: 'body_too_large',
  unsupported_transfer_encoding: 'unsupported_transfer_encoding',
} as const;
export type ParseErrorCode = (typeof ParseErrorCode)[keyof typeof ParseErrorCode];

const MAX_HEAD = 64 * 1024;
const MAX_BODY = 16 * 1024 * 1024;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

type State =
  | { s: 'head' }
  | { s: 'length'; remaining: number }
  | { s: 'chunk_size' }
  | { s: 'chunk_data'; remaining: number }
  | { s: 'chunk_crlf' }
  | { s: 'trailers' }
  | { s: 'done' }
  | { s: 'failed' };

/**
 * Feed bytes with `push`, take events with `pull`. After a `body` event the parser holds still
 * (`pull` returns null) until `next()` is called, so exactly one request is in flight per socket.
 * After an `error` event the parser is dead: the connection answers 400 and closes.
 */
export class RequestParser {
  private buf: Buffer = Buffer.alloc(0);
  private state: State = { s: 'head' };
  private chunks: Buffer[] = [];
  private bodyBytes = 0;

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
  }

  /** Bytes received but not yet consumed (e.g. the start of the next pipelined request). */
  get buffered(): number {
    return this.buf.length;
  }

  /** True while no byte of the current request has been consumed or buffered. */
  get idle(): boolean {
    return this.state.s === 'head' && this.buf.length === 0;
  }

  /** Start on the next request after a complete one. */
  next(): void {
    if (this.state.s === 'done') this.state = { s: 'head' };
  }

  pull(): ParseEvent | null {
    for (;;) {
      const st = this.state;
      switch (st.s) {
        case 'done':
        case 'failed':
          return null;
        case 'head': {
          const end = this.buf.indexOf(HEAD_END);
          if (end < 0) {
            if (this.buf.length > MAX_HEAD)
              return this.fail('head_too_large', 'header block too large');
            return null;
          }
          // Tolerate blank lines before a request line (RFC 9112 §2.2).
          let start = 0;
          while (this.buf.subarray(start, start + 2).equals(CRLF)) start += 2;
          if (start > 0 && start >= end) {
            this.buf = this.buf.subarray(start);
            continue;
          }
          const text = this.buf.subarray(start, end).toString('latin1');
          const headBytes = end + 4;
          this.buf = this.buf.subarray(headBytes);
          const parsed = parseHead(text, headBytes);
          if ('code' in parsed) return this.fail(parsed.code, parsed.message);
          const framing = bodyFraming(parsed.headers);
          if ('code' in framing) return this.fail(framing.code, framing.message);
          this.chunks = [];
          this.bodyBytes = 0;
          this.state = framing.chunked
            ? { s: 'chunk_size' }
            : { s: 'length', remaining: framing.length };
          return { kind: 'head', head: parsed };
        }
        case 'length': {
          if (st.remaining === 0) return this.finish();
          if (this.buf.length === 0) return null;
          const take = Math.min(st.remaining, this.buf.length);
          this.chunks.push(this.buf.subarray(0, take));
          this.buf = this.buf.subarray(take);
          this.state = { s: 'length', remaining: st.remaining - take };
          continue;
        }
        case 'chunk_size': {
          const eol = this.buf.indexOf(CRLF);
          if (eol < 0) {
            if (this.buf.length > 1024) return this.fail('bad_chunk', 'chunk size line too long');
            return null;
          }
          const line = this.buf.subarray(0, eol).toString('latin1');
          this.buf = this.buf.subarray(eol + 2);
          const sizeText = (line.split(';')[0] ?? '').trim();
          if (!/^[0-9a-fA-F]{1,8}$/.test(sizeText)) return this.fail('bad_chunk', 'bad chunk size');
          const size = parseInt(sizeText, 16);
          if (this.bodyBytes + size > MAX_BODY)
            return this.fail('body_too_large', 'body too large');
          this.state = size === 0 ? { s: 'trailers' } : { s: 'chunk_data', remaining: size };
          continue;
        }
        case 'chunk_data': {
          if (this.buf.length === 0) return null;
          const take = Math.min(st.remaining, this.buf.length);
          this.chunks.push(this.buf.subarray(0, take));
          this.bodyBytes += take;
          this.buf = this.buf.subarray(take);
          this.state =
            st.remaining === take
              ? { s: 'chunk_crlf' }
              : { s: 'chunk_data', remaining: st.remaining - take };
          continue;
        }
        case 'chunk_crlf': {
          if (this.buf.length < 2) return null;
          if (!this.buf.subarray(0, 2).equals(CRLF))
            return this.fail('bad_chunk', 'missing CRLF after chunk');
          this.buf = this.buf.subarray(2);
          this.state = { s: 'chunk_size' };
          continue;
        }
        case 'trailers': {
          const eol = this.buf.indexOf(CRLF);
          if (eol < 0) {
            if (this.buf.length > MAX_HEAD)
              return this.fail('head_too_large', 'trailers too large');
            return null;
          }
          this.buf = this.buf.subarray(eol + 2);
          if (eol === 0) return this.finish();
          continue;
        }
      }
    }
  }

  private finish(): ParseEvent {
    this.state = { s: 'done' };
    const body = Buffer.concat(this.chunks);
    this.chunks = [];
    return { kind: 'body', body };
  }

  private fail(code: ParseErrorCode, message: string): ParseEvent {
    this.state = { s: 'failed' };
    this.buf = Buffer.alloc(0);
    return { kind: 'error', code, message };
  }
}

function parseHead(
  text: string,
  headBytes: number,
): RequestHead | { code: ParseErrorCode; message: string } {
  const lines = text.split('\r\n');
  const requestLine = lines[0] ?? '';
  const m = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) (HTTP\/1\.[01])$/.exec(requestLine);
  if (!m) return { code: 'bad_request_line', message: 'malformed request line' };
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return { code: 'bad_header', message: 'malformed header line' };
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) return { code: 'bad_header', message: 'malformed header name' };
    const key = name.toLowerCase();
    const value = line.slice(colon + 1).trim();
    const prior = headers[key];
    headers[key] = prior === undefined ? value : `${prior}, ${value}`;
  }
  return { method: m[1] ?? '', target: m[2] ?? '', version: m[3] ?? '', headers, headBytes };
}

function bodyFraming(
  headers: Record<string, string>,
):
  | { chunked: true }
  | { chunked: false; length: number }
  | { code: ParseErrorCode; message: string } {
  const te = headers['transfer-encoding'];
  const cl = headers['content-length'];
  if (te !== undefined) {
    // Both framings at once is the classic smuggling vector: refuse (RFC 9112 §6.3).
    if (cl !== undefined)
      return { code: 'ambiguous_length', message: 'both Transfer-Encoding and Content-Length' };
    if (te.toLowerCase() !== 'chunked') {
      return { code: 'unsupported_transfer_encoding', message: 'only chunked is supported' };
    }
    return { chunked: true };
  }
  if (cl === undefined) return { chunked: false, length: 0 };
  const values = cl.split(',').map((v) => v.trim());
  if (!values.every((v) => /^[0-9]{1,10}$/.test(v)) || new Set(values).size !== 1) {
    return { code: 'bad_content_length', message: 'invalid Content-Length' };
  }
  const length = Number(values[0]);
  if (length > MAX_BODY) return { code: 'body_too_large', message: 'body too large' };
  return { chunked: false, length };
}
