// Runs each matrix row against the fake service through the real runtime and checks four
// assertions per row, the oracle, and that no secret reached any result (DESIGN.md §4).
import { randomBytes } from 'node:crypto';
import type { LookupFunction } from 'node:net';
import { checkTranscript } from '../agent/rules.js';
import { nextActionFor } from '../agent/scripted.js';
import { createRecorder } from '../agent/transcript.js';
import type { classify } from '../core/classify.js';
import type { Envelope } from '../core/envelope.js';
import type { ActionDefinition } from '../engine/action.js';
import { staticCredentials } from '../engine/ports.js';
import { createRuntime, type Runtime } from '../engine/runtime.js';
import type { FakeService, FaultSpec, TruthEvent } from '../fakes/index.js';
import type { StoredEvent } from '../ledger/events.js';
import type { LedgerStore } from '../ledger/store.js';
import { REFERENCE_AUTHORITY, referenceActions } from './reference-actions.js';
import type { Matrix, MatrixRow } from './spec.js';

export interface Check {
  ok: boolean;
  expected: unknown;
  actual: unknown;
  detail?: string;
}

export type OracleVerdict = 'consistent' | 'imprecise' | 'unsafe';

export interface RowResult {
  id: string;
  operation: string;
  condition: string;
  remote_effect_known: boolean;
  correlation_id: string;
  operation_id: string | null;
  envelope: Envelope | null;
  final: Envelope | null;
  assertions: {
    category_and_retry: Check;
    agent_next_action: Check;
    remote_state: Check;
    event_trail: Check;
  };
  oracle: { verdict: OracleVerdict; detail: string };
  secret_in_result: boolean;
  passed: boolean;
  error: string | null;
  /** Client (ledger) and fake (ground truth) events of this row, merged by time. */
  timeline: Array<{ at: number; source: 'ledger' | 'fake'; event: string; detail: string }>;
}

export interface MatrixRunOptions {
  ledger: LedgerStore;
  fake: FakeService;
  /** The bearer token the fake accepts; a canary that must appear in no result. */
  canary: string;
  lookup?: LookupFunction;
  classify?: typeof classify;
  onRow?: (result: RowResult, index: number, total: number) => void;
  /** Only rows whose id matches. */
  filter?: (row: MatrixRow) => boolean;
}

export interface MatrixReport {
  matrix: string;
  rows: RowResult[];
  summary: {
    rows: number;
    passed: number;
    failed: number;
    imprecise: number;
    unsafe: number;
    secret_leaks: number;
  };
}

const UNSAFE_WHEN_COMMITTED = new Set([
  'confirmed_failure',
  'local_failure',
  'confirmed_rejection',
  'authentication_failed',
  'authorization_denied',
  'rate_limited',
]);

export async function runMatrix(matrix: Matrix, options: MatrixRunOptions): Promise<MatrixReport> {
  const { fake, ledger } = options;
  const actions = new Map(referenceActions(fake.url).map((a) => [a.name, a]));
  const runtime = createRuntime({
    ledger,
    credentials: staticCredentials({
      [REFERENCE_AUTHORITY]: { authorization: `Bearer ${options.canary}` },
    }),
    actions: [...actions.values()],
    backoff_ms: () => 5,
    ...(options.lookup ? { lookup: options.lookup } : {}),
    ...(options.classify ? { classify: options.classify } : {}),
    agent: 'candor-matrix',
  });
  const runTag = randomBytes(3).toString('hex');
  const rows = matrix.rows.filter((r) => options.filter?.(r) ?? true);
  const results: RowResult[] = [];
  for (const [i, row] of rows.entries()) {
    const result = await runRow(row, `${row.id}.${runTag}`, runtime, actions, options);
    results.push(result);
    options.onRow?.(result, i, rows.length);
  }
  await runtime.endSession('matrix finished');
  const summary = {
    rows: results.length,
    passed: results.filter((r) => r.passed).length,
    failed: results.filter((r) => !r.passed).length,
    imprecise: results.filter((r) => r.oracle.verdict === 'imprecise').length,
    unsafe: results.filter((r) => r.oracle.verdict === 'unsafe').length,
    secret_leaks: results.filter((r) => r.secret_in_result).length,
  };
  return { matrix: matrix.matrix, rows: results, summary };
}

