import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RequestParser, type ParseEvent } from './wire.js';

function drain(p: RequestParser): ParseEvent[] {
  const out: ParseEvent[] = [];
  for (let ev = p.pull(); ev !== null; ev = p.pull()) {
    out.push(ev);
    if (ev.kind === 'body') p.next();
  }
  return out;
}

const post =
  'POST /v1/deployments?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 13\r\nX-Candor-Call-Id: c1\r\n\r\n{"service":1}';
const chunked =
  'PUT /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: t\r\n\r\n';

describe('RequestParser', () => {
  it('parses a Content-Length request and lower-cases header names', () => {
    const p = new RequestParser();
    p.push(Buffer.from(post));
    const [head, body] = drain(p);
    expect(head).toMatchObject({
      kind: 'head',
      head: { method: 'POST', target: '/v1/deployments?x=1', version: 'HTTP/1.1' },
    });
    if (head?.kind !== 'head') throw new Error('no head');
    expect(head.head.headers['x-candor-call-id']).toBe('c1');
    expect(body).toEqual({ kind: 'body', body: Buffer.from('{"service":1}') });
  });

  it('decodes chunked bodies and drops trailers', () => {
    const p = new RequestParser();
    p.push(Buffer.from(chunked));
    const events = drain(p);
    expect(events.map((e) => e.kind)).toEqual(['head', 'body']);
    expect(events[1]).toEqual({ kind: 'body', body: Buffer.from('Wikipedia') });
  });

  it('holds still after one message until next() (one request in flight per socket)', () => {
    const p = new RequestParser();
    p.push(Buffer.from(post + post));
    expect(p.pull()?.kind).toBe('head');
    expect(p.pull()?.kind).toBe('body');
    expect(p.pull()).toBeNull();
    expect(p.buffered).toBe(post.length);
    p.next();
    expect(p.pull()?.kind).toBe('head');
  });

  it('gives the same events however the bytes are split', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 30 }),
        (cuts) => {
          const whole = Buffer.from(post + chunked + post);
          const p = new RequestParser();
          const events: ParseEvent[] = [];
          let at = 0;
          for (const n of [...cuts, whole.length]) {
            p.push(whole.subarray(at, Math.min(whole.length, at + n)));
            at = Math.min(whole.length, at + n);
            events.push(...drain(p));
          }
          const whole1 = new RequestParser();
          whole1.push(whole);
          expect(events).toEqual(drain(whole1));
        },
      ),
      { seed: 42 },
    );
  });

  it.each([
    ['GARBAGE\r\n\r\n', 'bad_request_line'],
    ['GET / HTTP/2.0\r\n\r\n', 'bad_request_line'],
    ['GET / HTTP/1.1\r\nNo colon here\r\n\r\n', 'bad_header'],
    [
      'POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n',
      'ambiguous_length',
    ],
    ['POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n', 'bad_content_length'],
    ['POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n', 'bad_content_length'],
    ['POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n', 'unsupported_transfer_encoding'],
    ['POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 'bad_chunk'],
    ['POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXX', 'bad_chunk'],
  ])('rejects %j as %s and then stays dead', (text, code) => {
    const p = new RequestParser();
    p.push(Buffer.from(text));
    const events = drain(p);
    expect(events.at(-1)).toMatchObject({ kind: 'error', code });
    p.push(Buffer.from(post));
    expect(p.pull()).toBeNull();
  });
});
