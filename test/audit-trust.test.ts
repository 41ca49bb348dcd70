// What an auditor's verification trusts (issue: a bundle cannot vouch for itself). Only keys the
// auditor gives count: a witness key added to a bundle's header, with its cosignature, is reported
// "claimed, not trusted" and does not raise the witnessed size; the real witness key given to both
// export and verify is one key, not an ambiguous pair; a signature line from an unknown key is
// ignored (as the C2SP signed-note spec requires) and reported.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as audit } from '../src/cli/commands/audit.js';
import { cosignatureLine } from '../src/ledger/chain/checkpoint.js';
import { createCheckpointer } from '../src/ledger/chain/checkpointer.js';
import { verifyStore } from '../src/ledger/chain/export.js';
import {
  generateKey,
  parseSignerKey,
  parseVerifierKey,
  SigType,
  type NoteSigner,
} from '../src/ledger/chain/note.js';
import {
  memoryWitnessState,
  startWitness,
  type RunningWitness,
} from '../src/ledger/chain/witness.js';
import { opened } from '../src/ledger/contract.case.js';
import { openLedger } from '../src/ledger/open.js';

const ORIGIN = 'candor.test/trust-log';
const LOG = generateKey(ORIGIN, SigType.ed25519, Buffer.alloc(32, 11));
const WIT = generateKey('witness.test/real', SigType.cosignature_v1, Buffer.alloc(32, 12));
const EVIL = generateKey('witness.test/evil', SigType.cosignature_v1, Buffer.alloc(32, 13));
const signer = (k: string): NoteSigner => {
  const s = parseSignerKey(k);
  if (!s.ok) throw new Error(s.failure);
  return s.value;
};

const dir = mkdtempSync(join(tmpdir(), 'candor-audit-trust-'));
const url = `sqlite:${join(dir, 'ledger.db')}`;
let witness: RunningWitness;
let total = 0;

function capture(): {
  io: { out: (s: string) => void; err: (s: string) => void };
  out: () => string;
  err: () => string;
} {
  let out = '';
  let err = '';
  return {
    io: { out: (s) => void (out += s), err: (s) => void (err += s) },
    out: () => out,
    err: () => err,
  };
}

/** Adds `checkpoint`'s cosignature line by `by` to the last checkpoint line of a bundle. */
function cosignLastCheckpoint(bundle: string, by: NoteSigner, headerKey?: string): string {
  const lines = bundle.split('\n');
  const at = lines.findLastIndex((l) => l.startsWith('{"checkpoint":'));
  const note = (JSON.parse(lines[at]!) as { checkpoint: string }).checkpoint;
  const cosig = cosignatureLine(note.slice(0, note.lastIndexOf('\n\n') + 1), by);
  if (!cosig.ok) throw new Error(cosig.failure);
  lines[at] = JSON.stringify({ checkpoint: note + cosig.value });
  if (headerKey) {
    const header = JSON.parse(lines[0]!) as { witness_keys: string[] };
    header.witness_keys.push(headerKey);
    // Canonical JSON: keys sorted, no spaces (the header keys are already in order).
    lines[0] = JSON.stringify(header);
  }
  return lines.join('\n');
}

