// A fleet on one PostgreSQL ledger (started by the test): three gateway processes run faulted
// operations against the fake — resets after commit, 429s, 4xx rejections, and 4xx/429 answered to
// a keyed retry whose earlier attempt committed with its reply lost; one is SIGKILLed mid-flight
// (its request committed, the reply held back); the survivors, sweeping concurrently, take its
// operation over once its lease lapses and settle it. A second test pauses an owner (SIGSTOP) past
// its lease with attempts in flight whose replies the fake holds back, lets another gateway take
// them over and settle them, then resumes it with its late answers (201, 429, 4xx), three rounds.
// Afterwards: every answer any agent was given, every operation_status and the ledger's projection
// agree with the fake's ground truth (no "none"/failed for a committed effect, no applied/succeeded
// for one that never committed); no duplicate effect; one chain, `audit verify` INTACT.
//
// 1,000 faulted operations per gateway (about 25 s alone, 80 s on a loaded 2-core machine);
// FLEET_OPS sets fewer or more. The paused-owner test takes about 20 s for its three rounds
// (FLEET_ROUNDS sets more); FLEET_DEBUG=1 prints each paused operation's events and answers.
// bench/ledger-append.js measures the append rate of 1 vs 4 gateways against raw inserts.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as audit } from '../src/cli/commands/audit.js';
import type { Envelope } from '../src/core/envelope.js';
import { startFakeService, type FakeService, type FaultSpec } from '../src/fakes/index.js';
import { staticCredentials } from '../src/engine/ports.js';
import { opened } from '../src/ledger/contract.case.js';
import type { StoredEvent } from '../src/ledger/events.js';
import { openPostgresLedger } from '../src/ledger/postgres/store.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';
import { createRuntime } from '../src/runtime.js';
import { projectOperations, type OperationView } from '../src/ledger/projection.js';
import { checkEnvelope, checkView, type Violation } from './support/history/oracle.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from './support/postgres.js';

const skip = postgresSkipReason();
const TOKEN = 'fleet-canary-token-93c1';
const OPS = Number(process.env['FLEET_OPS'] ?? 1000);
const LEASE_MS = 3_000;
const HUNG = 'gw-1-3'; // gw-1's fourth operation: committed by the fake, reply held back
const child = fileURLToPath(new URL('./fixtures/fleet/gateway.mjs', import.meta.url));
let server: ThrowawayPostgres | undefined;
let fake: FakeService;

beforeAll(async () => {
  if (skip !== undefined) return;
  server = await startPostgres();
  fake = await startFakeService({ tokens: [{ name: 'gateway', token: TOKEN }] });
});
const ownRuntimes: Array<{ close(): Promise<void> }> = [];
afterAll(async () => {
  // Each runtime owns its connection pools.
  await Promise.all(ownRuntimes.map((rt) => rt.close()));
  await fake?.close();
  await server?.stop();
});

/** One answer a gateway gave its agent (a call, a retry, a reconcile, a sweep, operation_status). */
interface Said extends Pick<
  Envelope,
  'ok' | 'category' | 'retry' | 'remote_effect' | 'message' | 'operation_id'
> {
  gw: string;
  via: string;
  cor: string | null;
  refusal?: string;
  /**
   * The fake's commits for `cor` when the test read the line: never fewer than when it was said,
   * and never more from a call the agent made on this answer (it waits for the test's `ack`).
   */
  commitsThen: number | null;
}

interface Gateway {
  name: string;
  proc: ChildProcess;
  out: () => string;
  said: Said[];
  exited: Promise<NodeJS.Signals | number | null>;
  /** Sends one command (test/fixtures/fleet/gateway.mjs) and resolves when it was answered. */
  send(cmd: Record<string, unknown>): Promise<void>;
}

const commits = (cor: string): number =>
  fake.groundTruth(cor).filter((t) => t.event === 'mutation_committed').length;

