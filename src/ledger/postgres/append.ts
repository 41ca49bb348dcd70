// Sealing in the server. A record's canonical text is known before the append lock but for its
// two head-dependent fields: canonical JSON sorts keys, so `"prev_hash":"…","seq":…` sits at a
// fixed place between `operation_id` and `session_id`. The client sends each record as the text
// before and after that place; `candor_append` (created by the v4 migration) takes the append
// lock, assigns the seqs, splices the previous hash and seq in, hashes with the server's
// sha256() and inserts, so the lock covers server work only. The bytes are those `sealRecord`
// writes (store.test.ts compares them).
import pg from 'pg';
import { sha256Hex } from '../../core/fingerprint.js';
import { EVENT_VERSION, GENESIS_HASH, type NewEvent, type StoredEvent } from '../events.js';
import { RELATIVE_SEQ } from './listing.js';
import { decodeSealed, recordTemplate } from '../record.js';

/**
 * SQLSTATE of `candor_append` when an operation's head no longer ends at the seq the fold assumed
 * (`expect_last`, null: no head). Operation locks make that impossible between appends of
 * this version; the check keeps the fold honest against any writer that does not take them.
 */
export const STALE_FOLD = 'CA001';

/**
 * The append under the lock, in one statement. Returns the head before the append and the new
 * records' hashes. Schema 4's function ('listing') ran `writes`, the derived-table statements
 * built by the client with seqs as `$1 + k` (`$1`: the head before the append), after the events,
 * and checked the fold against the listing rows. Schema 6's ('heads') writes the touched
 * operations' heads itself, from arrays (`head_offsets`: the k of the record that ends each, its
 * seq `head_seq + k`), with a statement planned once per session, and checks against the heads.
 */
const appendFunctionSql = (variant: 'listing' | 'heads'): string => `
  CREATE FUNCTION candor_append(
    lock_key bigint, prefixes bytea[], suffixes bytea[], kinds text[], operation_ids text[],
    session_ids text[], correlation_ids text[], ${
      variant === 'listing'
        ? 'writes text[]'
        : 'head_ids text[], head_states text[], head_offsets bigint[], head_folds text[]'
    }, channel text,
    expect_ids text[], expect_last bigint[],
    OUT head_seq bigint, OUT head_hash text, OUT hashes text[]
  ) LANGUAGE plpgsql AS $fn$
  DECLARE
    s bigint;
    h text;
    b bytea;${variant === 'listing' ? '\n    w text;' : ''}
  BEGIN
    PERFORM pg_advisory_xact_lock(lock_key);
    IF EXISTS (
      SELECT 1 FROM unnest(expect_ids, expect_last) AS x(id, last_seq)
      WHERE x.last_seq IS DISTINCT FROM
        (SELECT o.last_seq FROM ${variant === 'listing' ? 'ledger_operations' : 'ledger_heads'} o
          WHERE o.operation_id = x.id)
    ) THEN
      RAISE EXCEPTION 'candor_append: an operation changed since its ${
        variant === 'listing' ? 'listing row' : 'head'
      } was read'
        USING ERRCODE = '${STALE_FOLD}';
    END IF;
    SELECT e.seq, e.hash INTO head_seq, head_hash FROM ledger_events e ORDER BY e.seq DESC LIMIT 1;
    IF head_seq IS NULL THEN
      head_seq := 0;
      head_hash := '${GENESIS_HASH}';
    END IF;
    s := head_seq;
    h := head_hash;
    hashes := '{}';
    FOR i IN 1 .. coalesce(array_length(prefixes, 1), 0) LOOP
      s := s + 1;
      b := prefixes[i] || convert_to(h || '","seq":' || s::text, 'UTF8') || suffixes[i];
      h := encode(sha256(b), 'hex');
      INSERT INTO ledger_events (seq, hash, bytes, kind, operation_id, session_id, correlation_id)
        VALUES (s, h, b, kinds[i], operation_ids[i], session_ids[i], correlation_ids[i]);
      hashes := hashes || h;
    END LOOP;
    ${
      variant === 'listing'
        ? `FOREACH w IN ARRAY writes LOOP
      EXECUTE w USING head_seq;
    END LOOP;`
        : `INSERT INTO ledger_heads (operation_id, state, last_seq, fold)
      SELECT x.id, x.state, head_seq + x.k, x.fold
        FROM unnest(head_ids, head_states, head_offsets, head_folds) AS x(id, state, k, fold)
      ON CONFLICT (operation_id) DO UPDATE
        SET state = excluded.state, last_seq = excluded.last_seq, fold = excluded.fold;`
    }
    IF s > head_seq THEN
      PERFORM pg_notify(channel, s::text);
    END IF;
  END
  $fn$;
`;

/** Schema 4's function: derived-table statements run as given, the fold checked on the listing. */
export const SERVER_APPEND_SQL = appendFunctionSql('listing');

