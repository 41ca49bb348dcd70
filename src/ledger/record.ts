// The stored form of an event: the exact bytes that are hashed into the chain and the Merkle tree.
// Every adapter stores these bytes verbatim and recomputes nothing from parsed fields, so that
// verification works on the bytes alone.
import { canonicalJson } from '../core/canonical.js';
import { sha256Hex } from '../core/fingerprint.js';
import { EVENT_VERSION, type NewEvent, type StoredEvent } from './events.js';

/** Canonical JSON bytes of a record: `{at,correlation_id,data,kind,operation_id,prev_hash,seq,session_id,v}`. */
export function recordBytes(event: NewEvent, seq: number, prevHash: string): Buffer {
  return Buffer.from(
    canonicalJson({
      at: event.at,
      correlation_id: event.correlation_id,
      data: event.data,
      kind: event.kind,
      operation_id: event.operation_id,
      prev_hash: prevHash,
      seq,
      session_id: event.session_id,
      v: EVENT_VERSION,
    }),
    'utf8',
  );
}

/** Seals an event into its stored form after `prevHash`; returns the record and its bytes. */
export function sealRecord(
  event: NewEvent,
  seq: number,
  prevHash: string,
): { record: StoredEvent; bytes: Buffer } {
  const bytes = recordBytes(event, seq, prevHash);
  const hash = sha256Hex(bytes);
  return {
    record: { ...event, seq, v: EVENT_VERSION, prev_hash: prevHash, hash },
    bytes,
  };
}

/** Parses stored bytes back into a record (the hash is recomputed from the bytes). */
export function parseRecord(bytes: Uint8Array): StoredEvent {
  const obj = JSON.parse(Buffer.from(bytes).toString('utf8')) as Omit<StoredEvent, 'hash'>;
  return { ...obj, hash: sha256Hex(bytes) } as StoredEvent;
}

/** Decodes stored bytes whose hash the writer computed when it sealed them (one hash per record). */
export function decodeSealed(bytes: Uint8Array, hash: string): StoredEvent {
  const obj = JSON.parse(Buffer.from(bytes).toString('utf8')) as Omit<StoredEvent, 'hash'>;
  return { ...obj, hash } as StoredEvent;
}