function gateway(url: string, name: string, count = OPS, sweep = true): Gateway {
  const proc = spawn(
    process.execPath,
    [child, url, fake.url, TOKEN, name, String(count), String(LEASE_MS), sweep ? 'sweep' : 'idle'],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  let partial = '';
  const said: Said[] = [];
  const waiting = new Map<string, (error?: string) => void>();
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      if (!line.startsWith('{"t"')) continue;
      const msg = JSON.parse(line) as { t: string; n: number; id?: string; error?: string } & Said;
      if (msg.t === 'done') waiting.get(msg.id!)?.(msg.error);
      if (msg.t === 'call') {
        said.push({ ...msg, commitsThen: msg.cor === null ? null : commits(msg.cor) });
        // The gateway's agent acts on this answer only after this acknowledgement.
        if (proc.exitCode === null && proc.signalCode === null)
          proc.stdin.write(`${JSON.stringify({ ack: msg.n })}\n`);
      }
    }
  });
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  // A killed gateway's stdin may break under an acknowledgement already on its way.
  proc.stdin.on('error', () => undefined);
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
    proc.on('exit', (code, signal) => {
      if (code !== 0 && signal === null) console.error(`${name} failed: ${err}`);
      resolve(signal ?? code);
    }),
  );
  let n = 0;
  const send = (cmd: Record<string, unknown>): Promise<void> => {
    const id = `${name}-cmd-${++n}`;
    const done = new Promise<void>((resolve, reject) =>
      waiting.set(id, (error) =>
        error === undefined ? resolve() : reject(new Error(`${name}: ${error}`)),
      ),
    );
    proc.stdin.write(`${JSON.stringify({ id, ...cmd })}\n`);
    return done;
  };
  return { name, proc, out: () => out, said, exited, send };
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms: number) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const REJECTIONS = [422, 401, 403, 409] as const;

/**
 * Faults per operation, by its number: a reset after commit; a 429 before anything is done; a 4xx
 * rejection (nothing done); a reset after commit whose retry under the same key (create_release,
 * even numbers) is answered 429 or 4xx — it speaks for that retry only; or nothing.
 */
function armFaults(name: string, ops = OPS): void {
  let lostThenRefused = 0;
  for (let i = 0; i < ops; i++) {
    const call_id = `${name}-${i}`;
    if (call_id === HUNG) {
      fake.arm({ call_id, phase: 'after_commit', action: 'delay', delay_ms: 120_000 });
    } else if (i % 5 === 1) {
      fake.arm({ call_id, phase: 'after_commit', action: 'rst' });
    } else if (i % 7 === 2) {
      fake.arm({ call_id, phase: 'status', status: 429, retry_after: 0 });
    } else if (i % 11 === 3) {
      fake.arm({ call_id, phase: 'status', status: REJECTIONS[i % 4]! });
    } else if (i % 26 === 4) {
      // create_release (even): the engine's retry under the same key meets the 429 or 4xx.
      fake.arm({ call_id, phase: 'after_commit', action: 'rst' });
      const retry = [429, ...REJECTIONS][lostThenRefused++ % 5]!;
      fake.arm({ call_id, phase: 'status', status: retry, retry_after: 0 });
    }
  }
}

const withSchema = (schema: string): string =>
  `${server!.url}${server!.url.includes('?') ? '&' : '?'}schema=${schema}`;

/**
 * Every claim — each answer the gateways printed, each operation_status at the end, and the
 * ledger's projection of each operation — against the fake's ground truth. An answer is checked
 * against the commits when the test read it (a "none" may not be said once the effect exists); the
 * projection and the final statuses against the final commits. Two commits are a duplicate.
 */
function falseClaims(gws: readonly Gateway[], ops: readonly OperationView[]): Violation[] {
  const byId = new Map(ops.map((o) => [o.operation_id, o]));
  const out: Violation[] = [];
  for (const g of gws)
    for (const s of g.said) {
      const cor =
        s.cor ?? (s.operation_id ? (byId.get(s.operation_id)?.correlation_id ?? null) : null);
      if (cor === null) continue;
      const n = s.via === 'status' || s.commitsThen === null ? commits(cor) : s.commitsThen;
      out.push(...checkEnvelope(`${s.gw} ${s.via} ${cor}`, s as unknown as Envelope, n));
    }
  for (const o of ops)
    out.push(...checkView(`ledger ${o.correlation_id}`, o, commits(o.correlation_id!)));
  return out;
}

