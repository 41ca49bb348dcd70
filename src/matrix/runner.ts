// Runs each matrix row through the real runtime — against the fake service (HTTP rows) or the real
// OpenSSH fixture (SSH rows) — and checks four assertions per row, the oracle, and that no secret
// reached any result (DESIGN.md §4).
import { randomBytes } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { checkTranscript } from '../agent/rules.js';
import { nextActionFor } from '../agent/scripted.js';
import { createRecorder } from '../agent/transcript.js';
import type { classify } from '../core/classify.js';
import type { Envelope } from '../core/envelope.js';
import { isHttpAction, type EngineAction } from '../engine/action.js';
import { staticCredentials } from '../engine/ports.js';
import { createRuntime, type Runtime } from '../runtime.js';
import type { FakeService } from '../fakes/index.js';
import type { StoredEvent } from '../ledger/events.js';
import type { LedgerStore } from '../ledger/store.js';
import { httpTarget, REFERENCE_AUTHORITY, referenceActions } from './reference-actions.js';
import { needsOwnRuntime, runRows } from './schedule.js';
import type { Check, Matrix, MatrixRow, OracleVerdict, RowTarget, TimelineEntry } from './spec.js';
import { sshTarget, type SshMatrixEnv } from './ssh-reference.js';

export type { Check, OracleVerdict } from './spec.js';

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
  /** Why the row did not run (SSH rows without sshd, outside CI); a skipped row is not failed. */
  skipped?: string;
  error: string | null;
  /** Client (ledger) and fake or remote (ground truth) events of this row, merged by time. */
  timeline: TimelineEntry[];
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
  /** The SSH fixture for SSH rows (the harness starts one sshd for the whole run). */
  ssh?: SshMatrixEnv;
  /** Why SSH rows cannot run; `fail` (under CI=true) fails them instead of skipping them. */
  sshUnavailable?: { reason: string; fail: boolean };
  /** The user's own actions (`--config`) instead of the reference actions. */
  actions?: EngineAction[];
  /** Credential headers per authority reference (default: the canary for the reference API). */
  credentials?: Record<string, Record<string, string>>;
  /** How an HTTP row is armed and checked (default: the reference fake's target). */
  target?: typeof httpTarget;
  /**
   * How many rows run at once (default 1: one after another). Rows that share a connection pool
   * or the SSH relay still wait for each other (see schedule.ts); the report keeps the file order.
   */
  concurrency?: number;
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
    skipped: number;
    /** Rows the oracle never judged (skipped or stopped early): never counted as consistent. */
    not_run: number;
  };
}

export const isSshRow = (row: MatrixRow): boolean => 'ssh' in row.condition;

