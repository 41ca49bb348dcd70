// Checkpoints cosigned by a separate witness over a real loopback socket: the second checkpoint is
// accepted only with a valid consistency proof, and offline verification sees the witnessed size.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cosignatureLine } from '../src/ledger/chain/checkpoint.js';
import { createCheckpointer } from '../src/ledger/chain/checkpointer.js';
import { verifyStore } from '../src/ledger/chain/export.js';
import {
  generateKey,
  parseSignerKey,
  parseVerifierKey,
  SigType,
  type NoteSigner,
  type NoteVerifier,
} from '../src/ledger/chain/note.js';
import {
  memoryWitnessState,
  startWitness,
  type RunningWitness,
} from '../src/ledger/chain/witness.js';
import { opened } from '../src/ledger/contract.case.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';

const ORIGIN = 'candor.test/witnessed-log';
const witnessVerifier = (): NoteVerifier => {
  const v = parseVerifierKey(witnessKey.verifierKey);
  if (!v.ok) throw new Error(v.failure);
  return v.value;
};
const logKey = generateKey(ORIGIN);
const witnessKey = generateKey('witness.test', SigType.cosignature_v1);
let witness: RunningWitness;

beforeAll(async () => {
  const signer = parseSignerKey(witnessKey.signerKey);
  const logVerifier = parseVerifierKey(logKey.verifierKey);
  if (!signer.ok || !logVerifier.ok) throw new Error('bad test keys');
  witness = await startWitness({
    signer: signer.value,
    logs: [logVerifier.value],
    state: memoryWitnessState(),
  });
});
afterAll(async () => {
  await witness.close();
});

describe('witnessed checkpoints', () => {
  it('carry the witness cosignature, consistent from one checkpoint to the next', async () => {
    const ledger = openMemoryLedger();
    const signer = parseSignerKey(logKey.signerKey);
    if (!signer.ok) throw new Error(signer.failure);
    const cp = createCheckpointer({
      ledger,
      signer: signer.value,
      origin: ORIGIN,
      witness: { url: witness.url, key: witnessVerifier() },
    });
    for (let i = 1; i <= 3; i++) await ledger.append([opened(`op_${i}`)]);
    const first = await cp.checkpoint();
    for (let i = 4; i <= 9; i++) await ledger.append([opened(`op_${i}`)]);
    const second = await cp.checkpoint();
    expect(first?.data).toMatchObject({ size: 3, witnessed: true });
    expect(second?.data).toMatchObject({ size: 10, witnessed: true });
    const note = (second!.data as { note: string }).note;
    expect(note).toContain('— witness.test ');
    const report = await verifyStore(ledger, {
      logKeys: [logKey.verifierKey],
      witnessKeys: [witnessKey.verifierKey],
    });
    expect(report).toMatchObject({ code: 'INTACT', witnessed_size: 10 });
  });
});

/**
 * A witness that answers 200 with whatever `answer` makes of the checkpoint note it was sent: the
 * hostile or broken witness the checkpointer must not believe.
 */
