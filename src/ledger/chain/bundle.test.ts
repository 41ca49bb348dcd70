import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { GENESIS_HASH, type NewEvent } from '../events.js';
import { openMemoryLedger } from '../memory/store.js';
import { sealRecord } from '../record.js';
import { checkpointFor, encodeBundle, parseBundle, readBundle, verifyBundle } from './bundle.js';
import { verifyBundleFile } from './bundle-file.js';
import { cosignatureLine } from './checkpoint.js';
import { exportBundle, readStoreRecords, verifyStore } from './export.js';
import { leafHash, rootOf } from './merkle.js';
import { SigType, generateKey, parseSignerKey, type NoteSigner } from './note.js';

const signerOf = (k: string, now?: () => number): NoteSigner => {
  const s = parseSignerKey(k, now);
  if (!s.ok) throw new Error(s.failure);
  return s.value;
};
const LOG = generateKey('candor.test/log', SigType.ed25519, Buffer.alloc(32, 1));
const WIT = generateKey('witness.test/w1', SigType.cosignature_v1, Buffer.alloc(32, 2));
const log = signerOf(LOG.signerKey);
const witness = signerOf(WIT.signerKey, () => 1_767_225_600_000);

const event = (i: number): NewEvent => ({
  kind: 'attempt_finished',
  at: 1_767_225_600_000 + i,
  session_id: 'ses_01JTEST0000000000000000000',
  operation_id: `op_01JTEST00000000000000000${String(i).padStart(2, '0')}`,
  correlation_id: `case-${i}`,
  data: {
    attempt_id: `att_${i}`,
    dispatch_state: 'sent_no_response',
    category: 'outcome_unknown',
    retry: 'reconcile_first',
    remote_effect: 'unknown',
    rule: 'read_timeout_after_send',
    phases: { started_at: i, request_sent_at: i + 1 },
    response: null,
    duration_ms: 1000 + i,
    diagnostics_ref: `diag_${i} "quoted" \u00e9`,
    diagnostics: null,
  },
});

/** n records with a checkpoint event (for the first `at - 1` records) at seq `at`. */
function ledgerWithCheckpoint(n: number, at: number): Buffer[] {
  const out: Buffer[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const e: NewEvent =
      seq === at
        ? {
            kind: 'checkpoint',
            at: 1_767_225_650_000,
            session_id: null,
            operation_id: null,
            correlation_id: null,
            data: {
              size: at - 1,
              root_hash: rootOf(out.map(leafHash)).toString('hex'),
              note: checkpointFor(out, log),
            },
          }
        : event(seq);
    const { record, bytes } = sealRecord(e, seq, prev);
    prev = record.hash;
    out.push(bytes);
  }
  return out;
}

/** A full bundle: every record covered by a log checkpoint that a witness cosigned. */
function fullBundle(records: Buffer[]): Buffer {
  const note = checkpointFor(records, log);
  const text = note.slice(0, note.lastIndexOf('\n\n') + 1);
  const cosig = cosignatureLine(text, witness);
  if (!cosig.ok) throw new Error(cosig.failure);
  return encodeBundle({
    origin: log.name,
    logKey: LOG.verifierKey,
    witnessKeys: [WIT.verifierKey],
    records,
    checkpoints: [checkpointFor(records.slice(0, 7), log), note + cosig.value],
  });
}