export async function runMatrix(matrix: Matrix, options: MatrixRunOptions): Promise<MatrixReport> {
  const { fake, ledger } = options;
  const actions = new Map(
    [...(options.actions ?? referenceActions(fake.url)), ...(options.ssh?.actions ?? [])].map(
      (a) => [a.name, a],
    ),
  );
  const newRuntime = (lookup: LookupFunction | undefined, owner?: string): Runtime =>
    createRuntime({
      ...(owner !== undefined ? { owner } : {}),
      ledger,
      credentials: staticCredentials(
        options.credentials ?? {
          [REFERENCE_AUTHORITY]: { authorization: `Bearer ${options.canary}` },
        },
      ),
      actions: [...actions.values()],
      backoff_ms: () => 5,
      ...(lookup ? { lookup } : {}),
      ...(options.classify ? { classify: options.classify } : {}),
      ...(options.ssh ? { ssh: options.ssh.runtime } : {}),
      agent: 'candor-matrix',
    });
  const runtime = newRuntime(options.lookup);
  const runTag = randomBytes(3).toString('hex');
  const rows = matrix.rows.filter((r) => options.filter?.(r) ?? true);
  const results = await runRows(
    rows,
    options.concurrency ?? 1,
    async (row) => {
      const cor = `${row.id}.${runTag}`;
      if (!needsOwnRuntime(row)) return runRow(row, cor, runtime, actions, options);
      // A changed copy of an action would replace the registered one for every other row, and a
      // keep-alive race must find its doomed socket in a pool no other row uses: such a row gets a
      // runtime of its own (connection pools belong to a runtime), closed when the row is done.
      const base = options.lookup ?? dnsLookup;
      const rowLookup: LookupFunction = (host, opts, cb) => base(host, opts, cb);
      let own = newRuntime(rowLookup);
      // A restarted gateway: the same ledger and the same owner, nothing else kept.
      const restart = async (): Promise<Runtime> => {
        const owner = own.owner;
        await own.endSession('gateway restarted');
        await own.close();
        own = newRuntime(rowLookup, owner);
        return own;
      };
      try {
        return await runRow(row, cor, own, actions, options, restart);
      } finally {
        await own.endSession('matrix row finished');
        await own.close();
      }
    },
    (result, done) => options.onRow?.(result, done, rows.length),
  );
  await runtime.endSession('matrix finished');
  await runtime.close();
  const summary = {
    rows: results.length,
    passed: results.filter((r) => r.passed).length,
    failed: results.filter((r) => !r.passed && r.skipped === undefined).length,
    imprecise: results.filter((r) => r.oracle.verdict === 'imprecise').length,
    unsafe: results.filter((r) => r.oracle.verdict === 'unsafe').length,
    secret_leaks: results.filter((r) => r.secret_in_result).length,
    skipped: results.filter((r) => r.skipped !== undefined).length,
    not_run: results.filter((r) => r.oracle.verdict === 'not_run').length,
  };
  return { matrix: matrix.matrix, rows: results, summary };
}

function conditionLabel(c: MatrixRow['condition']): string {
  const f = c as Record<string, unknown>;
  const text = (v: unknown): string =>
    typeof v === 'string' || typeof v === 'number' ? String(v) : '';
  if (f.before_bytes !== undefined) return `before_bytes:${text(f.before_bytes)}`;
  if (f.none !== undefined) return 'none';
  if (f.ssh !== undefined) return `ssh:${text(f.ssh)}`;
  const detail = text(f.action ?? f.variant ?? f.status ?? f.mode);
  const delay = f.delay_ms !== undefined ? `+${text(f.delay_ms)}ms` : '';
  const at = f.at_byte !== undefined ? `@${text(f.at_byte)}` : '';
  return `${text(f.phase)}${detail === '' ? '' : `:${detail}`}${delay}${at}`;
}

function unranRow(row: MatrixRow, cor: string): RowResult {
  const fail = (detail: string): Check => ({ ok: false, expected: null, actual: null, detail });
  return {
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
    oracle: { verdict: 'not_run', detail: 'the row did not run' },
    secret_in_result: false,
    passed: false,
    error: null,
    timeline: [],
  };
}