/** Schema 6's function (replacing schema 4's): the heads written by the function itself. */
export const SERVER_APPEND_HEADS_SQL = `
  DROP FUNCTION IF EXISTS candor_append(bigint, bytea[], bytea[], text[], text[], text[], text[],
    text[], text, text[], bigint[]);
  ${appendFunctionSql('heads')}
`;

/** A touched operation's head as the commit writes it (`offset`: k of its last record). */
export interface HeadWrite {
  operation_id: string;
  state: string | null;
  offset: number;
  fold: string | null;
}

/**
 * A transaction-scoped advisory lock key of this schema's ledger: `append` serialises appends
 * (and migrations), `project` one projector batch at a time.
 */
export const ledgerLockKey = (use: 'append' | 'project', schema: string): string =>
  BigInt.asIntN(
    64,
    BigInt(`0x${sha256Hex(`candor-ledger-${use}:${schema}`).slice(0, 16)}`),
  ).toString();

/** A record's canonical text around its head-dependent fields. */
export interface Template {
  event: NewEvent;
  /** Up to and including `"prev_hash":"`. */
  prefix: string;
  /** What follows the seq (from `,"session_id":` on). */
  suffix: string;
}

/**
 * The record text of `event` around its hole (record.ts writes the record's members in order, so
 * nothing is sealed or hashed here: the server hashes each record once). Throws what sealing
 * throws (a batch that cannot be encoded).
 */
export function templateOf(event: NewEvent): Template {
  return { event, ...recordTemplate(event) };
}

/** The record's text once its seq and previous hash are known (what the server hashed). */
export const spliced = (t: Template, seq: number, prevHash: string): string =>
  `${t.prefix}${prevHash}","seq":${seq}${t.suffix}`;

/**
 * Stored-event stand-ins for folding before the seqs are known: seq `RELATIVE_SEQ + k` for the
 * k-th record, which the listing SQL writes as `$1 + k` (see listing.ts).
 */
export const relativeRecords = (templates: readonly Template[]): StoredEvent[] =>
  templates.map((t, k) => ({
    ...t.event,
    seq: RELATIVE_SEQ + k + 1,
    v: EVENT_VERSION,
    prev_hash: '',
    hash: '',
  }));

/** A seq from a relative fold, made absolute after `head`. */
export const absoluteSeq = (seq: number, head: number): number =>
  seq > RELATIVE_SEQ ? seq - RELATIVE_SEQ + head : seq;

const lit = (v: string | null): string => (v === null ? 'NULL' : pg.escapeLiteral(v));
const bytea = (s: string): string => `'\\x${Buffer.from(s, 'utf8').toString('hex')}'`;

/** The `candor_append` call (literals only: it shares one simple-query message with COMMIT). */
export function serverAppendSql(
  lockKey: string,
  templates: readonly Template[],
  heads: readonly HeadWrite[],
  channel: string,
  /** Each touched operation's head's `last_seq` as folded (undefined: no head). */
  expected: ReadonlyMap<string, number | undefined>,
): string {
  const arr = (xs: readonly string[], type: string): string => `ARRAY[${xs.join(', ')}]::${type}[]`;
  const e = templates.map((t) => t.event);
  return `SELECT head_seq, head_hash, hashes FROM candor_append(${lockKey}, ${arr(
    templates.map((t) => bytea(t.prefix)),
    'bytea',
  )}, ${arr(
    templates.map((t) => bytea(t.suffix)),
    'bytea',
  )}, ${arr(
    e.map((x) => lit(x.kind)),
    'text',
  )}, ${arr(
    e.map((x) => lit(x.operation_id)),
    'text',
  )}, ${arr(
    e.map((x) => lit(x.session_id)),
    'text',
  )}, ${arr(
    e.map((x) => lit(x.correlation_id)),
    'text',
  )}, ${arr(
    heads.map((h) => lit(h.operation_id)),
    'text',
  )}, ${arr(
    heads.map((h) => lit(h.state)),
    'text',
  )}, ${arr(
    heads.map((h) => String(h.offset)),
    'bigint',
  )}, ${arr(
    heads.map((h) => lit(h.fold)),
    'text',
  )}, ${lit(channel)}, ${arr([...expected.keys()].map(lit), 'text')}, ${arr(
    [...expected.values()].map((v) => (v === undefined ? 'NULL' : String(v))),
    'bigint',
  )})`;
}

/** The stored records, rebuilt from the templates and what `candor_append` returned. */
export function storedRecords(
  templates: readonly Template[],
  head: { seq: number; hash: string },
  hashes: readonly string[],
): StoredEvent[] {
  let prev = head.hash;
  return templates.map((t, k) => {
    const hash = hashes[k]!;
    const record = decodeSealed(spliced(t, head.seq + k + 1, prev), hash);
    prev = hash;
    return record;
  });
}
