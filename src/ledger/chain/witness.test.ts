// The witness over a real loopback socket: cosigns consistent growth, refuses everything else with
// the status codes of c2sp.org/tlog-witness.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openCheckpoint, signCheckpoint } from './checkpoint.js';
import { consistencyProof, leafHash, rootOf, type Hash } from './merkle.js';
import { SigType, generateKey, parseSignerKey, parseVerifierKey, type NoteSigner } from './note.js';
import {
  checkCosignatures,
  fileWitnessState,
  memoryWitnessState,
  requestCosignature,
  startWitness,
  type WitnessState,
} from './witness.js';

const must = <T>(r: { ok: boolean; value?: T; failure?: string }): T => {
  if (!r.ok) throw new Error(r.failure);
  return r.value!;
};
const LOG = generateKey('candor.test/log', SigType.ed25519, Buffer.alloc(32, 1));
const WIT = generateKey('witness.test/w1', SigType.cosignature_v1, Buffer.alloc(32, 2));
const log = must(parseSignerKey(LOG.signerKey));
const logVerifier = must(parseVerifierKey(LOG.verifierKey));
const witnessVerifier = must(parseVerifierKey(WIT.verifierKey));
const witnessSigner = (): NoteSigner =>
  must(parseSignerKey(WIT.signerKey, () => 1_767_225_600_000));

const leaves: Hash[] = Array.from({ length: 20 }, (_, i) =>
  leafHash(Buffer.from(`record ${i + 1}`)),
);
const note = (size: number, ls: readonly Hash[] = leaves, signer: NoteSigner = log): string =>
  must(
    signCheckpoint(
      { origin: 'candor.test/log', size, root: rootOf(ls.slice(0, size)), extensions: [] },
      signer,
    ),
  );

