// audit.witness_required: before a sensitive action the checkpoint must be cosigned by the witness;
// a witness that does not answer (or answers badly) holds the action as gate_locked, with a message
// naming the witness, and the fake service's ground truth shows that nothing was sent.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticCredentials } from '../src/engine/ports.js';
import { createRuntime } from '../src/runtime.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { createCheckpointer, type WitnessOptions } from '../src/ledger/chain/checkpointer.js';
import { verifyStore } from '../src/ledger/chain/export.js';
import {
  generateKey,
  parseSignerKey,
  parseVerifierKey,
  SigType,
} from '../src/ledger/chain/note.js';
import { memoryWitnessState, startWitness } from '../src/ledger/chain/witness.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';

const TOKEN = 'witness-required-canary-5d1e';
const ORIGIN = 'candor.test/required-log';
const logKey = generateKey(ORIGIN);
const witnessKey = generateKey('witness.test/required', SigType.cosignature_v1);
let fake: FakeService;

beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 't', token: TOKEN }] });
});
afterAll(async () => {
  await fake.close();
});

function setup(witness: Omit<WitnessOptions, 'key'>, logged: string[] = []) {
  const ledger = openMemoryLedger();
  const signer = parseSignerKey(logKey.signerKey);
  const key = parseVerifierKey(witnessKey.verifierKey);
  if (!signer.ok || !key.ok) throw new Error('bad test keys');
  const checkpoints = createCheckpointer({
    ledger,
    signer: signer.value,
    origin: ORIGIN,
    witness: { ...witness, key: key.value },
    log: (l) => logged.push(l),
  });
  const runtime = createRuntime({
    ledger,
    credentials: staticCredentials({ [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` } }),
    audit: { checkpoints },
  });
  const actions = new Map(referenceActions(fake.url).map((a) => [a.name, a]));
  return { ledger, runtime, action: (n: string) => actions.get(n)! };
}

/** A URL where nothing listens (connection refused). */
async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

const kinds = async (ledger: LedgerStore, correlation: string): Promise<string[]> =>
  (await ledger.read()).filter((e) => e.correlation_id === correlation).map((e) => e.kind);

describe('audit.witness_required', () => {
  it('holds a payment as gate_locked when the witness does not answer; nothing is sent', async () => {
    const url = await deadUrl();
    const logged: string[] = [];
    const { ledger, runtime, action } = setup({ url, required: true, waitMs: 400 }, logged);
    const before = fake.groundTruth().length;
    const env = await runtime.run(
      action('create_payment'),
      { amount: 7, currency: 'EUR' },
      { correlationId: 'wr-dead' },
    );
    expect(env).toMatchObject({
      ok: false,
      category: 'gate_locked',
      retry: 'never',
      remote_effect: 'none',
    });
    expect(env.message).toContain(`witness.test/required (${url})`);
    expect(env.message).toMatch(/did not answer/);
    expect(fake.groundTruth('wr-dead')).toEqual([]);
    expect(fake.groundTruth()).toHaveLength(before);
    // No attempt was recorded; the checkpoint is stored unwitnessed with the reason.
    expect(await kinds(ledger, 'wr-dead')).not.toContain('attempt_started');
    const cps = (await ledger.read()).filter((e) => e.kind === 'checkpoint');
    expect(cps).toHaveLength(1);
    expect(cps[0]!.data).toMatchObject({
      witnessed: false,
      witness_problem: expect.stringMatching(/^witness did not answer/) as unknown,
    });
    expect(logged.join('\n')).toContain('stored unwitnessed');
    expect(await verifyStore(ledger, { logKeys: [logKey.verifierKey] })).toMatchObject({
      code: 'INTACT',
    });
  });

  it('holds the first attempt recovery makes too (the same loop as a call): nothing is sent', async () => {
    const url = await deadUrl();
    const { ledger, runtime, action } = setup({ url, required: true, waitMs: 300 });
    // Opened and never attempted (a crash before the first attempt): recovery makes it.
    const id = await runtime.open(
      action('create_payment'),
      { amount: 11, currency: 'EUR' },
      { correlationId: 'wr-recover' },
    );
    const items = await runtime.recover();
    const item = items.find((i) => i.operation_id === id)!;
    expect(item.envelope).toMatchObject({
      category: 'gate_locked',
      remote_effect: 'none',
    });
    expect(item.envelope.message).toContain(`witness.test/required (${url})`);
    expect(fake.groundTruth('wr-recover')).toEqual([]);
    // Held before its first attempt, as a call would be: cancelled, with nothing attempted.
    expect(await kinds(ledger, 'wr-recover')).toEqual(['operation_opened', 'operation_resolved']);
    expect(item.unresolved).toBe(false);
  });

  it('holds it too when the witness answers badly (an HTML page)', async () => {
    const junk = createServer((_req, res) => res.end('<html>ok</html>'));
    await new Promise<void>((r) => junk.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(junk.address() as AddressInfo).port}`;
    try {
      // 2 s, not 300 ms: on a loaded machine one round may take longer than 300 ms, and a round cut
      // short by the wait says "did not answer" instead of what the witness answered.
      const { runtime, action } = setup({ url, required: true, waitMs: 2_000 });
      const env = await runtime.run(
        action('create_payment'),
        { amount: 8, currency: 'EUR' },
        { correlationId: 'wr-junk' },
      );
      expect(env.category).toBe('gate_locked');
      expect(env.message).toMatch(/witness answered badly: not a cosignature line/);
      expect(fake.groundTruth('wr-junk')).toEqual([]);
    } finally {
      await new Promise<void>((r) => {
        junk.close(() => r());
        junk.closeAllConnections();
      });
    }
  });

  it('without witness_required the same dead witness does not hold the action', async () => {
    const { ledger, runtime, action } = setup({ url: await deadUrl(), waitMs: 300 });
    const env = await runtime.run(
      action('create_payment'),
      { amount: 9, currency: 'EUR' },
      { correlationId: 'wr-optional' },
    );
    expect(env.category).toBe('succeeded');
    expect(fake.groundTruth('wr-optional').length).toBeGreaterThan(0);
    const cp = (await ledger.read()).find((e) => e.kind === 'checkpoint')!;
    expect(cp.data).toMatchObject({ witnessed: false });
  });

  it('with a live witness the payment runs after a witnessed checkpoint', async () => {
    const signer = parseSignerKey(witnessKey.signerKey);
    const log = parseVerifierKey(logKey.verifierKey);
    if (!signer.ok || !log.ok) throw new Error('bad test keys');
    const w = await startWitness({
      signer: signer.value,
      logs: [log.value],
      state: memoryWitnessState(),
    });
    try {
      const { ledger, runtime, action } = setup({ url: w.url, required: true, waitMs: 5_000 });
      const env = await runtime.run(
        action('create_payment'),
        { amount: 10, currency: 'EUR' },
        { correlationId: 'wr-live' },
      );
      expect(env.category).toBe('succeeded');
      expect(fake.groundTruth('wr-live').length).toBeGreaterThan(0);
      const events = await ledger.read();
      const cp = events.find((e) => e.kind === 'checkpoint')!;
      const started = events.find(
        (e) => e.kind === 'attempt_started' && e.correlation_id === 'wr-live',
      )!;
      expect(cp.data).toMatchObject({ witnessed: true });
      expect(cp.seq).toBeLessThan(started.seq);
      expect(
        await verifyStore(ledger, {
          logKeys: [logKey.verifierKey],
          witnessKeys: [witnessKey.verifierKey],
        }),
      ).toMatchObject({ code: 'INTACT', witnessed_size: cp.seq - 1 });
    } finally {
      await w.close();
    }
  });
});