function conditionLabel(c: MatrixRow['condition']): string {
  const f = c as Record<string, unknown>;
  const text = (v: unknown): string =>
    typeof v === 'string' || typeof v === 'number' ? String(v) : '';
  if (f.before_bytes !== undefined) return `before_bytes:${text(f.before_bytes)}`;
  if (f.none !== undefined) return 'none';
  const detail = text(f.action ?? f.variant ?? f.status ?? f.mode);
  const delay = f.delay_ms !== undefined ? `+${text(f.delay_ms)}ms` : '';
  const at = f.at_byte !== undefined ? `@${text(f.at_byte)}` : '';
  return `${text(f.phase)}${detail === '' ? '' : `:${detail}`}${delay}${at}`;
}

function fill(value: unknown, vars: Record<string, string>): unknown {
  if (typeof value === 'string')
    return value.replace(/\{\{(\w+(?:\.\w+)?)\}\}/g, (m, k: string) => vars[k] ?? m);
  if (Array.isArray(value)) return value.map((v) => fill(v, vars));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, vars)]));
  return value;
}

async function runRow(
  row: MatrixRow,
  cor: string,
  runtime: Runtime,
  actions: Map<string, ActionDefinition>,
  options: MatrixRunOptions,
): Promise<RowResult> {
  const { fake, ledger, canary } = options;
  const fail = (detail: string): Check => ({ ok: false, expected: null, actual: null, detail });
  const result: RowResult = {
    id: row.id,
    operation: row.operation,
    condition: conditionLabel(row.condition),
    remote_effect_known: row.remote_effect_known,
    correlation_id: cor,
    operation_id: null,
    envelope: null,
    final: null,
    assertions: {
      category_and_retry: fail('not run'),
      agent_next_action: fail('not run'),
      remote_state: fail('not run'),
      event_trail: fail('not run'),
    },
    oracle: { verdict: 'consistent', detail: '' },
    secret_in_result: false,
    passed: false,
    error: null,
    timeline: [],
  };
  const base = actions.get(row.operation);
  if (!base) {
    result.error = `unknown operation "${row.operation}" (reference actions: ${[...actions.keys()].join(', ')})`;
    return result;
  }
  const recorder = createRecorder();
  try {
    const vars: Record<string, string> = { correlation_id: cor };
    let setupId: string | null = null;
    if (row.setup) {
      const created = fake.resources.create(row.setup.kind, row.setup.fields as never, {
        correlation_id: null,
        request: 0,
      });
      setupId = created.id;
      vars['setup.id'] = created.id;
      for (let i = 0; i < row.setup.same_client_ref; i++) {
        fake.resources.create(
          row.setup.kind,
          { ...(row.setup.fields as object), client_ref: cor },
          { correlation_id: null, request: 0 },
        );
      }
    }
    const input = fill(row.input, vars) as Record<string, unknown>;
    let action = base;
    const c = row.condition;
    // A warm-up call runs first (same route, its own operation); keep-alive races arm on it, so
    // that its reply leaves a socket the measured call would reuse.
    const armOn = row.warmup ? `${cor}.warmup` : cor;
    if ('before_bytes' in c) {
      action = {
        ...base,
        destination: {
          ...base.destination,
          origin: await fake.unreachableUrl(
            c.before_bytes as 'refused' | 'unresolvable' | 'blackhole',
          ),
        },
      };
    } else if (!('none' in c)) {
      fake.arm({ ...(c as object), call_id: armOn } as FaultSpec);
    }
    if (row.warmup) await runtime.run(base, input, { correlationId: armOn });
    const call = async (
      tool: string,
      args: Record<string, unknown>,
      fn: () => Promise<Envelope>,
    ): Promise<Envelope> => {
      const at = Date.now();
      const env = await fn();
      recorder.record({ at, tool, args, result: env });
      return env;
    };
    const env = await call(row.operation, input, () =>
      runtime.run(action, input, { correlationId: cor }),
    );
    result.envelope = env;
    result.operation_id = env.operation_id;
    // The fake's clock is performance-based: truth up to here is what the first claim is about.
    const firstClaimAt = performance.timeOrigin + performance.now();

    // (1) category and retry directive.
    const e = row.expect;
    const got = { category: env.category, retry: env.retry, remote_effect: env.remote_effect };
    const want = { category: e.category, retry: e.retry, remote_effect: e.remote_effect };
    result.assertions.category_and_retry = {
      ok: JSON.stringify(got) === JSON.stringify(want),
      expected: want,
      actual: got,
    };

    // (2) the agent's next action, carried out by the scripted policy; no improvised retry.
    const next = nextActionFor(env);
    let final = env;
    const opArgs = { ...input, operation_id: env.operation_id };
    if (next === 'reconcile' && env.operation_id) {
      final = await call('reconcile_operation', { operation_id: env.operation_id }, () =>
        runtime.reconcile(env.operation_id!),
      );
    } else if (
      (next === 'wait_then_retry' || next === 'retry_same_operation') &&
      env.operation_id
    ) {
      if (next === 'wait_then_retry')
        await new Promise((r) => setTimeout(r, env.retry_after_ms ?? 0));
      final = await call(row.operation, opArgs, () =>
        runtime.run(action, input, { correlationId: cor, operationId: env.operation_id! }),
      );
    }
    result.final = final;
    const violations = checkTranscript(recorder.steps());
    const finalOk =
      e.final === undefined ||
      (final.category === e.final.category &&
        (e.final.retry === undefined || final.retry === e.final.retry));
    result.assertions.agent_next_action = {
      ok: next === e.next_action && violations.length === 0 && finalOk,
      expected: { next_action: e.next_action, final: e.final ?? null },
      actual: { next_action: next, final: { category: final.category, retry: final.retry } },
      ...(violations.length ? { detail: violations.map((v) => v.explanation).join('; ') } : {}),
    };

    // (3) the remote state, from the fake's own store.
    result.assertions.remote_state = remoteCheck(row, fake, cor, setupId);
    if (final.remote_effect === 'unknown' && !e.unknown_reason) {
      result.assertions.remote_state = {
        ...result.assertions.remote_state,
        ok: false,
        detail:
          'the remote effect stays unknown to the caller but the row documents no unknown_reason',
      };
    }

    // (4) the event trail holds the correlation id and the observed outcome.
    const events = await ledger.query({ correlation_id: cor });
    result.assertions.event_trail = trailCheck(events, cor, env, final);

    // Oracle: the fake's ground truth against the tool's claim.
    const truth = fake.groundTruth(cor);
    const first = oracle(
      truth.filter((t) => t.at <= firstClaimAt),
      env,
    );
    const after = final === env ? first : oracle(truth, final);
    result.oracle =
      first.verdict === 'unsafe' || after.verdict !== 'unsafe'
        ? first
        : { ...after, detail: `after the follow-up: ${after.detail}` };
    result.timeline = mergeTimeline(events, truth);

    // No secret in the envelope, transcript, event trail or timeline.
    const haystack = [
      JSON.stringify(env),
      JSON.stringify(final),
      recorder.toJsonl(),
      JSON.stringify(events),
      JSON.stringify(result.timeline),
    ].join('\n');
    result.secret_in_result = [
      canary,
      Buffer.from(canary).toString('base64'),
      encodeURIComponent(canary),
    ].some((s) => haystack.includes(s));
  } catch (error) {
    result.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  }
  result.passed =
    result.error === null &&
    Object.values(result.assertions).every((a) => a.ok) &&
    result.oracle.verdict !== 'unsafe' &&
    !result.secret_in_result;
  return result;
}