async function withWitness<T>(state: WitnessState, fn: (url: string) => Promise<T>): Promise<T> {
  const w = await startWitness({ signer: witnessSigner(), logs: [logVerifier], state });
  try {
    return await fn(w.url);
  } finally {
    await w.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'candor-witness-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('tlog-witness add-checkpoint over loopback', () => {
  it('cosigns consistent growth; the cosignature verifies with the witness key', async () => {
    await withWitness(memoryWitnessState(), async (url) => {
      const first = await requestCosignature(url, 0, [], note(5));
      expect(first.ok).toBe(true);
      const cosigned = note(5) + (first.ok ? first.cosignatures : '');
      const opened = must(openCheckpoint(cosigned, [logVerifier, witnessVerifier]));
      expect(opened.witnessed_by).toEqual(['witness.test/w1']);
      expect(opened.cosigned_at).toEqual({ 'witness.test/w1': 1_767_225_600 });

      const grow = await requestCosignature(url, 5, consistencyProof(leaves, 5, 9), note(9));
      expect(grow.ok).toBe(true);
      const same = await requestCosignature(url, 9, [], note(9));
      expect(same.ok).toBe(true);
    });
  });

  it('cosigns a checkpoint whose text holds U+FFFD (valid UTF-8, not a control character)', async () => {
    const origin = 'candor.test/\ufffd-log';
    const k = generateKey(origin, SigType.ed25519, Buffer.alloc(32, 4));
    const signer = must(parseSignerKey(k.signerKey));
    const w = await startWitness({
      signer: witnessSigner(),
      logs: [must(parseVerifierKey(k.verifierKey))],
      state: memoryWitnessState(),
    });
    try {
      const n = must(
        signCheckpoint(
          { origin, size: 3, root: rootOf(leaves.slice(0, 3)), extensions: [] },
          signer,
        ),
      );
      const r = await requestCosignature(w.url, 0, [], n);
      expect(r).toMatchObject({ ok: true });
      const opened = must(
        openCheckpoint(n + (r.ok ? r.cosignatures : ''), [
          must(parseVerifierKey(k.verifierKey)),
          witnessVerifier,
        ]),
      );
      expect(opened.witnessed_by).toEqual(['witness.test/w1']);
    } finally {
      await w.close();
    }
  });

  it('409 with its current size when the old size is stale; 422 on a bad proof', async () => {
    await withWitness(memoryWitnessState(), async (url) => {
      expect((await requestCosignature(url, 0, [], note(9))).ok).toBe(true);
      expect(await requestCosignature(url, 5, consistencyProof(leaves, 5, 12), note(12))).toEqual({
        ok: false,
        status: 409,
        message: 'stale old size',
        size: 9,
      });
      const proof = consistencyProof(leaves, 9, 12).map((p) => Buffer.from(p));
      proof[0]![0]! ^= 1;
      const bad = await requestCosignature(url, 9, proof, note(12));
      expect(bad).toMatchObject({ ok: false, status: 422 });
      // A rewritten history cannot produce a valid proof from the witnessed state.
      const forked = leaves.map((l, i) => (i === 3 ? leafHash(Buffer.from('evil')) : l));
      const fork = await requestCosignature(
        url,
        9,
        consistencyProof(forked, 9, 12),
        note(12, forked),
      );
      expect(fork).toMatchObject({ ok: false, status: 422 });
      expect(await requestCosignature(url, 9, [], note(9, forked))).toMatchObject({
        ok: false,
        status: 409,
      });
      // The refusals left the state alone: honest growth from 9 still works.
      expect((await requestCosignature(url, 9, consistencyProof(leaves, 9, 12), note(12))).ok).toBe(
        true,
      );
    });
  });

  it('404 unknown origin, 403 bad log signature, 400 malformed request', async () => {
    await withWitness(memoryWitnessState(), async (url) => {
      const other = must(
        parseSignerKey(
          generateKey('elsewhere/log', SigType.ed25519, Buffer.alloc(32, 4)).signerKey,
        ),
      );
      const foreign = must(
        signCheckpoint(
          { origin: 'elsewhere/log', size: 1, root: rootOf(leaves.slice(0, 1)), extensions: [] },
          other,
        ),
      );
      expect(await requestCosignature(url, 0, [], foreign)).toMatchObject({
        ok: false,
        status: 404,
      });
      const impostor = must(
        parseSignerKey(
          generateKey('candor.test/log', SigType.ed25519, Buffer.alloc(32, 5)).signerKey,
        ),
      );
      expect(await requestCosignature(url, 0, [], note(3, leaves, impostor))).toMatchObject({
        ok: false,
        status: 403,
      });
      const tampered = note(3).replace('\n3\n', '\n4\n');
      expect(await requestCosignature(url, 0, [], tampered)).toMatchObject({
        ok: false,
        status: 403,
      });
      expect(await requestCosignature(url, 7, [], note(3))).toMatchObject({
        ok: false,
        status: 400,
      });
      const res = await fetch(`${url}/add-checkpoint`, { method: 'POST', body: 'hello' });
      expect(res.status).toBe(400);
      expect((await fetch(`${url}/add-checkpoint`)).status).toBe(405);
    });
  });

  it('serializes concurrent submissions: exactly one of two racing updates wins', async () => {
    await withWitness(memoryWitnessState(), async (url) => {
      expect((await requestCosignature(url, 0, [], note(4))).ok).toBe(true);
      const [a, b] = await Promise.all([
        requestCosignature(url, 4, consistencyProof(leaves, 4, 10), note(10)),
        requestCosignature(url, 4, consistencyProof(leaves, 4, 7), note(7)),
      ]);
      expect([a.ok, b.ok].filter(Boolean)).toHaveLength(1);
      const loser = a.ok ? b : a;
      expect(loser).toMatchObject({ ok: false, status: 409 });
    });
  });

  it('persists its state across a restart (file state)', async () => {
    const path = join(dir, 'witness-state.json');
    await withWitness(fileWitnessState(path), async (url) => {
      expect((await requestCosignature(url, 0, [], note(6))).ok).toBe(true);
    });
    await withWitness(fileWitnessState(path), async (url) => {
      expect(await requestCosignature(url, 0, [], note(8))).toMatchObject({
        ok: false,
        status: 409,
        size: 6,
      });
      expect((await requestCosignature(url, 6, consistencyProof(leaves, 6, 8), note(8))).ok).toBe(
        true,
      );
    });
  });
});

describe('the witness and its client at the edges', () => {
  it('answers 413 to a body over 64 KiB (the client reads the answer: no connection reset)', async () => {
    await withWitness(memoryWitnessState(), async (url) => {
      for (const size of [200 * 1024, 4 * 1024 * 1024]) {
        const res = await fetch(`${url}/add-checkpoint`, {
          method: 'POST',
          body: `old 0\n\n${'x'.repeat(size)}`,
        });
        expect(res.status).toBe(413);
        expect(await res.text()).toBe('request larger than 65536 bytes\n');
      }
      // The witness still serves afterwards.
      expect((await requestCosignature(url, 0, [], note(3))).ok).toBe(true);
    });
  });

  it('a cosignature line returned twice is kept once', async () => {
    await withWitness(memoryWitnessState(), async (url) => {
      const n = note(4);
      const r = await requestCosignature(url, 0, [], n);
      if (!r.ok) throw new Error(r.message);
      const text = n.slice(0, n.lastIndexOf('\n\n') + 1);
      const checked = checkCosignatures(
        r.cosignatures + r.cosignatures,
        text,
        witnessVerifier,
        1_767_225_600_000,
      );
      expect(checked.problems).toEqual([]);
      expect(checked.lines).toBe(r.cosignatures);
    });
  });
});