async function runRow(
  row: MatrixRow,
  cor: string,
  runtime: Runtime,
  actions: Map<string, EngineAction>,
  options: MatrixRunOptions,
  restart?: () => Promise<Runtime>,
): Promise<RowResult> {
  const { fake, ledger, canary } = options;
  const result = unranRow(row, cor);
  const ssh = isSshRow(row);
  if (ssh && !options.ssh) {
    const why = options.sshUnavailable ?? { reason: 'no SSH fixture was started', fail: true };
    if (why.fail) result.error = `SSH rows cannot run: ${why.reason}`;
    else result.skipped = why.reason;
    return result;
  }
  const base = actions.get(row.operation);
  if (!base) {
    result.error = `unknown operation "${row.operation}" (${options.actions ? 'configured' : 'reference'} actions: ${[...actions.keys()].join(', ')})`;
    return result;
  }
  const recorder = createRecorder();
  let target: RowTarget | null = null;
  try {
    if (ssh && options.ssh) target = sshTarget(row, cor, options.ssh);
    else if (isHttpAction(base))
      target = await (options.target ?? httpTarget)(row, cor, base, runtime, fake);
    else throw new Error(`an HTTP row names the SSH action ${base.name}`);
    const { action, input } = target;
    if (target.warmup) await target.warmup();
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
      runtime.run(action, input, {
        correlationId: cor,
        ...(target?.signal ? { signal: target.signal } : {}),
      }),
    );
    result.envelope = env;
    result.operation_id = env.operation_id;
    await target.afterFirstClaim(env);

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

    // The agent calls the operation again by its id (after a restart of the gateway, if asked).
    let again: { env: Envelope; sent: boolean } | null = null;
    if (row.again && env.operation_id) {
      if (!target.received) throw new Error('`again` needs a row against the fake service');
      let rt = runtime;
      if (row.again.restart) {
        if (!restart) throw new Error('`again.restart` needs a runtime of the row’s own');
        rt = await restart();
      }
      const before = target.received();
      const againEnv = await call(row.operation, opArgs, () =>
        rt.run(action, input, { correlationId: cor, operationId: env.operation_id! }),
      );
      again = { env: againEnv, sent: target.received() > before };
    }

    const violations = checkTranscript(recorder.steps());
    const finalOk =
      e.final === undefined ||
      (final.category === e.final.category &&
        (e.final.retry === undefined || final.retry === e.final.retry));
    const againOk =
      e.again === undefined ||
      (again !== null &&
        again.env.category === e.again.category &&
        (e.again.retry === undefined || again.env.retry === e.again.retry) &&
        (e.again.remote_effect === undefined ||
          again.env.remote_effect === e.again.remote_effect) &&
        again.sent === e.again.sent);
    result.assertions.agent_next_action = {
      ok: next === e.next_action && violations.length === 0 && finalOk && againOk,
      expected: {
        next_action: e.next_action,
        final: e.final ?? null,
        ...(e.again ? { again: e.again } : {}),
      },
      actual: {
        next_action: next,
        final: { category: final.category, retry: final.retry },
        ...(again
          ? {
              again: {
                category: again.env.category,
                retry: again.env.retry,
                remote_effect: again.env.remote_effect,
                sent: again.sent,
              },
            }
          : {}),
      },
      ...(violations.length ? { detail: violations.map((v) => v.explanation).join('; ') } : {}),
    };

    // (3) the remote state, from the fake's own store or the remote job's record.
    result.assertions.remote_state = target.remote();
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

    // Oracle: the ground truth against the tool's claim (and against the answer to the call again).
    result.oracle = target.oracle(env, final);
    if (again) {
      const onAgain = target.oracle(env, again.env);
      if (onAgain.verdict === 'unsafe' && result.oracle.verdict !== 'unsafe')
        result.oracle = { ...onAgain, detail: `on the call again: ${onAgain.detail}` };
    }
    // By time; ledger entries within one millisecond keep their ledger order (sequence).
    result.timeline = [...ledgerTimeline(events), ...target.truthTimeline()].sort(
      (a, b) => a.at - b.at || (a.seq ?? 0) - (b.seq ?? 0),
    );

    // No secret in the envelope, transcript, event trail or timeline.
    const haystack = [
      JSON.stringify(env),
      JSON.stringify(final),
      JSON.stringify(again?.env ?? null),
      recorder.toJsonl(),
      JSON.stringify(events),
      JSON.stringify(result.timeline),
    ].join('\n');
    result.secret_in_result = [
      canary,
      Buffer.from(canary).toString('base64'),
      encodeURIComponent(canary),
      ...(options.ssh?.secrets ?? []),
    ].some((s) => haystack.includes(s));
  } catch (error) {
    result.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  } finally {
    await target?.dispose();
  }
  result.passed =
    result.error === null &&
    Object.values(result.assertions).every((a) => a.ok) &&
    result.oracle.verdict !== 'unsafe' &&
    !result.secret_in_result;
  return result;
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

function ledgerTimeline(events: StoredEvent[]): TimelineEntry[] {
  return events.map((e) => {
    const d = e.data as Record<string, unknown>;
    const detail =
      e.kind === 'attempt_finished'
        ? `${String(d.category)} (${String(d.dispatch_state)}, ${String(d.rule)})`
        : e.kind === 'observation_recorded'
          ? `${String(d.matches)} match(es): ${String(d.conclusion)}`
          : '';
    return { at: e.at, seq: e.seq, source: 'ledger' as const, event: e.kind, detail };
  });
}