/** One line: how many claims were checked; answers whose fields and sentence disagree, if any. */
function summary(label: string, gws: readonly Gateway[], claims: readonly Violation[]): void {
  const checked = gws.reduce((n, g) => n + g.said.length, 0);
  const incoherent = claims.filter((v) => v.claim === 'incoherent');
  console.log(
    `${label}: ${checked} answers checked against the fake, 0 false claims, 0 duplicates` +
      (incoherent.length === 0
        ? ''
        : `; ${incoherent.length} incoherent (fields and sentence disagree), e.g. ${incoherent[0]!.source}: ${incoherent[0]!.said}`),
  );
}

function duplicates(): string[] {
  const seen = new Map<string, number>();
  for (const t of fake.groundTruth())
    if (t.event === 'mutation_committed') seen.set(t.call_id, (seen.get(t.call_id) ?? 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([id, n]) => `${id}: ${n} commits`);
}

async function verifyIntact(url: string, events: readonly StoredEvent[]): Promise<void> {
  // One chain: consecutive seqs, each record chained to the one before.
  events.forEach((e, i) => {
    expect(e.seq).toBe(i + 1);
    if (i > 0) expect(e.prev_hash).toBe(events[i - 1]!.hash);
  });
  let out = '';
  const code = await audit(['verify', url, '--json'], {
    out: (s) => void (out += s),
    err: () => undefined,
  });
  expect(code, out).toBe(0);
  expect((JSON.parse(out) as { code: string }).code).toBe('INTACT');
}

/** Rounds of the paused-owner test: a round = pause past the lease → takeover → late answers. */
const ROUNDS = Math.max(3, Number(process.env['FLEET_ROUNDS'] ?? 3));
/** How long the fake holds a paused owner's replies back: they arrive while it is stopped. */
const HELD_MS = 4_000;

interface RoundOp {
  cor: string;
  action: string;
  input: Record<string, unknown>;
  /** Armed in order; the last one shapes the reply the paused owner receives late. */
  faults: FaultSpec[];
  late: string;
  /** Whether the gateway that takes it over can settle it while P is stopped. */
  settles: boolean;
}

/**
 * What the paused owner has in flight in round `r`: keyed releases and unkeyed deployments whose
 * replies the fake holds back — a committed 201, a 429, a 4xx rejection, and a 429/4xx answered to
 * the automatic retry under the same key after a first attempt committed with its reply lost.
 */
function roundPlan(r: number): RoundOp[] {
  const four = REJECTIONS[r % 4]!;
  const four2 = REJECTIONS[(r + 1) % 4]!;
  const held = { delay_ms: HELD_MS };
  const release = (j: number) => ({
    cor: `pause-${r}-${j}`,
    action: 'create_release_slow',
    input: { version: `9.${r}.${j}` },
  });
  const deployment = (j: number) => ({
    cor: `pause-${r}-${j}`,
    action: 'create_deployment_slow',
    input: { service: 'paused', version: `9.${r}.${j}` },
  });
  const retryStatus = r % 2 === 0 ? 429 : four2;
  return [
    {
      ...release(0),
      faults: [{ phase: 'after_commit', action: 'delay', ...held }],
      late: '201',
      settles: true,
    },
    {
      ...deployment(1),
      faults: [{ phase: 'after_commit', action: 'delay', ...held }],
      late: '201',
      settles: true,
    },
    {
      ...release(2),
      faults: [{ phase: 'status', status: 429, retry_after: 0, ...held }],
      late: '429',
      settles: true,
    },
    {
      ...release(3),
      faults: [{ phase: 'status', status: four, ...held }],
      late: `${four}`,
      settles: true,
    },
    {
      ...deployment(4),
      faults: [{ phase: 'status', status: four2, ...held }],
      late: `${four2}`,
      settles: false,
    },
    {
      ...release(5),
      faults: [
        { phase: 'after_commit', action: 'rst' },
        { phase: 'status', status: retryStatus, retry_after: 0, ...held },
      ],
      late: `${retryStatus} to the retry after a committed attempt's lost reply`,
      settles: true,
    },
  ];
}

async function within<T>(what: string, p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const writerOf = (e: StoredEvent): string | null => {
  const d = e.data as { writer?: unknown; worker?: unknown };
  if (e.kind === 'attempt_started') return typeof d.worker === 'string' ? d.worker : null;
  return typeof d.writer === 'string' ? d.writer : null;
};

/**
 * One round: P (gateway r) starts six operations whose replies the fake holds back; once every
 * request has reached the fake, P is SIGSTOPped; its lease lapses; the work moves to another
 * gateway (round 0: the successor's sweep, then its agent's calls with each operation_id; round
 * 1: those calls alone take the operations over; round 2: the third gateway's sweep takes them
 * over and the agent asks the successor, which does not own them); the held replies are handed to
 * P's socket while it is stopped; then SIGCONT, and P acts on its late answers. Returns the story.
 */
async function pauseRound(r: number, gws: readonly Gateway[], ledger: LedgerStore) {
  const [P, S, T] = [gws[r % 3]!, gws[(r + 1) % 3]!, gws[(r + 2) % 3]!];
  const plan = roundPlan(r);
  const held = plan.map((op) => {
    let last = '';
    for (const f of op.faults) last = fake.arm({ ...f, call_id: op.cor }).id;
    return last;
  });
  const runs = plan.map((op) =>
    P.send({ cmd: 'run', action: op.action, input: op.input, cor: op.cor }).then(
      () => null,
      (e: unknown) => String(e),
    ),
  );
  // Every held request has reached the fake whole (and committed where its fault commits).
  const heldRequests = await within(
    `round ${r}: ${P.name}'s requests to reach the fake`,
    Promise.all(
      plan.map(async (op, j) => {
        const head = await fake.whenTruth(
          (e) => e.call_id === op.cor && e.event === 'headers_complete' && e.fault_id === held[j],
        );
        await fake.whenTruth((e) => e.request === head.request && e.event === 'body_complete');
        return head.request;
      }),
    ),
    60_000,
  );
  P.proc.kill('SIGSTOP');
  const stoppedAt = fake.groundTruth().at(-1)!.seq;
  await until(
    `round ${r}: ${P.name}'s lease to lapse`,
    async () => {
      const [lease] = await ledger.leases!.leases([P.name]);
      return lease !== undefined && lease.expires_at < Date.now();
    },
    30_000,
  );
  const ids = new Map<string, string>();
  for (const op of plan) {
    const opened = (await ledger.query({ correlation_id: op.cor })).find(
      (e) => e.kind === 'operation_opened',
    );
    ids.set(op.cor, opened!.operation_id!);
  }
  if (r % 3 === 0) await within(`${S.name}'s sweep`, S.send({ cmd: 'sweep' }), 60_000);
  if (r % 3 === 2) await within(`${T.name}'s sweep`, T.send({ cmd: 'sweep' }), 60_000);
  for (const op of plan) {
    const retry = { cmd: 'retry', action: op.action, input: op.input, cor: op.cor };
    await within(
      `${S.name}: ${op.cor} with its operation_id`,
      S.send({ ...retry, operation_id: ids.get(op.cor) }),
      60_000,
    );
  }
  // The replies P has not read were handed to its socket while it was stopped.
  for (const [j, op] of plan.entries()) {
    const written = await within(
      `the held reply to ${op.cor}`,
      fake.whenTruth((e) => e.request === heldRequests[j] && e.event === 'response_bytes_written'),
      30_000,
    );
    expect(written.seq, op.cor).toBeGreaterThan(stoppedAt);
  }
  const byCor = (events: readonly StoredEvent[]) =>
    new Map(projectOperations(events).map((o) => [o.correlation_id!, o]));
  const before = byCor(await ledger.read());
  for (const op of plan) expect(before.get(op.cor)!.owner, op.cor).not.toBe(P.name);

  P.proc.kill('SIGCONT');
  expect(await within(`round ${r}: ${P.name}'s late answers`, Promise.all(runs), 60_000)).toEqual(
    plan.map(() => null),
  );
  const events = await ledger.read();
  const after = byCor(events);
  const story: string[] = [];
  for (const op of plan) {
    const [b, a] = [before.get(op.cor)!, after.get(op.cor)!];
    // P lost the operation while stopped; nothing it wrote afterwards speaks for the outcome.
    const lost = a.owner_changes.find((c) => c.from === P.name)!.seq;
    const fenced = events.filter(
      (e) =>
        e.operation_id === a.operation_id &&
        e.seq > lost &&
        writerOf(e) === P.name &&
        ['attempt_started', 'attempt_finished', 'operation_resolved'].includes(e.kind),
    );
    expect(fenced.map((e) => `${op.cor} ${e.kind}`)).toEqual([]);
    // What P learned late is recorded as evidence (an observation), not as a resolution.
    const late = events.filter(
      (e) =>
        e.operation_id === a.operation_id &&
        e.seq > lost &&
        e.kind === 'observation_recorded' &&
        e.data.source === 'late_answer',
    );
    expect(late.length, `${op.cor}: ${P.name}'s late answer as an observation`).toBeGreaterThan(0);
    // The new owner settled every operation it could (all but the unkeyed one whose only attempt
    // was still in flight: its lookup cannot prove absence, so a person decides) before P woke;
    // a settled operation stays settled, P's late answer can only add knowledge.
    if (op.settles) expect(`${op.cor} ${b.state}`).toBe(`${op.cor} succeeded`);
    if (b.state === 'succeeded') expect(`${op.cor} ${a.state}`).toBe(`${op.cor} succeeded`);
    const told = P.said.filter((s) => s.cor === op.cor).at(-1);
    if (process.env['FLEET_DEBUG'])
      story.push(
        events
          .filter((e) => e.operation_id === a.operation_id)
          .map((e) => `   ${e.seq} ${e.kind} ${JSON.stringify(e.data).slice(0, 400)}`)
          .join('\n'),
        ...gws.flatMap((g) =>
          g.said
            .filter((x) => x.operation_id === a.operation_id)
            .map(
              (x) =>
                `   ${x.gw} ${x.via}: ${x.category}/${x.retry}/${x.remote_effect} ${x.message}`,
            ),
        ),
      );
    story.push(
      `round ${r} ${op.cor} (${op.action}, late ${op.late}): ${P.name} paused, owner now ${a.owner}; ` +
        `${b.state ?? '-'}/${b.remote_effect} before the late answer, ${a.state ?? '-'}/${a.remote_effect} after; ` +
        `commits ${commits(op.cor)}; ${P.name}'s agent told ${told?.category}/${told?.retry}/${told?.remote_effect} "${told?.message}"`,
    );
  }
  return story;
}

describe.skipIf(skip !== undefined)('a fleet of gateways on one PostgreSQL ledger', () => {
  it(
    'three gateways, one SIGKILLed mid-flight: a survivor takes over and settles; one chain, no duplicate effect, no false claim',
    { timeout: 300_000 },
    async () => {
      const url = withSchema('fleet');
      const names = ['gw-1', 'gw-2', 'gw-3'];
      for (const n of names) armFaults(n);
      const gws = names.map((n) => gateway(url, n));
      const [g1, g2, g3] = gws as [Gateway, Gateway, Gateway];

      await until(
        `${HUNG} to be committed`,
        () => fake.groundTruth(HUNG).some((t) => t.event === 'mutation_committed'),
        120_000,
      );
      g1.proc.kill('SIGKILL');
      expect(await g1.exited).toBe('SIGKILL');

      const ledger = await openPostgresLedger(server!.url, { schema: 'fleet' });
      try {
        await until(
          'the survivors to finish their operations',
          () => [g2, g3].every((g) => g.out().includes('ops done')),
          240_000,
        );
        // The dead gateway's operation is taken over once its lease lapses, then settled.
        await until(
          'nothing unresolved',
          async () => (await ledger.unresolved()).length === 0,
          60_000,
        );
        for (const g of [g2, g3]) g.proc.stdin!.end();
        expect(await g2.exited).toBe(0);
        expect(await g3.exited).toBe(0);

        const events = await ledger.read();
        const ops = projectOperations(events);
        await verifyIntact(url, events);

        // Every operation is settled: succeeded exactly when the fake committed it once, failed
        // (a 4xx to its only attempt) exactly when it never did.
        for (const o of ops) {
          const n = commits(o.correlation_id!);
          expect(`${o.correlation_id} ${n} ${o.state}`).toBe(
            `${o.correlation_id} ${n} ${n === 1 ? 'succeeded' : 'failed'}`,
          );
        }
        expect(ops.filter((o) => o.state === 'failed').length).toBeGreaterThan(0);
        const hung = ops.find((o) => o.correlation_id === HUNG)!;
        expect(hung.owner_changes).toHaveLength(1);
        expect(hung.owner_changes[0]).toMatchObject({ from: 'gw-1', reason: 'lease_expired' });
        expect(['gw-2', 'gw-3']).toContain(hung.owner);
        for (const o of ops) expect(o.owner_changes.length).toBeLessThanOrEqual(1);
        // gw-1 got no further than its hung operation; the survivors ran all of theirs.
        expect(ops.filter((o) => o.owner === 'gw-2')).toHaveLength(
          OPS + (hung.owner === 'gw-2' ? 1 : 0),
        );
        expect(ops.filter((o) => o.correlation_id?.startsWith('gw-1-'))).toHaveLength(4);

        // Every answer and every operation_status (the survivors print one per operation at the
        // end) against the fake's ground truth; every 4xx/429 kind was met.
        for (const g of [g2, g3])
          expect(g.said.filter((s) => s.via === 'status').length).toBeGreaterThanOrEqual(OPS);
        const claims = falseClaims(gws, ops);
        expect(claims.filter((v) => v.claim !== 'incoherent')).toEqual([]);
        summary('SIGKILL test', gws, claims);
        expect(duplicates()).toEqual([]);
        const statuses = new Set(
          fake
            .groundTruth()
            .filter((t) => t.event === 'response_bytes_written' && t.status! >= 400)
            .map((t) => t.status),
        );
        for (const status of [401, 403, 409, 422, 429]) expect(statuses).toContain(status);
        // The 429s and 4xx that answered a retry whose earlier attempt had committed (its reply
        // lost): the operation still settled succeeded above, and no answer said otherwise.
        const toRetries = new Set<number>();
        for (const o of ops) {
          const truth = fake.groundTruth(o.correlation_id!);
          const commit = truth.find((t) => t.event === 'mutation_committed');
          for (const t of truth)
            if (commit && t.event === 'response_bytes_written' && t.status! >= 400)
              if (t.request > commit.request) toRetries.add(t.status!);
        }
        const expected = OPS >= 500 ? [401, 403, 409, 422, 429] : [429];
        for (const status of expected) expect(toRetries).toContain(status);
        expect(JSON.stringify(events)).not.toContain(TOKEN);
      } finally {
        await ledger.close();
        for (const g of gws) if (g.proc.exitCode === null) g.proc.kill('SIGKILL');
      }
    },
  );

  it(
    'an owner paused past its lease with attempts in flight: another gateway takes them over and settles them; resumed, its late answers (201, 429, 4xx) are fenced — three rounds',
    { timeout: 240_000 },
    async () => {
      const schema = 'fleet_pause';
      const url = withSchema(schema);
      const gws = ['gw-a', 'gw-b', 'gw-c'].map((n) => gateway(url, n, 0, false));
      const ledger = await openPostgresLedger(server!.url, { schema });
      const story: string[] = [];
      try {
        await until(
          'the gateways to start',
          () => gws.every((g) => g.out().includes('ops done')),
          60_000,
        );
        for (let r = 0; r < ROUNDS; r++) {
          story.push(...(await pauseRound(r, gws, ledger)));
        }
        for (const g of gws) g.proc.stdin!.end();
        for (const g of gws) expect(await g.exited).toBe(0);

        const events = await ledger.read();
        const ops = projectOperations(events);
        await verifyIntact(url, events);
        const claims = falseClaims(gws, ops);
        expect(
          claims.filter((v) => v.claim !== 'incoherent'),
          story.join('\n'),
        ).toEqual([]);
        expect(duplicates()).toEqual([]);
        summary(`paused-owner test (${ROUNDS} rounds)`, gws, claims);
        if (process.env['FLEET_DEBUG']) console.log(story.join('\n'));
      } finally {
        await ledger.close();
        for (const g of gws) {
          if (g.proc.exitCode === null) {
            g.proc.kill('SIGCONT');
            g.proc.kill('SIGKILL');
          }
        }
      }
    },
  );

  it(
    'two gateways recover the same dead owner concurrently: each operation gets exactly one new owner and one lookup',
    { timeout: 120_000 },
    async () => {
      const schema = 'fleet_race';
      // The reference actions' 400 ms deadlines suit the matrix's delay faults; here a lookup that
      // times out on a loaded machine would leave an operation for a person, and this test is
      // about who owns it, not about timing.
      const actions = referenceActions(fake.url).map((a) => ({
        ...a,
        timeouts: {
          total_ms: 30_000,
          connect_ms: 10_000,
          first_byte_ms: 30_000,
          body_idle_ms: 10_000,
        },
      }));
      const deploy = actions.find((a) => a.name === 'create_deployment')!;
      const credentials = staticCredentials({
        [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` },
      });
      const handle = () => openPostgresLedger(server!.url, { schema });
      // The dead owner: its clock a minute behind, so its 30 s lease has lapsed by real time.
      const deadLedger = await handle();
      const dead = createRuntime({
        ledger: deadLedger,
        credentials,
        actions,
        owner: 'gw-dead',
        lease: { ttl_ms: 30_000 },
        clock: { now: () => Date.now() - 60_000 },
      });
      ownRuntimes.push(dead);
      const ops: string[] = [];
      for (let i = 0; i < 12; i++) {
        const cor = `race-${i}`;
        fake.arm({ call_id: cor, phase: 'after_commit', action: 'rst' });
        const env = await dead.run(
          deploy,
          { service: 'race', version: `${i}` },
          { correlationId: cor },
        );
        expect(env.category).toBe('outcome_unknown');
        ops.push(env.operation_id!);
      }
      await deadLedger.close();

      const gateways = await Promise.all(
        ['gw-b', 'gw-c'].map(async (owner) => {
          const ledger = await handle();
          const rt = createRuntime({
            ledger,
            credentials,
            actions,
            owner,
            lease: { ttl_ms: 30_000 },
          });
          ownRuntimes.push(rt);
          return { ledger, rt };
        }),
      );
      try {
        const reports = await Promise.all(gateways.map((g) => g.rt.recover()));
        // Each operation is settled by exactly one of them; the other, if it met the operation
        // after the winner took it over but before it settled, reports it left to that owner
        // (sending and looking up nothing).
        const items = reports.flat();
        const found = items.filter((i) => i.outcome === 'found_by_lookup');
        expect(found.map((i) => i.operation_id).sort()).toEqual([...ops].sort());
        const others = items.filter((i) => i.outcome !== 'found_by_lookup');
        for (const i of others) {
          expect(i.outcome).toBe('left_to_owner');
          expect(i.detail).toMatch(
            /owned by gw-[bc](, whose lease is live until|, not gw-dead: another gateway took it over first)/,
          );
          expect(i.envelope.remote_effect).not.toBe('none');
        }
        const check = gateways[0]!.ledger;
        for (const [i, op] of ops.entries()) {
          const changes = (await check.query({ operation_id: op })).filter(
            (e) => e.kind === 'owner_changed',
          );
          expect(changes).toHaveLength(1);
          expect(changes[0]!.data).toMatchObject({ from: 'gw-dead', reason: 'lease_expired' });
          const lookups = fake
            .groundTruth(`race-${i}.lookup`)
            .filter((t) => t.event === 'received' && t.method === 'GET');
          expect(lookups).toHaveLength(1);
        }
      } finally {
        for (const g of gateways) await g.ledger.close();
      }
    },
  );

  it('LISTEN/NOTIFY: a watcher hears of another gateway’s commit without polling', async () => {
    const a = await openPostgresLedger(server!.url, { schema: 'fleet_notify' });
    const b = await openPostgresLedger(server!.url, { schema: 'fleet_notify' });
    try {
      let heard = 0;
      let wake!: () => void;
      const woken = new Promise<void>((r) => (wake = r));
      const stop = await a.watch!(() => {
        heard++;
        wake();
      });
      const stored = await b.append([opened('op_notify_1')]);
      await woken;
      expect(heard).toBeGreaterThanOrEqual(1);
      expect((await a.read(stored[0]!.seq)).map((e) => e.operation_id)).toEqual(['op_notify_1']);
      await stop();
      await b.append([opened('op_notify_2')]);
      // After stop() nothing more is delivered: a read of the new head proves the append landed.
      expect((await a.read(stored[0]!.seq + 1)).map((e) => e.operation_id)).toEqual([
        'op_notify_2',
      ]);
      expect(heard).toBe(1);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
