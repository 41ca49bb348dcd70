// Hostile witnesses over real loopback sockets: one that answers 300 MB, one that answers one byte
// a second, and an honest one that has already cosigned a larger tree of this log (a fork or a
// rollback of the log). The checkpoint stays safe (stored unwitnessed, with a coded reason), the
// fork is reported with both sizes, and no unrelated call waits for the witness.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as api from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticCredentials } from '../src/engine/ports.js';
import { traceEvents } from '../src/engine/trace.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { createCheckpointer, type WitnessOptions } from '../src/ledger/chain/checkpointer.js';
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
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';
import { createRuntime } from '../src/runtime.js';
import { openTelemetry } from '../src/telemetry/otel.js';
import type { Telemetry } from '../src/telemetry/port.js';

const TOKEN = 'hostile-witness-canary-41c2';
const ORIGIN = 'candor.test/hostile-log';
const logKey = generateKey(ORIGIN);
const witnessKey = generateKey('witness.test/hostile', SigType.cosignature_v1);
let fake: FakeService;

beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 't', token: TOKEN }] });
});
afterAll(async () => {
  await fake.close();
});

interface Hostile {
  url: string;
  /** Bytes of answer the server managed to write before the client stopped reading. */
  written(): number;
  close(): Promise<void>;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const closeServer = (server: Server): Promise<void> =>
  new Promise<void>((r) => {
    server.close(() => r());
    server.closeAllConnections();
  });

/** Answers 200 and streams `total` bytes of 'a' (chunked, with backpressure: never in memory). */
async function hugeWitness(total: number): Promise<Hostile> {
  let written = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      const pump = (): void => {
        while (written < total && !res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end();
      };
      res.on('close', () => undefined);
      pump();
    });
  });
  const url = await listen(server);
  return { url, written: () => written, close: () => closeServer(server) };
}

/** Answers 200 and then one byte a second, forever. */
async function tricklingWitness(): Promise<Hostile> {
  let written = 0;
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => {
        if (res.destroyed) return clearInterval(t);
        written++;
        res.write('a');
      }, 1000);
      timers.add(t);
      res.on('close', () => clearInterval(t));
    });
  });
  const url = await listen(server);
  return {
    url,
    written: () => written,
    close: async () => {
      for (const t of timers) clearInterval(t);
      await closeServer(server);
    },
  };
}

function checkpointer(
  ledger: ReturnType<typeof openMemoryLedger>,
  witness: Omit<WitnessOptions, 'key'>,
  logged: string[] = [],
  every = 1000,
) {
  const signer = parseSignerKey(logKey.signerKey);
  const key = parseVerifierKey(witnessKey.verifierKey);
  if (!signer.ok || !key.ok) throw new Error('bad test keys');
  return createCheckpointer({
    ledger,
    signer: signer.value,
    origin: ORIGIN,
    every,
    witness: { ...witness, key: key.value },
    log: (l) => logged.push(l),
    onCheckpoint: (e) => traceEvents([e]),
  });
}

