// Idempotency-Key handling after draft-ietf-httpapi-idempotency-key-header: a key is scoped to one
// route (method + path); a request reusing a key with a different payload gets 422; a key whose
// first request is still being processed gets 409; a completed key replays the stored response,
// marked with `idempotent-replayed: true`, and commits nothing. A missing key on a route that
// requires one gets 400. Only 2xx responses are stored: any other result releases the key so a
// corrected request may use it again.
import { canonicalJson } from '../core/canonical.js';
import { sha256Hex } from '../core/fingerprint.js';

export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

export type KeyCheck =
  | { kind: 'fresh'; ticket: KeyTicket }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'payload_mismatch' }
  | { kind: 'in_progress' };

export interface KeyTicket {
  readonly scope: string;
  readonly key: string;
}

interface Entry {
  fingerprint: string;
  state: 'in_progress' | 'done';
  response?: StoredResponse;
}

export class IdempotencyStore {
  private entries = new Map<string, Entry>();

  check(scope: string, key: string, body: Buffer): KeyCheck {
    const id = `${scope}\n${key}`;
    const fingerprint = payloadFingerprint(body);
    const entry = this.entries.get(id);
    if (entry === undefined) {
      this.entries.set(id, { fingerprint, state: 'in_progress' });
      return { kind: 'fresh', ticket: { scope, key } };
    }
    if (entry.fingerprint !== fingerprint) return { kind: 'payload_mismatch' };
    if (entry.state === 'in_progress' || entry.response === undefined)
      return { kind: 'in_progress' };
    return { kind: 'replay', response: structuredClone(entry.response) };
  }

  /** Called when processing has finished (the reply is handed to the socket, or the socket died). */
  settle(ticket: KeyTicket, response: StoredResponse): void {
    const id = `${ticket.scope}\n${ticket.key}`;
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    if (response.status >= 200 && response.status < 300) {
      entry.state = 'done';
      entry.response = structuredClone(response);
    } else {
      this.entries.delete(id);
    }
  }

  clear(): void {
    this.entries.clear();
  }
}

/** JSON bodies compare by meaning (key order and whitespace ignored); anything else by bytes. */
function payloadFingerprint(body: Buffer): string {
  if (body.length === 0) return 'empty';
  try {
    return `json:${sha256Hex(canonicalJson(JSON.parse(body.toString('utf8'))))}`;
  } catch {
    return `bytes:${sha256Hex(body)}`;
  }
}
