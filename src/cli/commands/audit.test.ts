// The audit and witness commands end to end: keygen, export from a real SQLite ledger, verify
// (intact, tampered, --json, --trusted), decrypt sealed payloads, and a witness served over loopback.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointFor, readBundle } from '../../ledger/chain/bundle.js';
import { parseSignerKey } from '../../ledger/chain/note.js';
import { requestCosignature } from '../../ledger/chain/witness.js';
import type { NewEvent } from '../../ledger/events.js';
import { openLedger } from '../../ledger/open.js';
import { decodeSealPublicKey, sealPayload } from '../../ledger/seal.js';
import { run as audit } from './audit.js';
import { serve } from './witness.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-audit-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

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

const gate = (i: number): NewEvent => ({
  kind: 'gate_changed',
  at: 1_767_225_600_000 + i,
  session_id: null,
  operation_id: null,
  correlation_id: `c-${i}`,
  data: { locked: false, by: `operator-${i}` },
});

describe('candor audit', () => {
  it('keygen, export, verify, tamper, trusted, decrypt', async () => {
    const c = capture();
    expect(
      await audit(
        ['keygen', '--kind', 'log', '--name', 'candor.test/log', '--out', join(dir, 'log.key')],
        c.io,
      ),
    ).toBe(0);
    const logVkey = c.out().trim();
    expect(logVkey).toMatch(/^candor\.test\/log\+[0-9a-f]{8}\+/);
    // stdout is exactly the public key; the label says what it is and where the secret half went.
    expect(c.out().split('\n')).toHaveLength(2);
    expect(c.err()).toContain(
      `log key candor.test/log (Ed25519): the signing key is in ${join(dir, 'log.key')}`,
    );
    const s = capture();
    expect(await audit(['keygen', '--kind', 'seal', '--out', join(dir, 'auditor.key')], s.io)).toBe(
      0,
    );
    expect(decodeSealPublicKey(s.out().trim()).ok).toBe(true);
    expect(s.err()).toContain(`the auditor's private key is in ${join(dir, 'auditor.key')}`);
    // Stored clamped (RFC 9180 §7.1.2).
    const sk = Buffer.from(
      readFileSync(join(dir, 'auditor.key'), 'utf8').trim().split(':')[1]!,
      'base64url',
    );
    expect([sk[0]! & 7, sk[31]! & 0xc0]).toEqual([0, 0x40]);
    expect(
      await audit(
        ['keygen', '--kind', 'seal', '--out', join(dir, 'auditor.key')],
        capture().io,
      ).catch((e: Error) => e.message),
    ).toContain('refusing to overwrite');

    const url = `sqlite:${join(dir, 'ledger.db')}`;
    const opened = await openLedger(url);
    if (!opened.ok) throw new Error(opened.failure.message);
    const store = opened.value;
    await store.append([gate(1), gate(2)]);
    await store.append([
      {
        kind: 'session_ended',
        at: 1_767_225_600_003,
        session_id: null,
        operation_id: null,
        correlation_id: null,
        data: { reason: 'done' },
      },
    ]);
    await store.append([gate(4)]);
    await store.close();

    const bundle = join(dir, 'ledger.bundle');
    const e = capture();
    expect(
      await audit(
        ['export', '--ledger', url, '--out', bundle, '--sign-key', join(dir, 'log.key')],
        e.io,
      ),
    ).toBe(0);
    expect(e.out()).toContain('exported 4 records and 1 checkpoint(s)');

    const v = capture();
    expect(await audit(['verify', bundle, '--log-key', logVkey], v.io)).toBe(0);
    expect(v.out()).toMatch(/^INTACT: 4 records intact; every record is covered/);
    expect(v.out()).toContain('log key: anchored (given with --log-key)');
    // Without --log-key the bundle's own key proves self-consistency only, and the report says so.
    const selfOnly = capture();
    expect(await audit(['verify', bundle], selfOnly.io)).toBe(0);
    expect(selfOnly.out()).toContain('log key: claimed by the bundle, not trusted');
    // Self-consistent is not a pass: the first line must not say INTACT beside that doubt.
    expect(selfOnly.out()).toMatch(
      /^UNANCHORED: the hash chain of 4 record\(s\) is consistent, but/,
    );
    expect(selfOnly.out()).not.toContain('INTACT');

    const viaStore = capture();
    expect(await audit(['verify', url, '--json'], viaStore.io)).toBe(0);
    expect(JSON.parse(viaStore.out())).toMatchObject({
      ok: true,
      code: 'INTACT',
      size: 4,
      anchored: false,
    });
    // The ledger holds no checkpoint: the text says so, and never INTACT beside "rewritten".
    const plain = capture();
    expect(await audit(['verify', url], plain.io)).toBe(0);
    expect(plain.out()).toMatch(/^UNANCHORED: .*could have been rewritten/);
    expect(plain.out()).not.toContain('INTACT');

    // The bundle's checkpoint becomes the auditor's trusted state; a later, shorter log is a rollback.
    const trusted = join(dir, 'trusted.note');
    writeFileSync(trusted, (await readBundle(bundle)).checkpoints[0]!);
    const lines = readFileSync(bundle, 'utf8').split('\n');
    const short = join(dir, 'short.bundle');
    const signer = parseSignerKey(readFileSync(join(dir, 'log.key'), 'utf8').trim());
    if (!signer.ok) throw new Error(signer.failure);
    const first3 = lines.slice(1, 4).map((l) => Buffer.from(l));
    writeFileSync(
      short,
      [
        lines[0],
        ...lines.slice(1, 4),
        JSON.stringify({ checkpoint: checkpointFor(first3, signer.value) }),
        '{"end":{"checkpoints":1,"records":3}}',
        '',
      ].join('\n'),
    );
    const rb = capture();
    expect(await audit(['verify', short, '--trusted', trusted, '--json'], rb.io)).toBe(1);
    expect(JSON.parse(rb.out())).toMatchObject({ code: 'ROLLBACK', first_bad_seq: 4 });

    const tampered = join(dir, 'tampered.bundle');
    writeFileSync(tampered, readFileSync(bundle, 'utf8').replace('operator-2', 'operator-X'));
    const t = capture();
    expect(await audit(['verify', tampered], t.io)).toBe(1);
    expect(t.out()).toMatch(/^MODIFIED at seq 2:/);
    // With the auditor's key: a damaged bundle never reads as "signatures prove" anything.
    const tk = capture();
    expect(await audit(['verify', tampered, '--log-key', logVkey], tk.io)).toBe(1);
    expect(tk.out()).toMatch(/^MODIFIED at seq 2:/);
    expect(tk.out()).not.toContain('signatures prove');
    expect(tk.out()).toContain('but the log is damaged (MODIFIED)');

    expect(await audit(['verify', join(dir, 'missing.bundle')], capture().io)).toBe(3);
  });

  it('decrypt opens payloads bound to their record and flags moved ones', async () => {
    const kp = capture();
    await audit(['keygen', '--kind', 'seal', '--out', join(dir, 'a2.key')], kp.io);
    const pk = decodeSealPublicKey(kp.out().trim());
    if (!pk.ok) throw new Error(pk.failure);
    const url = `sqlite:${join(dir, 'sealed.db')}`;
    const opened = await openLedger(url);
    if (!opened.ok) throw new Error(opened.failure.message);
    const finished = (seq: number, boundTo: number): NewEvent => ({
      kind: 'approval_requested',
      at: 1_767_225_600_000 + seq,
      session_id: null,
      operation_id: null,
      correlation_id: null,
      data: {
        approval_id: `apr_${seq}`,
        scope: 'per_call',
        request_fingerprint: null,
        card: { secret: sealPayload(pk.value, `card ${seq}`, boundTo) },
      },
    });
    await opened.value.append([finished(1, 1)]);
    await opened.value.append([finished(2, 7)]);
    await opened.value.close();
    const bundle = join(dir, 'sealed.bundle');
    expect(await audit(['export', '--ledger', url, '--out', bundle], capture().io)).toBe(0);
    const d = capture();
    expect(await audit(['decrypt', bundle, '--key', join(dir, 'a2.key')], d.io)).toBe(1);
    expect(d.out()).toContain('seq 1 /data/card/secret: card 1');
    expect(d.out()).toContain(
      'seq 2 /data/card/secret: cannot open (payload is bound to seq=7, found in seq=2)',
    );
  });
});

