// Checkpoints cosigned by a separate witness over a real loopback socket: the second checkpoint is
// accepted only with a valid consistency proof, and offline verification sees the witnessed size.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCheckpointer } from '../src/ledger/chain/checkpointer.js';
import { verifyStore } from '../src/ledger/chain/export.js';
import {
  generateKey,
  parseSignerKey,
  parseVerifierKey,
  SigType,
} from '../src/ledger/chain/note.js';
import {
  memoryWitnessState,
  startWitness,
  type RunningWitness,
} from '../src/ledger/chain/witness.js';
import { opened } from '../src/ledger/contract.case.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';

const ORIGIN = 'candor.test/witnessed-log';
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
      witness: { url: witness.url },
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