function remoteCheck(
  row: MatrixRow,
  fake: FakeService,
  cor: string,
  setupId: string | null,
): Check {
  const r = row.expect.remote;
  const expected: Record<string, unknown> = {};
  const actual: Record<string, unknown> = {};
  if (r.count !== undefined) {
    expected.count = r.count;
    actual.count = fake.resources.list(r.kind, { client_ref: cor }).length;
  }
  if (setupId !== null) {
    const all = fake.resources.all(r.kind).find((x) => x.id === setupId);
    if (r.setup_field !== undefined) {
      expected[r.setup_field] = r.equals;
      actual[r.setup_field] = all?.[r.setup_field];
    }
    if (r.setup_deleted !== undefined) {
      expected.deleted = r.setup_deleted;
      actual.deleted = all?.deleted === true;
    }
    if (r.child !== undefined) {
      expected[`${r.child}_count`] = r.child_count;
      actual[`${r.child}_count`] = fake.resources.children(r.kind, setupId, r.child)?.length ?? 0;
    }
  }
  return {
    ok: JSON.stringify(expected) === JSON.stringify(actual) && Object.keys(expected).length > 0,
    expected,
    actual,
  };
}

function trailCheck(events: StoredEvent[], cor: string, env: Envelope, final: Envelope): Check {
  const kinds = events.map((e) => e.kind);
  const finished = events
    .filter((e) => e.kind === 'attempt_finished')
    .map((e) => (e.kind === 'attempt_finished' ? e.data.category : null));
  const resolved = events
    .filter((e) => e.kind === 'operation_resolved')
    .map((e) => (e.kind === 'operation_resolved' ? e.data.category : null));
  const recorded = (category: string): boolean =>
    finished.includes(category as never) || resolved.includes(category as never);
  const finalRecorded =
    final === env ||
    recorded(final.category) ||
    (final.category === 'outcome_unknown' && kinds.includes('observation_recorded'));
  const outcomeRecorded = recorded(env.category) && finalRecorded;
  const ok =
    events.length > 0 &&
    events.every((e) => e.correlation_id === cor) &&
    kinds.includes('operation_opened') &&
    outcomeRecorded;
  return {
    ok,
    expected: { correlation_id: cor, outcome: env.category, final: final.category },
    actual: {
      events: kinds.length,
      kinds: [...new Set(kinds)],
      last_attempt_category: finished.at(-1) ?? null,
    },
  };
}

