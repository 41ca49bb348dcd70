// The engine's audit duties: protected diagnostics sealed to the auditor (the gateway cannot read
// them; the auditor can, only inside their own record), and signed checkpoints issued every N
// records, before a sensitive action and at session end — all verifiable offline.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticCredentials } from '../src/engine/ports.js';
import { createRuntime } from '../src/runtime.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { createCheckpointer } from '../src/ledger/chain/checkpointer.js';
import { verifyStore } from '../src/ledger/chain/export.js';
import { generateKey, parseSignerKey } from '../src/ledger/chain/note.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { generateSealKeyPair, isSealedPayload, openPayload } from '../src/ledger/seal.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';

const TOKEN = 'audit-engine-canary-91c2';
let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 't', token: TOKEN }] });
});
afterAll(async () => {
  await fake.close();
});

describe('engine audit: sealing and checkpoints', () => {
  it('seals diagnostics, checkpoints before a payment and at session end, and verifies offline', async () => {
    const ledger = openMemoryLedger();
    const auditor = generateSealKeyPair();
    const keys = generateKey('candor.test/log');
    const signer = parseSignerKey(keys.signerKey);
    if (!signer.ok) throw new Error(signer.failure);
    const checkpoints = createCheckpointer({
      ledger,
      signer: signer.value,
      origin: 'candor.test/log',
      every: 6,
    });
    const actions = new Map(referenceActions(fake.url).map((a) => [a.name, a]));
    const runtime = createRuntime({
      ledger,
      credentials: staticCredentials({
        [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` },
      }),
      audit: { sealTo: auditor.publicKey, checkpoints },
    });
    fake.arm({
      call_id: 'audit-issue-500',
      phase: 'status',
      status: 500,
      body: { message: 'disk quota exceeded on shard 7' },
    });
    await runtime.run(
      actions.get('create_issue')!,
      { title: 'sealed' },
      { correlationId: 'audit-issue-500' },
    );
    await runtime.run(
      actions.get('create_deployment')!,
      { service: 'api', version: '1' },
      { correlationId: 'audit-dep' },
    );
    const pay = await runtime.run(
      actions.get('create_payment')!,
      { amount: 5, currency: 'EUR' },
      { correlationId: 'audit-pay' },
    );
    expect(pay.category).toBe('succeeded');
    await runtime.endSession('done');

    const events = await ledger.read();
    // Sealed: the provider's words are not in any clear field; the auditor opens them in place.
    expect(JSON.stringify(events)).not.toContain('disk quota exceeded');
    expect(JSON.stringify(events)).not.toContain(TOKEN);
    const finished = events.filter((e) => e.kind === 'attempt_finished');
    expect(finished.length).toBeGreaterThanOrEqual(3);
    const failed = finished.find((e) => e.correlation_id === 'audit-issue-500')!;
    const sealed = (failed.data as { diagnostics: unknown }).diagnostics;
    expect(isSealedPayload(sealed)).toBe(true);
    if (!isSealedPayload(sealed)) return;
    const opened = openPayload(auditor.privateKey, sealed, failed.seq, failed);
    expect(opened.ok).toBe(true);
    expect(opened.ok && opened.value.toString('utf8')).toContain('disk quota exceeded');
    // Moved into another record, the same ciphertext does not open.
    const other = finished.find((e) => e.correlation_id === 'audit-dep')!;
    expect(openPayload(auditor.privateKey, sealed, other.seq, other).ok).toBe(false);

    // Checkpoints: one before the payment's first byte, one at session end; the log verifies.
    const cps = events.filter((e) => e.kind === 'checkpoint');
    expect(cps.length).toBeGreaterThanOrEqual(2);
    const payStart = events.find(
      (e) => e.kind === 'attempt_started' && e.correlation_id === 'audit-pay',
    )!;
    expect(
      cps.some((c) => c.seq < payStart.seq && (c.data as { size: number }).size === c.seq - 1),
    ).toBe(true);
    expect(events.at(-1)!.kind).toBe('checkpoint');
    const report = await verifyStore(ledger, { logKeys: [keys.verifierKey] });
    expect(report).toMatchObject({ code: 'INTACT' });
    expect(report.checkpoints).toBe(cps.length);
  });
});