async function answeringWitness(
  answer: (note: string) => string,
): Promise<{ url: string; bodies: string[]; close(): Promise<void> }> {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      bodies.push(body);
      const reply = answer(body.slice(body.indexOf('\n\n') + 2));
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(reply);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    bodies,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

const textOf = (note: string): string => note.slice(0, note.lastIndexOf('\n\n') + 1);
const cosigner = (seedByte: number, name: string, nowMs: () => number): NoteSigner => {
  const k = generateKey(name, SigType.cosignature_v1, Buffer.alloc(32, seedByte));
  const s = parseSignerKey(k.signerKey, nowMs);
  if (!s.ok) throw new Error(s.failure);
  return s.value;
};
const realWitnessSigner = (nowMs: () => number): NoteSigner => {
  const s = parseSignerKey(witnessKey.signerKey, nowMs);
  if (!s.ok) throw new Error(s.failure);
  return s.value;
};
const line = (text: string, s: NoteSigner): string => {
  const l = cosignatureLine(text, s);
  if (!l.ok) throw new Error(l.failure);
  return l.value;
};

describe('the checkpointer believes only valid cosignatures from the configured witness key', () => {
  const cases: [string, (note: string) => string, RegExp][] = [
    ['an HTML page', () => '<html>ok</html>', /not a cosignature line/],
    [
      'a line from a key it was not configured with',
      (note) => line(textOf(note), cosigner(9, 'stranger.test/w', Date.now)),
      /unknown key stranger\.test\/w\+/,
    ],
    [
      'a bad signature under the right key',
      // Signed over other text, presented as a cosignature of this checkpoint.
      (note) => line(textOf(note).replace(/\n\d+\n/, '\n999\n'), realWitnessSigner(Date.now)),
      /invalid cosignature from witness\.test\+/,
    ],
    [
      'a cosignature timestamped two days ago',
      (note) =>
        line(
          textOf(note),
          realWitnessSigner(() => Date.now() - 2 * 86_400_000),
        ),
      /timestamped \d+, -1728\d\d s from now/,
    ],
  ];
  for (const [what, answer, problem] of cases) {
    it(`${what}: stored unwitnessed with the reason, and the ledger still verifies`, async () => {
      const w = await answeringWitness(answer);
      const logged: string[] = [];
      try {
        const ledger = openMemoryLedger();
        const signer = parseSignerKey(logKey.signerKey);
        if (!signer.ok) throw new Error(signer.failure);
        const cp = createCheckpointer({
          ledger,
          signer: signer.value,
          origin: ORIGIN,
          witness: { url: w.url, key: witnessVerifier() },
          log: (l) => logged.push(l),
        });
        for (let i = 1; i <= 4; i++) await ledger.append([opened(`op_${i}`)]);
        const stored = await cp.checkpoint();
        expect(w.bodies).toHaveLength(1);
        const data = stored!.data as { note: string; witnessed: boolean; witness_problem: string };
        expect(data.witnessed).toBe(false);
        expect(data.witness_problem).toMatch(/^witness answered badly: /);
        expect(data.witness_problem).toMatch(problem);
        // Only the log's own signature is in the note: nothing the witness said entered the chain.
        expect(
          data.note
            .trimEnd()
            .split('\n')
            .filter((l) => l.startsWith('\u2014 ')),
        ).toEqual([expect.stringMatching(/^\u2014 candor\.test\/witnessed-log /)]);
        expect(logged.join('\n')).toMatch(problem);
        await ledger.append([opened('op_5')]);
        const report = await verifyStore(ledger, {
          logKeys: [logKey.verifierKey],
          witnessKeys: [witnessKey.verifierKey],
        });
        expect(report).toMatchObject({
          code: 'INTACT',
          checkpoints: 1,
          signatures_checked: true,
          witnessed_size: 0,
        });
      } finally {
        await w.close();
      }
    });
  }

  it('keeps the valid line and drops an extra unknown one the witness sent with it', async () => {
    const w = await answeringWitness(
      (note) =>
        line(textOf(note), realWitnessSigner(Date.now)) +
        line(textOf(note), cosigner(9, 'stranger.test/w', Date.now)),
    );
    try {
      const ledger = openMemoryLedger();
      const signer = parseSignerKey(logKey.signerKey);
      if (!signer.ok) throw new Error(signer.failure);
      const logged: string[] = [];
      const cp = createCheckpointer({
        ledger,
        signer: signer.value,
        origin: ORIGIN,
        witness: { url: w.url, key: witnessVerifier() },
        log: (l) => logged.push(l),
      });
      await ledger.append([opened('op_1'), opened('op_2')]);
      const stored = await cp.checkpoint();
      const data = stored!.data as { note: string; witnessed: boolean };
      expect(data.witnessed).toBe(true);
      expect(data.note).toContain('\u2014 witness.test ');
      expect(data.note).not.toContain('stranger.test');
      expect(logged.join('\n')).toMatch(/unknown key stranger\.test\/w/);
      expect(
        await verifyStore(ledger, {
          logKeys: [logKey.verifierKey],
          witnessKeys: [witnessKey.verifierKey],
        }),
      ).toMatchObject({ code: 'INTACT', witnessed_size: 2, witnessed_by: ['witness.test'] });
    } finally {
      await w.close();
    }
  });
});