const dir = mkdtempSync(join(tmpdir(), 'candor-bundle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bundle format', () => {
  const records = ledgerWithCheckpoint(24, 12);
  const bytes = fullBundle(records);

  it('round-trips and verifies intact, witnessed to the full size', () => {
    const b = parseBundle(bytes);
    expect(b.problem).toBeNull();
    expect(b.records.map((r) => r.toString('hex'))).toEqual(records.map((r) => r.toString('hex')));
    expect(
      verifyBundle(b, { logKeys: [LOG.verifierKey], witnessKeys: [WIT.verifierKey] }),
    ).toMatchObject({
      ok: true,
      code: 'INTACT',
      size: 24,
      checkpoints: 3,
      witnessed_size: 24,
      witnessed_by: ['witness.test/w1'],
      claimed_witnesses: [],
      signatures_checked: true,
      log_key: 'anchored',
    });
  });

  it("without the auditor's keys the bundle's own keys are only claimed", () => {
    expect(verifyBundle(parseBundle(bytes))).toMatchObject({
      ok: true,
      code: 'INTACT',
      signatures_checked: true,
      log_key: 'claimed',
      witnessed_size: 0,
      witnessed_by: [],
      claimed_witnessed_size: 24,
      claimed_witnesses: [WIT.verifierKey.split('+').slice(0, 2).join('+')],
    });
  });

  it('stores canonical records verbatim, one per line, and odd bytes as base64', () => {
    const lines = bytes.toString('utf8').split('\n');
    expect(lines[1]).toBe(records[0]!.toString('utf8'));
    const torn = [...records.slice(0, 3), Buffer.from('\u0000{"at":1\n')];
    const b = parseBundle(encodeBundle({ origin: null, logKey: null, records: torn }));
    expect(b.records[3]).toEqual(torn[3]);
    expect(verifyBundle(b)).toMatchObject({ code: 'TORN_TAIL', first_bad_seq: 4, size: 3 });
  });

  it('reports framing damage: cut short, extra records, damaged header', () => {
    const text = bytes.toString('utf8');
    const cut = Buffer.from(text.slice(0, text.lastIndexOf('{"end"')));
    expect(verifyBundle(parseBundle(cut))).toMatchObject({ code: 'TRUNCATED' });
    const lines = text.split('\n');
    const extra = [...lines.slice(0, 25), lines[24]!, ...lines.slice(25)].join('\n');
    expect(verifyBundle(parseBundle(Buffer.from(extra)))).toMatchObject({
      code: 'INSERTED',
      first_bad_seq: 24,
    });
    const header = Buffer.from(
      text.replace('"origin":"candor.test/log"', '"origin":"candor.test/lag"'),
    );
    expect(verifyBundle(parseBundle(header))).toMatchObject({ code: 'BAD_CHECKPOINT' });
  });

  /** The bundle with lines i and j (1-based; line 1 is the header) swapped. */
  const swapLines = (b: Buffer, i: number, j: number): Buffer => {
    const lines = b.toString('utf8').split('\n');
    [lines[i - 1], lines[j - 1]] = [lines[j - 1]!, lines[i - 1]!];
    return Buffer.from(lines.join('\n'));
  };
  const dropLine = (b: Buffer, i: number): Buffer => {
    const lines = b.toString('utf8').split('\n');
    lines.splice(i - 1, 1);
    return Buffer.from(lines.join('\n'));
  };

  it('streaming file verification agrees with in-memory verification (any chunk size)', async () => {
    const text = bytes.toString('utf8');
    const variants: [string, Buffer][] = [
      ['intact', bytes],
      ['edited', Buffer.from(text.replace('case-5"', 'case-X"'))],
      ['cut', Buffer.from(text.slice(0, text.lastIndexOf('{"end"')))],
      ['unterminated', bytes.subarray(0, bytes.length - 1)],
      ['swapped', swapLines(bytes, 4, 5)],
      ['dropped', dropLine(bytes, 7)],
      [
        'torn',
        encodeBundle({
          origin: null,
          logKey: null,
          records: [...records.slice(0, 5), records[5]!.subarray(0, 30)],
        }),
      ],
    ];
    for (const [name, data] of variants) {
      const path = join(dir, `${name}.jsonl`);
      writeFileSync(path, data);
      const mem = verifyBundle(parseBundle(data));
      for (const chunkSize of [7, 64, 1000, 1 << 20]) {
        for (const [workers, readerHashes] of [
          [0, true],
          [1, false],
          [2, true],
        ] as const) {
          const label = `${name} @${chunkSize} with ${workers} workers, ${readerHashes}`;
          const r = await verifyBundleFile(path, { chunkSize, workers, readerHashes });
          expect(r, label).toEqual(mem);
        }
      }
    }
  });

  it('anchored keys override the key the bundle carries', () => {
    const other = generateKey('candor.test/log', SigType.ed25519, Buffer.alloc(32, 3));
    const r = verifyBundle(parseBundle(bytes), { logKeys: [other.verifierKey] });
    expect(r).toMatchObject({ code: 'BAD_CHECKPOINT' });
  });

  it('shows every random single-byte change of an exported bundle (seeded property)', () => {
    const seed = 20_260_101;
    let runs = 0;
    const codes = new Map<string, number>();
    fc.assert(
      fc.property(fc.nat(bytes.length - 1), fc.integer({ min: 1, max: 255 }), (pos, xor) => {
        const flipped = Buffer.from(bytes);
        flipped[pos]! ^= xor;
        const r = verifyBundle(parseBundle(flipped));
        runs++;
        codes.set(r.code, (codes.get(r.code) ?? 0) + 1);
        // A signature line whose key name or ID was hit belongs to an unknown key: the spec says
        // ignore it, so the verdict may stay INTACT, but the report must show the ignored line.
        if (r.code === 'INTACT' && r.ignored_signatures.length === 0) {
          throw new Error(
            `undetected change at byte ${pos} (xor ${xor}); replay with seed ${seed}`,
          );
        }
      }),
      { seed, numRuns: 1200 },
    );
    expect(runs).toBe(1200);
    // The record codes dominate: most bytes of a bundle are record bytes.
    expect(codes.get('MODIFIED') ?? 0).toBeGreaterThan(400);
  });
});

describe('file verification on one thread and on several', () => {
  /** Seals events 1..n, with `edit(i)` replacing event i where it returns one (then re-chained). */
  const sealed = (n: number, edit: (i: number) => NewEvent | undefined = () => undefined) => {
    const out: Buffer[] = [];
    let prev = GENESIS_HASH;
    for (let seq = 1; seq <= n; seq++) {
      const { record, bytes } = sealRecord(edit(seq) ?? event(seq), seq, prev);
      prev = record.hash;
      out.push(bytes);
    }
    return out;
  };
  const n = 40;
  const recs = sealed(n);
  const cp = (r: readonly Buffer[], size = r.length): string =>
    checkpointFor(r.slice(0, size), log);
  const rechained = sealed(n, (i) =>
    i === 17 ? { ...event(17), correlation_id: 'case-x' } : undefined,
  );
  const edited = recs.map((r, i) =>
    i === 9 ? Buffer.from(r.toString('utf8').replace('"case-10"', '"case-Y"')) : r,
  );
  const bundle = (records: readonly Buffer[], checkpoints: string[]): Buffer =>
    encodeBundle({ origin: log.name, logKey: LOG.verifierKey, records, checkpoints });
  const torn = [...recs.slice(0, n - 1), recs[n - 1]!.subarray(0, 40)];
  const cases: [string, Buffer, { trusted?: string }, string, number | null][] = [
    ['intact', bundle(recs, [cp(recs, 20), cp(recs)]), {}, 'INTACT', null],
    ['MODIFIED', bundle(edited, [cp(recs)]), {}, 'MODIFIED', 10],
    ['DELETED', bundle([...recs.slice(0, 12), ...recs.slice(13)], []), {}, 'DELETED', 13],
    [
      'INSERTED',
      bundle([...recs.slice(0, 30), recs[25]!, ...recs.slice(30)], []),
      {},
      'INSERTED',
      26,
    ],
    [
      'REORDERED',
      bundle([...recs.slice(0, 5), recs[6]!, recs[5]!, ...recs.slice(7)], []),
      {},
      'REORDERED',
      6,
    ],
    ['ROOT_MISMATCH', bundle(rechained, [cp(recs, 10), cp(recs)]), {}, 'ROOT_MISMATCH', 11],
    ['TRUNCATED', bundle(recs.slice(0, 30), [cp(recs)]), {}, 'TRUNCATED', 31],
    ['ROLLBACK', bundle(recs.slice(0, 30), []), { trusted: cp(recs) }, 'ROLLBACK', 31],
    ['FORK', bundle(recs, [cp(recs), cp(rechained)]), {}, 'FORK', 1],
    [
      'BAD_CHECKPOINT',
      bundle(recs, [cp(recs).replace(`\n${n}\n`, `\n${n - 1}\n`)]),
      {},
      'BAD_CHECKPOINT',
      null,
    ],
    ['TORN_TAIL', bundle(torn, []), {}, 'TORN_TAIL', n],
  ];

  it('every verdict and first bad seq is the same on every hashing path, at any chunk size', async () => {
    for (const [name, data, opts, code, firstBad] of cases) {
      const path = join(dir, `paths-${name}.jsonl`);
      writeFileSync(path, data);
      const mem = verifyBundle(parseBundle(data), opts);
      expect(mem, name).toMatchObject({ code, first_bad_seq: firstBad });
      // Small chunks put a few records in each and cycle the shared chunks many times. Paths:
      // every chunk hashed by the reading thread; every chunk by the workers; and shared (the
      // reading thread hashes what the workers have no room for or have not started).
      const paths = [
        { workers: 0 },
        { workers: 1, readerHashes: false },
        { workers: 2, readerHashes: false },
        { workers: 2 },
      ];
      for (const chunkSize of [300, 1 << 20]) {
        for (const path_ of paths) {
          const r = await verifyBundleFile(path, { ...opts, chunkSize, ...path_ });
          expect(r, `${name} @${chunkSize} ${JSON.stringify(path_)}`).toEqual(mem);
        }
      }
    }
  });

  it('roots at every size agree between the two paths (checkpoints at each size)', async () => {
    const path = join(dir, 'paths-every-size.jsonl');
    const all = Array.from({ length: n }, (_, i) => cp(recs, i + 1));
    writeFileSync(path, bundle(recs, all));
    const two = await verifyBundleFile(path, { chunkSize: 500, workers: 1 });
    expect(two).toMatchObject({ code: 'INTACT', checkpoints: n, size: n });
    expect(two.root).toBe(rootOf(recs.map(leafHash)).toString('hex'));
    // One record's leaf changed: each checkpoint from its size on must be the one that fails.
    const bad = bundle(rechained, all);
    writeFileSync(path, bad);
    const r = await verifyBundleFile(path, { chunkSize: 500, workers: 1 });
    expect(r).toMatchObject({ code: 'ROOT_MISMATCH', first_bad_seq: 17 });
    expect(r).toEqual(await verifyBundleFile(path, { workers: 0 }));
  });
});

describe('export and verify through the LedgerStore port', () => {
  it('exports a memory store, signs a covering checkpoint, and both paths verify', async () => {
    const store = openMemoryLedger();
    await store.append(Array.from({ length: 30 }, (_, i) => event(i + 1)));
    const out = join(dir, 'export.jsonl');
    const summary = await exportBundle(store, out, { signer: log, witnessKeys: [WIT.verifierKey] });
    expect(summary).toMatchObject({ records: 30, checkpoints: 1, mismatched: [] });
    const b = await readBundle(out);
    expect(b.header).toMatchObject({ origin: 'candor.test/log', log_key: LOG.verifierKey });
    expect(verifyBundle(b)).toMatchObject({ code: 'INTACT', size: 30, checkpoints: 1 });
    expect(
      await verifyStore(store, { logKeys: [LOG.verifierKey], checkpoints: b.checkpoints }),
    ).toMatchObject({ code: 'INTACT', size: 30 });
    expect(readFileSync(out, 'utf8').split('\n').length).toBe(30 + 4);
    await store.close();
  });

  it('drops checkpoint signature lines from keys the bundle does not list', async () => {
    const store = openMemoryLedger();
    await store.append([event(1), event(2)]);
    const { records } = await readStoreRecords(store);
    const note = checkpointFor(records, log);
    const text = note.slice(0, note.lastIndexOf('\n\n') + 1);
    const stranger = signerOf(
      generateKey('stranger/w', SigType.cosignature_v1, Buffer.alloc(32, 5)).signerKey,
    );
    const line = cosignatureLine(text, stranger);
    if (!line.ok) throw new Error(line.failure);
    const out = join(dir, 'drop.jsonl');
    const summary = await exportBundle(store, out, {
      logKey: LOG.verifierKey,
      origin: log.name,
      checkpoints: [note + line.value],
    });
    expect(summary).toMatchObject({ records: 2, checkpoints: 1, dropped_checkpoints: 0 });
    const b = await readBundle(out);
    expect(b.checkpoints).toEqual([note]);
    expect(verifyBundle(b)).toMatchObject({ code: 'INTACT', size: 2, checkpoints: 1 });
    await store.close();
  });
});
