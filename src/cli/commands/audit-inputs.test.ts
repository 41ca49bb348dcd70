// What `candor audit verify` is given, as opposed to what it judges: a malformed key, a key of the
// wrong kind or a non-UTF-8 trusted checkpoint is a usage error (exit 2, one line naming the flag),
// never a verdict on the bundle; the report says which keys it was given; and a bundle's own text
// (a 1 MB origin) reaches a message only cut and escaped.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkpointFor, writeBundle } from '../../ledger/chain/bundle.js';
import { storedBytes } from '../../ledger/chain/export.js';
import { generateKey, parseSignerKey, SigType } from '../../ledger/chain/note.js';
import { openMemoryLedger } from '../../ledger/memory/store.js';
import { main } from '../main.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-audit-inputs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ORIGIN = 'candor.test/inputs-log';
const logKey = generateKey(ORIGIN);
const witnessKey = generateKey('witness.test/inputs', SigType.cosignature_v1);
const bundle = join(dir, 'b.bundle');
const longOrigin = join(dir, 'long-origin.bundle');

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(args, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}

beforeAll(async () => {
  const ledger = openMemoryLedger();
  for (let i = 1; i <= 3; i++)
    await ledger.append([
      {
        kind: 'gate_changed',
        at: 1_767_225_600_000 + i,
        session_id: null,
        operation_id: null,
        correlation_id: `c-${i}`,
        data: { locked: false, by: `operator-${i}` },
      },
    ]);
  const records = (await ledger.read()).map((r) => storedBytes(r));
  const signer = parseSignerKey(logKey.signerKey);
  if (!signer.ok) throw new Error(signer.failure);
  const cp = checkpointFor(records, signer.value);
  await writeBundle(bundle, {
    origin: ORIGIN,
    logKey: logKey.verifierKey,
    records,
    checkpoints: [cp],
  });
  // The header claims a 1 MB origin (with a right-to-left override in it); the checkpoint another.
  await writeBundle(longOrigin, {
    origin: `\u202e${'o'.repeat(1024 * 1024)}`,
    logKey: logKey.verifierKey,
    records,
    checkpoints: [cp],
  });
});

describe('candor audit verify: key mistakes are usage errors naming the flag', () => {
  const cases: [string, () => string[], RegExp][] = [
    [
      'a malformed --witness-key',
      () => ['--witness-key', 'junk+1+2'],
      /^candor audit: --witness-key: "junk\+1\+2" is not a verifier key: /,
    ],
    [
      'a malformed --log-key',
      () => ['--log-key', 'junk+1+2'],
      /^candor audit: --log-key: "junk\+1\+2" is not a verifier key: /,
    ],
    [
      'a witness key given as --log-key',
      () => ['--log-key', witnessKey.verifierKey],
      /^candor audit: --log-key: witness\.test\/inputs\+[0-9a-f]{8} is a witness \(cosignature\) key; pass it with --witness-key\n$/,
    ],
    [
      'a log key given as --witness-key',
      () => ['--log-key', logKey.verifierKey, '--witness-key', logKey.verifierKey],
      /^candor audit: --witness-key: candor\.test\/inputs-log\+[0-9a-f]{8} is a log \(Ed25519\) key; pass it with --log-key\n$/,
    ],
  ];
  for (const [what, flags, line] of cases) {
    it(`${what}: exit 2, one line, nothing on stdout`, async () => {
      const r = await cli(['audit', 'verify', bundle, ...flags()]);
      expect(r.code).toBe(2);
      expect(r.out).toBe('');
      expect(r.err.split('\n')).toHaveLength(2);
      expect(r.err).toMatch(line);
    });
  }

  it('a non-UTF-8 --trusted file is named as such, not as an invalid signature', async () => {
    const trusted = join(dir, 'trusted.cp');
    const signer = parseSignerKey(logKey.signerKey);
    if (!signer.ok) throw new Error(signer.failure);
    writeFileSync(
      trusted,
      Buffer.concat([Buffer.from('candor.test/inputs-log\n3\n'), Buffer.from([0xff, 0xfe, 0x0a])]),
    );
    const r = await cli([
      'audit',
      'verify',
      bundle,
      '--log-key',
      logKey.verifierKey,
      '--trusted',
      trusted,
    ]);
    expect(r.code).toBe(2);
    // The file's own name survives however long the temporary folder's path is (a cut path keeps
    // its end and says how long it was).
    expect(r.err).toMatch(
      /^candor audit: --trusted: ".*trusted\.cp"( \(\d+ characters\))? is not valid UTF-8 text/,
    );
    expect(r.err).not.toMatch(/signature is invalid|invalid signature/);
  });

  it('the report says exactly which keys it was given', async () => {
    const r = await cli([
      'audit',
      'verify',
      bundle,
      '--log-key',
      logKey.verifierKey,
      '--witness-key',
      witnessKey.verifierKey,
    ]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(
      /^keys given: --log-key candor\.test\/inputs-log\+[0-9a-f]{8}; --witness-key witness\.test\/inputs\+[0-9a-f]{8}$/m,
    );
    expect(r.out).toContain('log key: anchored (given with --log-key)');
    const none = await cli(['audit', 'verify', bundle]);
    expect(none.out).toMatch(/^keys given: --log-key none; --witness-key none$/m);
  });
});

describe('candor audit verify: bundle text in messages', () => {
  it('a 1 MB origin is quoted cut and escaped: the message stays within 200 characters', async () => {
    const r = await cli(['audit', 'verify', longOrigin, '--log-key', logKey.verifierKey]);
    expect(r.code).toBe(1);
    const first = r.out.split('\n')[0]!;
    expect(first).toMatch(/^BAD_CHECKPOINT/);
    expect(first).toContain('origin');
    expect(first.length).toBeLessThanOrEqual(200);
    expect(first).not.toContain('\u202e');
    expect(r.out.length).toBeLessThan(4_000);
  });
});

describe('candor audit status', () => {
  it('reports a witness fork with both sizes (exit 1)', async () => {
    const { openLedger } = await import('../../ledger/open.js');
    const url = `sqlite:${join(dir, 'status.db')}`;
    const opened = await openLedger(url);
    if (!opened.ok) throw new Error(opened.failure.message);
    await opened.value.append([
      {
        kind: 'checkpoint',
        at: 1_767_225_600_000,
        session_id: null,
        operation_id: null,
        correlation_id: null,
        data: {
          size: 4,
          root_hash: '00'.repeat(32),
          note: 'n',
          witnessed: false,
          witness_problem:
            "possible fork or rollback: the witness has cosigned a tree of size 50 of this log, larger than this checkpoint's size 4",
          witness_problem_code: 'fork',
          witness_size: 50,
        },
      },
    ]);
    await opened.value.close();
    const r = await cli(['audit', 'status', '--ledger', url]);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/^newest checkpoint: seq 1, size 4, NOT witnessed \(fork: /);
    expect(r.out).toContain(
      'POSSIBLE FORK OR ROLLBACK: the witness has cosigned a tree of size 50 of this log; the checkpoint at seq 1 has size 4',
    );
  });
});