function oracle(truth: TruthEvent[], env: Envelope): { verdict: OracleVerdict; detail: string } {
  const committed = truth.some((t) => t.event === 'mutation_committed');
  const received = truth.some((t) => t.event === 'received');
  if (committed && (UNSAFE_WHEN_COMMITTED.has(env.category) || env.remote_effect === 'none')) {
    return {
      verdict: 'unsafe',
      detail: `the fake committed the mutation but the tool said ${env.category} / remote_effect ${env.remote_effect}`,
    };
  }
  if (env.category === 'outcome_unknown' && !committed) {
    return {
      verdict: 'imprecise',
      detail: received
        ? 'received but not committed; the tool could not know'
        : 'never received; the tool could not know',
    };
  }
  return {
    verdict: 'consistent',
    detail: committed ? 'committed' : received ? 'received, nothing committed' : 'nothing received',
  };
}

function mergeTimeline(events: StoredEvent[], truth: TruthEvent[]): RowResult['timeline'] {
  const out: RowResult['timeline'] = [];
  for (const e of events) {
    const d = e.data as Record<string, unknown>;
    const detail =
      e.kind === 'attempt_finished'
        ? `${String(d.category)} (${String(d.dispatch_state)}, ${String(d.rule)})`
        : e.kind === 'observation_recorded'
          ? `${String(d.matches)} match(es): ${String(d.conclusion)}`
          : '';
    out.push({ at: e.at, source: 'ledger', event: e.kind, detail });
  }
  for (const t of truth) {
    const detail = [
      t.method,
      t.path,
      t.status,
      t.close_kind,
      t.resource_id,
      t.replayed ? 'replayed' : '',
    ]
      .filter((x) => x !== undefined && x !== '')
      .join(' ');
    out.push({ at: t.at, source: 'fake', event: t.event, detail });
  }
  return out.sort((a, b) => a.at - b.at);
}
