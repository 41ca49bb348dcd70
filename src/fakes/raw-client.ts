// A byte-level loopback client for fault tests: it sends exact bytes and reports exactly what came
// back and how the socket ended, which no HTTP client library exposes faithfully.
import net from 'node:net';

export type RawEnd = 'fin' | 'rst' | 'timeout';

export interface RawResult {
  /** Every byte received. */
  bytes: Buffer;
  /** How the exchange ended from the client's side. */
  end: RawEnd;
  /** Status code of the first response line, if one parsed. */
  status: number | undefined;
}

export interface RawOptions {
  /** Give up (and destroy the socket) after this long without the server closing. */
  timeoutMs: number;
  /** Stop as soon as this many bytes arrived (for keep-alive responses), ending as `timeout`. */
  stopAfterBytes?: number;
}

export function rawExchange(
  url: string,
  request: string | Buffer,
  opts: RawOptions,
): Promise<RawResult> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let done = false;
    // Half-open, so that after EOF one probe write can tell a FIN (the peer still accepts bytes)
    // from an RST that libuv reported as EOF because data was pending when it arrived.
    const socket = net.connect({ host: hostname, port: Number(port), allowHalfOpen: true });
    const finish = (end: RawEnd): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const bytes = Buffer.concat(chunks);
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(bytes.subarray(0, 32).toString('latin1'));
      resolve({ bytes, end, status: m ? Number(m[1]) : undefined });
    };
    const timer = setTimeout(() => finish('timeout'), opts.timeoutMs);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      if (opts.stopAfterBytes !== undefined && Buffer.concat(chunks).length >= opts.stopAfterBytes)
        finish('timeout');
    });
    socket.on('end', () => {
      if (done) return;
      socket.write('\r\n', (err) => finish(err ? 'rst' : 'fin'));
    });
    socket.on('error', (e: NodeJS.ErrnoException) =>
      finish(e.code === 'ECONNRESET' || e.code === 'EPIPE' ? 'rst' : 'fin'),
    );
    socket.write(request);
  });
}

/** A request in wire form with Content-Length framing. */
export function httpRequest(
  method: string,
  target: string,
  headers: Readonly<Record<string, string>> = {},
  body?: unknown,
): string {
  const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  const lines = [`${method} ${target} HTTP/1.1`, 'host: 127.0.0.1'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body !== undefined) lines.push('content-type: application/json');
  lines.push(`content-length: ${Buffer.byteLength(text)}`);
  return `${lines.join('\r\n')}\r\n\r\n${text}`;
}