function runtimeWith(
  witness: Omit<WitnessOptions, 'key'>,
  opts: { every?: number; telemetry?: Telemetry } = {},
) {
  const ledger = openMemoryLedger();
  const logged: string[] = [];
  const checkpoints = checkpointer(ledger, witness, logged, opts.every);
  const runtime = createRuntime({
    ledger,
    credentials: staticCredentials({ [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` } }),
    audit: { checkpoints },
    ...(opts.telemetry ? { telemetry: opts.telemetry } : {}),
  });
  const actions = new Map(referenceActions(fake.url).map((a) => [a.name, a]));
  return { ledger, runtime, logged, checkpoints, action: (n: string) => actions.get(n)! };
}

describe('a witness answering 300 MB', () => {
  it('is cut off after the answer limit, streamed, and the checkpoint is stored unwitnessed (too_large)', async () => {
    const w = await hugeWitness(300 * 1024 * 1024);
    try {
      const ledger = openMemoryLedger();
      const logged: string[] = [];
      const cp = checkpointer(ledger, { url: w.url, maxAnswerBytes: 64 * 1024 }, logged);
      for (let i = 1; i <= 4; i++) await ledger.append([opened(`op_${i}`)]);
      const started = Date.now();
      const stored = await cp.checkpoint();
      const took = Date.now() - started;
      expect(stored!.data).toMatchObject({
        size: 4,
        witnessed: false,
        witness_problem_code: 'too_large',
        witness_problem:
          'witness answered badly: answer larger than 65536 bytes (not read further)',
      });
      expect(took).toBeLessThan(3_000);
      // The client stopped reading: the server could not push anywhere near 300 MB.
      await new Promise((r) => setTimeout(r, 100));
      expect(w.written()).toBeLessThan(32 * 1024 * 1024);
      expect(logged.join('\n')).toMatch(
        /stored unwitnessed: witness answered badly: answer larger/,
      );
    } finally {
      await w.close();
    }
  });
});

describe('a witness answering one byte a second', () => {
  it('is cut off at the request limit (timeout), with the limit in the reason', async () => {
    const w = await tricklingWitness();
    try {
      const ledger = openMemoryLedger();
      const cp = checkpointer(ledger, { url: w.url, requestTimeoutMs: 300 });
      await ledger.append([opened('op_1')]);
      const started = Date.now();
      const stored = await cp.checkpoint();
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(stored!.data).toMatchObject({
        witnessed: false,
        witness_problem_code: 'timeout',
        witness_problem: 'witness did not answer: no complete answer within 300 ms',
      });
    } finally {
      await w.close();
    }
  });

  it('never holds an unrelated call: the periodic checkpoint runs after the call returns', async () => {
    const w = await tricklingWitness();
    try {
      // every: 1 — each call is followed by a checkpoint the witness answers at 1 byte/s (3 s limit).
      const { ledger, runtime, action, checkpoints } = runtimeWith(
        { url: w.url, requestTimeoutMs: 3_000 },
        { every: 1 },
      );
      const timings: number[] = [];
      for (const [name, input, id] of [
        ['create_deployment', { service: 'api', version: '7' }, 'hw-dep'],
        ['read_issue', { id: 'iss_1' }, 'hw-read'],
      ] as const) {
        const started = Date.now();
        const env = await runtime.run(action(name), input, { correlationId: id });
        timings.push(Date.now() - started);
        expect(env.operation).toBe(name);
      }
      // Each call is far inside its deadline although the witness holds its checkpoint 3 s.
      expect(Math.max(...timings)).toBeLessThan(2_000);
      await checkpoints.idle();
      const cps = (await ledger.read()).filter((e) => e.kind === 'checkpoint');
      expect(cps.length).toBeGreaterThanOrEqual(1);
      expect(cps[0]!.data).toMatchObject({ witnessed: false, witness_problem_code: 'timeout' });
      await runtime.close();
    } finally {
      await w.close();
    }
  }, 180_000);
});

describe('a witness that has cosigned a larger tree of this log', () => {
  let witness: RunningWitness;
  beforeAll(async () => {
    const signer = parseSignerKey(witnessKey.signerKey);
    const log = parseVerifierKey(logKey.verifierKey);
    if (!signer.ok || !log.ok) throw new Error('bad test keys');
    const state = memoryWitnessState();
    // What the witness saw of this log before it was rolled back (or forked): size 50.
    await state.set(ORIGIN, { size: 50, root: Buffer.alloc(32, 7) });
    witness = await startWitness({ signer: signer.value, logs: [log.value], state });
  });
  afterAll(async () => {
    await witness.close();
  });

  it('is reported as a possible fork or rollback with both sizes on the checkpoint', async () => {
    const ledger = openMemoryLedger();
    const cp = checkpointer(ledger, { url: witness.url });
    for (let i = 1; i <= 4; i++) await ledger.append([opened(`op_${i}`)]);
    const stored = await cp.checkpoint();
    expect(stored!.data).toMatchObject({
      size: 4,
      witnessed: false,
      witness_problem_code: 'fork',
      witness_size: 50,
      witness_problem:
        "possible fork or rollback: the witness has cosigned a tree of size 50 of this log, larger than this checkpoint's size 4",
    });
  });

  it('audit.witness_required stops at once (no waiting out witness_wait_ms), nothing sent, and the call span carries the fork event', async () => {
    const spans = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(spans)],
    });
    const { runtime, action } = runtimeWith(
      { url: witness.url, required: true, waitMs: 20_000 },
      { telemetry: openTelemetry(api, { tracerProvider }) },
    );
    const started = Date.now();
    const env = await runtime.run(
      action('delete_release'),
      { id: 'rel_1' },
      { correlationId: 'hw-fork' },
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(env).toMatchObject({ category: 'gate_locked', remote_effect: 'none' });
    expect(env.message).toContain('possible fork or rollback');
    expect(env.message).toContain('size 50');
    expect(env.message).toContain("checkpoint's size");
    expect(fake.groundTruth('hw-fork')).toEqual([]);
    const call = spans.getFinishedSpans().find((s) => s.name === 'execute_tool delete_release')!;
    const fork = call.events.find((e) => e.name === 'candor.witness.fork');
    expect(fork?.attributes).toMatchObject({
      'candor.witness.problem': 'fork',
      'candor.witness.size': 50,
    });
    expect(fork?.attributes?.['candor.checkpoint.size']).toBeGreaterThan(0);
    await runtime.close();
  });
});
