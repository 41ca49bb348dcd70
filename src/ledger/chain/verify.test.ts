// Tamper suite: every way of damaging a ledger yields its own code and the first bad seq.
import { describe, expect, it } from 'vitest';
import { GENESIS_HASH, type NewEvent } from '../events.js';
import { sealRecord } from '../record.js';
import { checkpointFor } from './bundle.js';
import { SigType, generateKey, parseSignerKey, type NoteSigner } from './note.js';
import { leafHash, rootOf } from './merkle.js';
import { verifyRecords, type VerifyInput } from './verify.js';

const LOG = generateKey('candor.test/log', SigType.ed25519, Buffer.alloc(32, 1));
const signer: NoteSigner = (() => {
  const s = parseSignerKey(LOG.signerKey);
  if (!s.ok) throw new Error(s.failure);
  return s.value;
})();

const event = (i: number, tag = 'orig'): NewEvent => ({
  kind: 'gate_changed',
  at: 1_767_225_600_000 + i,
  session_id: 'ses_01JTEST0000000000000000000',
  operation_id: null,
  correlation_id: `case-${i}`,
  data: { locked: i % 2 === 0, by: `${tag}-${i}` },
});

/** Seals events in order (what a store does), returning the stored bytes. */
function chain(events: readonly NewEvent[]): Buffer[] {
  let prev = GENESIS_HASH;
  return events.map((e, i) => {
    const { record, bytes } = sealRecord(e, i + 1, prev);
    prev = record.hash;
    return bytes;
  });
}

const ledger = (n: number): Buffer[] => chain(Array.from({ length: n }, (_, i) => event(i + 1)));
const cp = (records: readonly Buffer[], size = records.length): string =>
  checkpointFor(records.slice(0, size), signer);
const verify = (input: VerifyInput) => verifyRecords({ logKeys: [LOG.verifierKey], ...input });

/** Replaces one JSON string value inside a record's bytes (a content edit that keeps it parseable). */
const edit = (bytes: Buffer, from: string, to: string): Buffer => {
  const s = bytes.toString('utf8');
  if (!s.includes(from)) throw new Error(`no ${from}`);
  return Buffer.from(s.replace(from, to), 'utf8');
};

describe('verify: intact logs', () => {
  it('reports INTACT with size, root and checkpoint coverage', () => {
    const recs = ledger(10);
    const r = verify({ records: recs, checkpoints: [cp(recs, 5), cp(recs)] });
    expect(r).toMatchObject({
      ok: true,
      code: 'INTACT',
      first_bad_seq: null,
      size: 10,
      checkpoints: 2,
      signatures_checked: true,
    });
    expect(r.root).toBe(rootOf(recs.map(leafHash)).toString('hex'));
    expect(r.message).toContain('every record is covered');
  });

  it('needs no key: roots are still compared, signatures reported as unchecked', () => {
    const recs = ledger(6);
    const r = verifyRecords({ records: recs, checkpoints: [cp(recs)] });
    expect(r).toMatchObject({ code: 'INTACT', signatures_checked: false, checkpoints: 1 });
    expect(r.message).toContain('6 records intact');
  });

  it('an empty log is intact', () => {
    expect(verify({ records: [] })).toMatchObject({ code: 'INTACT', size: 0, first_bad_seq: null });
  });
});