describe('candor witness serve', () => {
  it('serves add-checkpoint on loopback until stopped', async () => {
    const k = capture();
    await audit(
      ['keygen', '--kind', 'witness', '--name', 'witness.test/w', '--out', join(dir, 'w.key')],
      k.io,
    );
    const l = capture();
    await audit(
      ['keygen', '--kind', 'log', '--name', 'candor.test/wlog', '--out', join(dir, 'wlog.key')],
      l.io,
    );
    const logSigner = parseSignerKey(readFileSync(join(dir, 'wlog.key'), 'utf8').trim());
    if (!logSigner.ok) throw new Error(logSigner.failure);
    const stop = new AbortController();
    const out = capture();
    let url = '';
    let served: Promise<number> = Promise.resolve(-1);
    const listening = new Promise<void>((resolve) => {
      served = serve(
        [
          '--key',
          join(dir, 'w.key'),
          '--port',
          '0',
          '--log-key',
          l.out().trim(),
          '--state',
          join(dir, 'w.state'),
        ],
        out.io,
        stop.signal,
        (u) => {
          url = u;
          resolve();
        },
      );
    });
    await listening;
    const records = [Buffer.from('{"at":1}'), Buffer.from('{"at":2}')];
    const r = await requestCosignature(url, 0, [], checkpointFor(records, logSigner.value));
    expect(r.ok && r.cosignatures.startsWith('\u2014 witness.test/w ')).toBe(true);
    stop.abort();
    expect(await served).toBe(0);
    expect(out.out()).toContain('listening on http://127.0.0.1:');
    expect(JSON.parse(readFileSync(join(dir, 'w.state'), 'utf8'))).toMatchObject({
      'candor.test/wlog': { size: 2 },
    });
  });
});
