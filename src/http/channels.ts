// Phase evidence from undici's diagnostics channels. Whether request bytes left is decided by these
// events (was `sendHeaders` published for this request, did `headers` arrive), never by error text.
// Requests are matched to attempts by the `x-candor-attempt-id` header Candor sets on each attempt.
import diagnosticsChannel from 'node:diagnostics_channel';
import type { Socket } from 'node:net';

export const ATTEMPT_HEADER = 'x-candor-attempt-id';

export interface PhaseTracker {
  created_at?: number;
  /** undici is about to write the request head to a connected socket. */
  send_headers_at?: number;
  /** socket.bytesWritten when the head was handed over (to tell later writes apart). */
  bytes_written_before?: number;
  /** socket.bytesRead at that moment: later growth without parsed headers means a misframed reply. */
  bytes_read_before?: number;
  socket?: Socket;
  body_sent_at?: number;
  headers_at?: number;
  status?: number;
  error_at?: number;
  error_code?: string;
  /** Called synchronously when a phase is reached (used for the request-write timeout). */
  on?: (phase: 'send_headers' | 'body_sent' | 'headers') => void;
}

const byAttempt = new Map<string, PhaseTracker>();
const byRequest = new WeakMap<object, PhaseTracker>();
let subscribed = false;
const now: () => number = () => performance.timeOrigin + performance.now();

interface UndiciRequestLike {
  headers?: unknown;
}

function attemptIdOf(request: UndiciRequestLike): string | undefined {
  const h = request.headers;
  if (Array.isArray(h)) {
    for (let i = 0; i + 1 < h.length; i += 2) {
      if (String(h[i]).toLowerCase() === ATTEMPT_HEADER) return String(h[i + 1]);
    }
  } else if (typeof h === 'string') {
    const m = /(?:^|\r\n)x-candor-attempt-id:\s*([^\r\n]+)/i.exec(h);
    if (m) return m[1]!.trim();
  }
  return undefined;
}

function trackerOf(message: unknown): PhaseTracker | undefined {
  const request = (message as { request?: object }).request;
  if (!request) return undefined;
  return byRequest.get(request);
}

function subscribeOnce(): void {
  if (subscribed) return;
  subscribed = true;
  diagnosticsChannel.subscribe('undici:request:create', (message) => {
    const request = (message as { request?: UndiciRequestLike & object }).request;
    if (!request) return;
    const id = attemptIdOf(request);
    const t = id === undefined ? undefined : byAttempt.get(id);
    if (!t) return;
    byRequest.set(request, t);
    t.created_at = now();
  });
  diagnosticsChannel.subscribe('undici:client:sendHeaders', (message) => {
    const t = trackerOf(message);
    if (!t) return;
    const socket = (message as { socket?: Socket }).socket;
    t.send_headers_at = now();
    if (socket) {
      t.socket = socket;
      t.bytes_written_before = socket.bytesWritten;
      t.bytes_read_before = socket.bytesRead;
    }
    t.on?.('send_headers');
  });
  diagnosticsChannel.subscribe('undici:request:bodySent', (message) => {
    const t = trackerOf(message);
    if (!t) return;
    t.body_sent_at = now();
    t.on?.('body_sent');
  });
  diagnosticsChannel.subscribe('undici:request:headers', (message) => {
    const t = trackerOf(message);
    if (!t) return;
    t.headers_at = now();
    const status = (message as { response?: { statusCode?: number } }).response?.statusCode;
    if (status !== undefined) t.status = status;
    t.on?.('headers');
  });
  diagnosticsChannel.subscribe('undici:request:error', (message) => {
    const t = trackerOf(message);
    if (!t) return;
    t.error_at = now();
    const code = (message as { error?: { code?: unknown } }).error?.code;
    if (typeof code === 'string') t.error_code = code;
  });
}

/** Starts tracking the phases of one attempt; call `release` when the attempt is over. */
export function trackAttempt(attemptId: string): { tracker: PhaseTracker; release: () => void } {
  subscribeOnce();
  const tracker: PhaseTracker = {};
  byAttempt.set(attemptId, tracker);
  return { tracker, release: () => void byAttempt.delete(attemptId) };
}