describe('verify: tamper suite', () => {
  const recs = ledger(10);

  it('MODIFIED: a content edit is pinned to the edited record', () => {
    const bad = [...recs];
    bad[4] = edit(bad[4]!, 'orig-5', 'evil-5');
    expect(verify({ records: bad })).toMatchObject({
      ok: false,
      code: 'MODIFIED',
      first_bad_seq: 5,
    });
  });

  it("MODIFIED: an edit of a record's own prev_hash is pinned to that record", () => {
    const bad = [...recs];
    const s = bad[4]!.toString('utf8');
    bad[4] = Buffer.from(
      s.replace(/"prev_hash":"(.)/, (_m, c: string) => `"prev_hash":"${c === 'a' ? 'b' : 'a'}`),
    );
    expect(verify({ records: bad })).toMatchObject({ code: 'MODIFIED', first_bad_seq: 5 });
  });

  it('MODIFIED: a broken genesis link blames record 1', () => {
    const bad = [...recs];
    bad[0] = edit(bad[0]!, GENESIS_HASH, '1'.repeat(64));
    expect(verify({ records: bad })).toMatchObject({ code: 'MODIFIED', first_bad_seq: 1 });
  });

  it('MODIFIED: an unreadable record in the middle', () => {
    const bad = [...recs];
    bad[6] = Buffer.from('garbage');
    expect(verify({ records: bad })).toMatchObject({ code: 'MODIFIED', first_bad_seq: 7 });
  });

  it('DELETED: a seq gap names the first missing seq', () => {
    const bad = recs.filter((_, i) => i !== 3 && i !== 4);
    const r = verify({ records: bad });
    expect(r).toMatchObject({ code: 'DELETED', first_bad_seq: 4 });
    expect(r.message).toContain('seqs 4..5 are missing');
    expect(verify({ records: recs.slice(1) })).toMatchObject({ code: 'DELETED', first_bad_seq: 1 });
  });

  it('INSERTED: a replayed copy repeats a seq', () => {
    const bad = [...recs.slice(0, 4), recs[3]!, ...recs.slice(4)];
    expect(verify({ records: bad })).toMatchObject({ code: 'INSERTED', first_bad_seq: 4 });
  });

  it('INSERTED: a forged record that links correctly is still caught by the duplicate seq', () => {
    const forged = chain([
      ...Array.from({ length: 3 }, (_, i) => event(i + 1)),
      event(4, 'forged'),
    ])[3]!;
    const bad = [...recs.slice(0, 3), forged, ...recs.slice(3)];
    expect(verify({ records: bad })).toMatchObject({ code: 'INSERTED', first_bad_seq: 4 });
  });

  it('REORDERED: swapped records', () => {
    const bad = [...recs];
    [bad[3], bad[4]] = [bad[4]!, bad[3]!];
    expect(verify({ records: bad })).toMatchObject({ code: 'REORDERED', first_bad_seq: 4 });
  });

  it('ROOT_MISMATCH: a re-chained rewrite passes the chain but not the tree', () => {
    const checkpoints = [cp(recs, 5), cp(recs)];
    const rewritten = chain(
      Array.from({ length: 10 }, (_, i) => event(i + 1, i + 1 >= 7 ? 'evil' : 'orig')),
    );
    expect(verifyRecords({ records: rewritten }).code).toBe('INTACT');
    expect(verify({ records: rewritten, checkpoints })).toMatchObject({
      code: 'ROOT_MISMATCH',
      first_bad_seq: 6,
    });
  });

  it('ROOT_MISMATCH: an edit of the final record is caught by a checkpoint covering it', () => {
    const bad = [...recs];
    bad[9] = edit(bad[9]!, 'orig-10', 'evil-10');
    expect(verify({ records: bad, checkpoints: [cp(recs)] })).toMatchObject({
      code: 'ROOT_MISMATCH',
      first_bad_seq: 1,
    });
  });

  it('TRUNCATED: fewer records than a signed checkpoint covers', () => {
    expect(verify({ records: recs.slice(0, 7), checkpoints: [cp(recs)] })).toMatchObject({
      code: 'TRUNCATED',
      first_bad_seq: 8,
    });
  });

  it('ROLLBACK: the log is shorter than the trusted checkpoint', () => {
    expect(verify({ records: recs.slice(0, 8), trusted: cp(recs) })).toMatchObject({
      code: 'ROLLBACK',
      first_bad_seq: 9,
    });
  });

  it('ROLLBACK: the log was restored and re-grown past the trusted size without a new signature', () => {
    const regrown = chain(
      Array.from({ length: 12 }, (_, i) => event(i + 1, i + 1 >= 6 ? 'again' : 'orig')),
    );
    const r = verify({ records: regrown, checkpoints: [cp(recs, 5)], trusted: cp(recs, 8) });
    expect(r).toMatchObject({ code: 'ROLLBACK', first_bad_seq: 6 });
  });

  it('FORK: two signed checkpoints of one size with different roots', () => {
    const other = chain(
      Array.from({ length: 10 }, (_, i) => event(i + 1, i + 1 >= 9 ? 'fork' : 'orig')),
    );
    const r = verify({ records: recs, checkpoints: [cp(recs, 8), cp(recs), cp(other)] });
    expect(r).toMatchObject({ code: 'FORK', first_bad_seq: 9 });
  });

  it('FORK: the log signed a history inconsistent with the trusted checkpoint', () => {
    const other = chain(
      Array.from({ length: 12 }, (_, i) => event(i + 1, i + 1 >= 4 ? 'fork' : 'orig')),
    );
    const r = verify({ records: other, checkpoints: [cp(other)], trusted: cp(recs, 8) });
    expect(r).toMatchObject({ code: 'FORK', first_bad_seq: 1 });
  });

  it('BAD_CHECKPOINT: a tampered note, a wrong key, an unknown origin', () => {
    const good = cp(recs);
    const tampered = good.replace('\n10\n', '\n11\n');
    expect(verify({ records: recs, checkpoints: [tampered] })).toMatchObject({
      code: 'BAD_CHECKPOINT',
      first_bad_seq: null,
    });
    const stranger = generateKey('candor.test/log', SigType.ed25519, Buffer.alloc(32, 9));
    expect(
      verifyRecords({ records: recs, checkpoints: [good], logKeys: [stranger.verifierKey] }).code,
    ).toBe('BAD_CHECKPOINT');
    const r = verify({ records: recs, checkpoints: [good], origin: 'elsewhere/log' });
    expect(r).toMatchObject({ code: 'BAD_CHECKPOINT' });
    expect(r.message).toContain('origin');
    expect(verify({ records: recs, trusted: tampered })).toMatchObject({ code: 'BAD_CHECKPOINT' });
  });

  it('TORN_TAIL: an incomplete final record is a crash, with the intact prefix reported', () => {
    const torn = [...recs.slice(0, 9), recs[9]!.subarray(0, 40)];
    const r = verify({ records: torn, checkpoints: [cp(recs, 9)] });
    expect(r).toMatchObject({ ok: false, code: 'TORN_TAIL', first_bad_seq: 10, size: 9 });
    expect(r.root).toBe(rootOf(recs.slice(0, 9).map(leafHash)).toString('hex'));
  });

  it('a torn final record that a checkpoint covers is MODIFIED, not a crash', () => {
    const torn = [...recs.slice(0, 9), recs[9]!.subarray(0, 40)];
    expect(verify({ records: torn, checkpoints: [cp(recs)] })).toMatchObject({
      code: 'MODIFIED',
      first_bad_seq: 10,
    });
  });
});

describe('verify: checkpoints carried by checkpoint events', () => {
  /** Records 1..5, then a checkpoint event for size 5, then records 7..9. */
  function withEmbedded(tag: (i: number) => string): { records: Buffer[]; note: string } {
    const first = chain(Array.from({ length: 5 }, (_, i) => event(i + 1, tag(i + 1))));
    const note = checkpointFor(first, signer);
    const root = rootOf(first.map(leafHash)).toString('hex');
    const events: NewEvent[] = [
      ...Array.from({ length: 5 }, (_, i) => event(i + 1, tag(i + 1))),
      {
        kind: 'checkpoint',
        at: 1_767_225_700_000,
        session_id: null,
        operation_id: null,
        correlation_id: null,
        data: { size: 5, root_hash: root, note },
      },
      ...[7, 8, 9].map((i) => event(i, tag(i))),
    ];
    return { records: chain(events), note };
  }

  it('uses them: intact, and a re-chained rewrite before them is caught', () => {
    const good = withEmbedded(() => 'orig');
    expect(verify({ records: good.records })).toMatchObject({ code: 'INTACT', checkpoints: 1 });
    const rewritten = [
      ...chain(Array.from({ length: 5 }, (_, i) => event(i + 1, i + 1 === 3 ? 'evil' : 'orig'))),
    ];
    const evil = withEmbedded((i) => (i === 3 ? 'evil' : 'orig'));
    // Splice the honest note into the rewritten log: the attacker cannot re-sign.
    const forged = chain([
      ...Array.from({ length: 5 }, (_, i) => event(i + 1, i + 1 === 3 ? 'evil' : 'orig')),
      {
        kind: 'checkpoint',
        at: 1_767_225_700_000,
        session_id: null,
        operation_id: null,
        correlation_id: null,
        data: {
          size: 5,
          root_hash: rootOf(rewritten.map(leafHash)).toString('hex'),
          note: good.note,
        },
      },
    ]);
    expect(evil.records.length).toBe(9);
    const r = verify({ records: forged });
    expect(r).toMatchObject({ code: 'BAD_CHECKPOINT', first_bad_seq: 6 });
    const honestFields = chain([
      ...Array.from({ length: 5 }, (_, i) => event(i + 1, i + 1 === 3 ? 'evil' : 'orig')),
      {
        kind: 'checkpoint',
        at: 1_767_225_700_000,
        session_id: null,
        operation_id: null,
        correlation_id: null,
        data: {
          size: 5,
          root_hash: rootOf(
            chain(Array.from({ length: 5 }, (_, i) => event(i + 1))).map(leafHash),
          ).toString('hex'),
          note: good.note,
        },
      },
    ]);
    expect(verify({ records: honestFields })).toMatchObject({
      code: 'ROOT_MISMATCH',
      first_bad_seq: 1,
    });
  });
});
