// The model of one history: what the destination does to each attempt and each lookup of one
// operation, which contract the action declares, and the random stream the agent draws its moves
// from. Everything follows from one integer seed, so a failing history replays from its seed alone
// (CANDOR_HISTORY_SEED). The plan says what the world does; the agent (agent.ts) decides what to
// ask, and the oracle (oracle.ts) compares every answer with the fake's ground truth.

/** mulberry32: small, fast and good enough to draw faults (not for anything secret). */
export interface Rng {
  next(): number;
  int(lo: number, hi: number): number;
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  weighted<T>(table: ReadonlyArray<readonly [T, number]>): T;
}

export function rng(seed: number): Rng {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const r: Rng = {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)]!,
    weighted: (table) => {
      const total = table.reduce((s, [, w]) => s + w, 0);
      let x = next() * total;
      for (const [v, w] of table) {
        if ((x -= w) < 0) return v;
      }
      return table.at(-1)![0];
    },
  };
  return r;
}

/**
 * What the destination does to one attempt (a POST of the operation). `commits` says whether the
 * fake applies the write before that answer (ground truth decides in the end: under an honoured
 * key a later request replays instead of committing).
 */
export type AttemptFault =
  | { kind: 'ok' }
  | { kind: 'refused' }
  | { kind: 'reset_before_commit'; phase: 'after_request_headers' | 'after_request_body' }
  | { kind: 'reset_after_commit'; action: 'rst' | 'fin' }
  | { kind: 'delayed_past_deadline' }
  | { kind: 'cut_body'; action: 'rst' | 'fin'; at_byte: number }
  | { kind: 'status'; status: number; commit: boolean };

/** What the destination does to one lookup (a reconciliation GET). */
export type LookupFault =
  { kind: 'ok' } | { kind: 'status'; status: 500 | 503 } | { kind: 'hang' } | { kind: 'reset' };

/** The action's declared contract (actions are built in world.ts). */
export const CONTRACTS = [
  'keyed', // honoured Idempotency-Key, lookup by client_ref
  'keyed_no_lookup', // honoured key, no lookup
  'unkeyed', // no key, lookup by client_ref
  'unkeyed_no_lookup', // no key, no lookup: an unknown outcome needs a person
  'key_not_honoured', // a key header is sent, the destination ignores it; lookup by client_ref
] as const;
export type Contract = (typeof CONTRACTS)[number];

export interface HistoryPlan {
  seed: number;
  /** The operation's correlation id, also the fake's request id for its attempts. */
  id: string;
  contract: Contract;
  /** One fault per possible attempt (the budget is 4), in order. */
  attempts: AttemptFault[];
  /** One fault per possible lookup, in order; later lookups answer normally. */
  lookups: LookupFault[];
  /** Fleet: the attempt (1-based) during which the first owner stalls past its lease, else 0. */
  pauseAt: number;
}

const FOUR_XX = [400, 401, 403, 409, 422] as const;

function attemptFault(r: Rng): AttemptFault {
  return r.weighted<() => AttemptFault>([
    [() => ({ kind: 'ok' }), 22],
    [() => ({ kind: 'refused' }), 8],
    [
      () => ({
        kind: 'reset_before_commit',
        phase: r.pick(['after_request_headers', 'after_request_body'] as const),
      }),
      7,
    ],
    [() => ({ kind: 'reset_after_commit', action: r.pick(['rst', 'fin'] as const) }), 11],
    [() => ({ kind: 'delayed_past_deadline' }), 4],
    [
      () => ({ kind: 'cut_body', action: r.pick(['rst', 'fin'] as const), at_byte: r.int(1, 12) }),
      8,
    ],
    [() => ({ kind: 'status', status: r.pick(FOUR_XX), commit: false }), 16],
    [() => ({ kind: 'status', status: 429, commit: false }), 11],
    [() => ({ kind: 'status', status: r.pick([500, 502, 503] as const), commit: false }), 7],
    // A 5xx after the write was applied: the service committed, then failed to answer well.
    [() => ({ kind: 'status', status: r.pick([500, 502, 503] as const), commit: true }), 6],
  ])();
}

function lookupFault(r: Rng): LookupFault {
  return r.weighted<() => LookupFault>([
    [() => ({ kind: 'ok' }), 70],
    [() => ({ kind: 'status', status: r.pick([500, 503] as const) }), 16],
    [() => ({ kind: 'hang' }), 6],
    [() => ({ kind: 'reset' }), 8],
  ])();
}

/** The plan of history `seed`; `r` continues the same stream for the agent's moves. */
export function planHistory(
  seed: number,
  prefix: string,
  fleet = false,
): { plan: HistoryPlan; r: Rng } {
  const r = rng(seed * 2654435761);
  const contract = r.pick(CONTRACTS);
  const attempts = [attemptFault(r), attemptFault(r), attemptFault(r), attemptFault(r)];
  const lookups = [lookupFault(r), lookupFault(r), lookupFault(r)];
  // The paused owner stalls on an attempt that reached the fake (a refused connect has no answer).
  let pauseAt = 0;
  if (fleet) {
    pauseAt = r.int(1, 2);
    if (attempts[pauseAt - 1]!.kind === 'refused') attempts[pauseAt - 1] = { kind: 'ok' };
  }
  return { plan: { seed, id: `${prefix}-${seed}`, contract, attempts, lookups, pauseAt }, r };
}

export function describeAttempt(f: AttemptFault): string {
  switch (f.kind) {
    case 'ok':
      return '201';
    case 'refused':
      return 'connect refused';
    case 'reset_before_commit':
      return `reset ${f.phase === 'after_request_headers' ? 'after the head' : 'after the body'}, before commit`;
    case 'reset_after_commit':
      return `${f.action.toUpperCase()} after commit`;
    case 'delayed_past_deadline':
      return 'committed, reply delayed past the client deadline';
    case 'cut_body':
      return `201 with its body cut at byte ${f.at_byte} (${f.action.toUpperCase()})`;
    case 'status':
      return `${f.status}${f.commit ? ' after commit' : ''}`;
  }
}

export function describeLookup(f: LookupFault): string {
  switch (f.kind) {
    case 'ok':
      return 'answers';
    case 'status':
      return `${f.status}`;
    case 'hang':
      return 'hangs past the deadline';
    case 'reset':
      return 'reset';
  }
}

export function describePlan(p: HistoryPlan): string {
  return [
    `seed ${p.seed} (${p.id}), contract ${p.contract}`,
    `  attempts: ${p.attempts.map((a, i) => `#${i + 1} ${describeAttempt(a)}`).join('; ')}`,
    `  lookups: ${p.lookups.map((l, i) => `#${i + 1} ${describeLookup(l)}`).join('; ')}`,
    ...(p.pauseAt > 0 ? [`  the first owner stalls past its lease on attempt #${p.pauseAt}`] : []),
  ].join('\n');
}
