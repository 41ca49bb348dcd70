// The stored form of an event: the exact bytes that are hashed into the chain and the Merkle tree.
// Every adapter stores these bytes verbatim and recomputes nothing from parsed fields, so that
// verification works on the bytes alone.
import { hash } from 'node:crypto';
import { canonicalJson } from '../core/canonical.js';
import { merged } from '../core/merge.js';
import { EVENT_VERSION, type NewEvent, type StoredEvent } from './events.js';

/**
 * A record's canonical text around its two head-dependent members: `prefix` runs up to and
 * including `"prev_hash":"`, `suffix` is what follows the seq (from `,"session_id":` on). The
 * record's members are written in their canonical (sorted) order directly, so only `data` is
 * walked by the canonical encoder: no record object is built and no key list sorted per record.
 * Members that are `undefined` are left out, as canonicalJson leaves them out.
 */
export interface RecordTemplate {
  prefix: string;
  suffix: string;
}

/** `"key":value,` for a member canonicalJson would write, else nothing. */
const member = (key: string, value: unknown): string =>
  value === undefined ? '' : `"${key}":${canonicalJson(value)},`;

export function recordTemplate(event: NewEvent): RecordTemplate {
  // Sorted by UTF-16 code units: at, correlation_id, data, kind, operation_id, prev_hash, seq,
  // session_id, v.
  const head =
    member('at', event.at) +
    member('correlation_id', event.correlation_id) +
    member('data', event.data) +
    member('kind', event.kind) +
    member('operation_id', event.operation_id);
  const session =
    event.session_id === undefined ? '' : `,"session_id":${canonicalJson(event.session_id)}`;
  return { prefix: `{${head}"prev_hash":"`, suffix: `${session},"v":${EVENT_VERSION}}` };
}

/** The canonical JSON text of a record (what `recordBytes` encodes as UTF-8). */
function recordText(event: NewEvent, seq: number, prevHash: string): string {
  const t = recordTemplate(event);
  // The prefix ends inside the quotes of prev_hash: its value is written without them.
  const prev = canonicalJson(prevHash).slice(1, -1);
  return `${t.prefix}${prev}","seq":${canonicalJson(seq)}${t.suffix}`;
}

/** Canonical JSON bytes of a record: `{at,correlation_id,data,kind,operation_id,prev_hash,seq,session_id,v}`. */
export function recordBytes(event: NewEvent, seq: number, prevHash: string): Buffer {
  return Buffer.from(recordText(event, seq, prevHash), 'utf8');
}

/** A record as sealed by a writer: its fields, its stored bytes and the text they encode. */
export interface SealedRecord {
  record: StoredEvent;
  bytes: Buffer;
  /** `bytes` as a string (decoded once, by the writer that encoded them). */
  text: string;
}

/**
 * Seals an event into its stored form after `prevHash`: one canonical encoding and one SHA-256
 * per record (the hash is taken over the same UTF-8 bytes that are stored).
 */
export function sealRecord(event: NewEvent, seq: number, prevHash: string): SealedRecord {
  const text = recordText(event, seq, prevHash);
  const bytes = Buffer.from(text, 'utf8');
  return {
    // Built key by key (merged): extending a spread object takes V8's slow path (see core/merge.ts).
    record: merged(event, {
      seq,
      v: EVENT_VERSION,
      prev_hash: prevHash,
      hash: sha256(bytes),
    }) as StoredEvent,
    bytes,
    text,
  };
}

/** SHA-256 of the bytes, lowercase hex (one-shot: no Hash object per record). */
function sha256(bytes: Uint8Array): string {
  return hash('sha256', bytes, 'hex');
}

/** The UTF-8 text of stored bytes, without copying a Buffer first. */
function utf8(bytes: Uint8Array): string {
  return (
    Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  ).toString('utf8');
}

/** Parses stored bytes back into a record (the hash is recomputed from the bytes). */
export function parseRecord(bytes: Uint8Array): StoredEvent {
  return decodeSealed(bytes, sha256(bytes));
}

/**
 * Decodes stored bytes (or their text) whose hash the writer computed when it sealed them (one
 * hash per record). The parsed object is fresh, so `hash` is added to it in place: it comes last,
 * as it would with a spread.
 */
export function decodeSealed(bytes: Uint8Array | string, hash: string): StoredEvent {
  const obj = JSON.parse(typeof bytes === 'string' ? bytes : utf8(bytes)) as Record<
    string,
    unknown
  >;
  obj.hash = hash;
  return obj as unknown as StoredEvent;
}