beforeAll(async () => {
  const log = parseVerifierKey(LOG.verifierKey);
  if (!log.ok) throw new Error(log.failure);
  witness = await startWitness({
    signer: signer(WIT.signerKey),
    logs: [log.value],
    state: memoryWitnessState(),
  });
  const o = await openLedger(url);
  if (!o.ok) throw new Error(o.failure.message);
  const wkey = parseVerifierKey(WIT.verifierKey);
  if (!wkey.ok) throw new Error(wkey.failure);
  const cp = createCheckpointer({
    ledger: o.value,
    signer: signer(LOG.signerKey),
    origin: ORIGIN,
    witness: { url: witness.url, key: wkey.value },
  });
  // Six witnessed checkpoints inside the ledger, then two records after the last one.
  for (let i = 0; i < 6; i++) {
    await o.value.append([opened(`op_${i}a`), opened(`op_${i}b`)]);
    const stored = await cp.checkpoint();
    expect(stored?.data).toMatchObject({ witnessed: true });
  }
  await o.value.append([opened('op_tail1'), opened('op_tail2')]);
  total = (await o.value.read()).length;
  await o.value.close();
});
afterAll(async () => {
  await witness.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('audit export and verify: what counts as a witness', () => {
  it('export reports the checkpoints inside the ledger; the same --witness-key on both sides is INTACT', async () => {
    const bundle = join(dir, 'real.bundle');
    const e = capture();
    expect(
      await audit(
        [
          'export',
          '--ledger',
          url,
          '--out',
          bundle,
          '--log-key',
          LOG.verifierKey,
          '--witness-key',
          WIT.verifierKey,
        ],
        e.io,
      ),
    ).toBe(0);
    expect(e.out()).toContain(
      `exported ${total} records and 6 checkpoint(s) to ${bundle}: 6 inside the ledger, 0 alongside`,
    );
    const v = capture();
    const code = await audit(
      ['verify', bundle, '--log-key', LOG.verifierKey, '--witness-key', WIT.verifierKey, '--json'],
      v.io,
    );
    const r = JSON.parse(v.out()) as Record<string, unknown>;
    expect(r).toMatchObject({
      code: 'INTACT',
      checkpoints: 6,
      log_key: 'anchored',
      witnessed_size: total - 3,
      witnessed_by: ['witness.test/real'],
      claimed_witnesses: [],
    });
    expect(code).toBe(0);
  });

  it("a witness key forged into the bundle's header is claimed, not trusted, and raises nothing", async () => {
    const bundle = join(dir, 'signed.bundle');
    expect(
      await audit(
        [
          'export',
          '--ledger',
          url,
          '--out',
          bundle,
          '--sign-key',
          writeKey('log.key', LOG.signerKey),
          '--witness-key',
          WIT.verifierKey,
        ],
        capture().io,
      ),
    ).toBe(0);
    const forged = join(dir, 'forged.bundle');
    writeFileSync(
      forged,
      cosignLastCheckpoint(readFileSync(bundle, 'utf8'), signer(EVIL.signerKey), EVIL.verifierKey),
    );
    const v = capture();
    const code = await audit(
      ['verify', forged, '--log-key', LOG.verifierKey, '--witness-key', WIT.verifierKey],
      v.io,
    );
    expect(v.out()).toMatch(/^INTACT: /);
    // The real witness vouches for its last checkpoint, not for the export-time one.
    expect(v.out()).toContain(`witnessed up to ${total - 3} by witness.test/real`);
    expect(v.out()).toMatch(
      new RegExp(
        `witness key\\(s\\) claimed by the bundle, not trusted: witness\\.test/evil\\+[0-9a-f]{8} \\(they would vouch up to ${total}`,
      ),
    );
    expect(code).toBe(0);
    // Without any --witness-key nothing is witnessed, whatever the bundle claims.
    const bare = capture();
    await audit(['verify', forged, '--json'], bare.io);
    expect(JSON.parse(bare.out())).toMatchObject({
      code: 'INTACT',
      log_key: 'claimed',
      witnessed_size: 0,
      claimed_witnessed_size: total,
    });
  });

  it('a signature line from an unknown key is ignored and reported, in a bundle and in the ledger', async () => {
    const bundle = join(dir, 'signed2.bundle');
    await audit(
      [
        'export',
        '--ledger',
        url,
        '--out',
        bundle,
        '--sign-key',
        join(dir, 'log.key'),
        '--witness-key',
        WIT.verifierKey,
      ],
      capture().io,
    );
    const extra = join(dir, 'extra.bundle');
    const stranger = generateKey('stranger.test/w', SigType.cosignature_v1, Buffer.alloc(32, 14));
    writeFileSync(
      extra,
      cosignLastCheckpoint(readFileSync(bundle, 'utf8'), signer(stranger.signerKey)),
    );
    const v = capture();
    const code = await audit(
      ['verify', extra, '--log-key', LOG.verifierKey, '--witness-key', WIT.verifierKey],
      v.io,
    );
    expect(v.out()).toMatch(/^INTACT: /);
    expect(v.out()).toMatch(
      /ignored 1 signature line\(s\) from unknown keys: stranger\.test\/w\+[0-9a-f]{8} \(bundle checkpoint\)/,
    );
    expect(code).toBe(0);

    // Inside the ledger: a checkpoint event whose note carries an extra signer.
    const o = await openLedger(`sqlite:${join(dir, 'extra.db')}`);
    if (!o.ok) throw new Error(o.failure.message);
    const store = o.value;
    await store.append([opened('op_x1'), opened('op_x2')]);
    const cp = createCheckpointer({ ledger: store, signer: signer(LOG.signerKey), origin: ORIGIN });
    const plain = await cp.checkpoint();
    const note = (plain!.data as { note: string }).note;
    const line = cosignatureLine(
      note.slice(0, note.lastIndexOf('\n\n') + 1),
      signer(stranger.signerKey),
    );
    if (!line.ok) throw new Error(line.failure);
    const [withExtra] = await store.append([
      { ...plain!, data: { ...(plain!.data as object), note: note + line.value } } as never,
    ]);
    const report = await verifyStore(store, { logKeys: [LOG.verifierKey] });
    expect(report).toMatchObject({
      code: 'INTACT',
      checkpoints: 2,
      ignored_signatures: [
        {
          checkpoint_seq: withExtra!.seq,
          key: expect.stringMatching(/^stranger\.test\/w\+/) as unknown,
        },
      ],
    });
    await store.close();
  });
});

function writeKey(name: string, key: string): string {
  const p = join(dir, name);
  writeFileSync(p, `${key}\n`);
  return p;
}
