// candor ops list [--state S,...] [--config FILE | --ledger URL] [--json]
// candor ops show OP_ID [--config FILE | --ledger URL] [--json]
// candor ops follow [--config FILE | --ledger URL] [--from SEQ] [--poll-ms N] [--json]   (ops-follow.ts)
// Read-only views of the ledger for investigators. `show` puts the state and intent on top, then
// every attempt and observation, and a verdict line that separates "retried under a licence and
// the target deduplicated" from "sent twice and got lucky".
import { attemptEffectText } from '../../core/fold.js';
import { OperationState, valuesOf, type RemoteEffect } from '../../core/vocabulary.js';
import { callerText } from '../../core/caller-text.js';
import { openLedger, parseLedgerUrl } from '../../ledger/open.js';
import { ledgerUrlFrom } from '../config-ledger.js';
import {
  deliveryVerdict,
  projectOperation,
  projectOperations,
  UNRESOLVED_STATES,
  type AttemptView,
  type OperationView,
} from '../../ledger/projection.js';
import type { LedgerStore } from '../../ledger/store.js';
import { Exit, parseFlags, CliUsageError, untilStopped, type CommandIo } from '../io.js';
import { DEFAULT_POLL_MS, follow, FOLLOW_HELP, FOLLOW_USAGE } from './ops-follow.js';

const USAGE = `usage: candor ops list [--state S,...] [--config FILE | --ledger URL] [--json] | candor ops show OP_ID [--config FILE | --ledger URL] [--json] | ${FOLLOW_USAGE}`;
const PAGE = 5_000;

export async function run(args: string[], io: CommandIo): Promise<number> {
  try {
    return await dispatch(args, io);
  } catch (err) {
    if (!(err instanceof CliUsageError)) throw err;
    io.err(`candor ops: ${err.message}\n`);
    return Exit.usage;
  }
}

async function dispatch(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    state: 'string',
    ledger: 'string',
    config: 'string',
    json: 'boolean',
    help: 'boolean',
    from: 'string',
    'poll-ms': 'string',
  });
  const [sub, ...rest] = positional;
  if (flags.help === true) {
    io.out(sub === 'follow' ? FOLLOW_HELP : `${USAGE}\n${FOLLOW_HELP}`);
    return Exit.ok;
  }
  if (sub !== 'follow' && (flags.from !== undefined || flags['poll-ms'] !== undefined))
    throw new CliUsageError('--from and --poll-ms apply to ops follow only');
  const url = await ledgerUrlFrom(flags);
  const json = flags.json === true;
  if (sub === 'list') {
    if (rest.length > 0) throw new CliUsageError(`unexpected argument ${rest[0]}; ${USAGE}`);
    const states = parseStates(flags.state);
    return withLedger(url, io, (store) => list(store, states, json, io));
  }
  if (sub === 'show') {
    if (flags.state !== undefined) throw new CliUsageError('--state applies to ops list only');
    if (rest.length !== 1) throw new CliUsageError(`ops show needs exactly one OP_ID; ${USAGE}`);
    const id = rest[0]!;
    return withLedger(url, io, (store) => show(store, id, json, io));
  }
  if (sub === 'follow') {
    if (rest.length > 0) throw new CliUsageError(`unexpected argument ${rest[0]}; ${USAGE}`);
    if (flags.state !== undefined) throw new CliUsageError('--state applies to ops list only');
    const from = positiveInt('from', flags.from);
    const pollMs = positiveInt('poll-ms', flags['poll-ms']) ?? DEFAULT_POLL_MS;
    const parsed = parseLedgerUrl(url);
    const ledgerKind = parsed.ok ? parsed.value.kind : 'unknown';
    return withLedger(url, io, async (store) => {
      // Ctrl-C (or a service manager's SIGTERM) ends following cleanly: exit 0.
      const stop = new AbortController();
      void untilStopped(stop.signal).then(() => stop.abort());
      try {
        return await follow(
          store,
          { ...(from !== undefined ? { from } : {}), pollMs, json, ledgerKind },
          io,
          stop.signal,
        );
      } finally {
        stop.abort();
      }
    });
  }
  throw new CliUsageError(sub === undefined ? USAGE : `unknown subcommand "${sub}"; ${USAGE}`);
}

function positiveInt(flag: string, raw: string | boolean | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = typeof raw === 'string' && /^[1-9][0-9]{0,9}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n))
    throw new CliUsageError(`--${flag} needs a positive whole number, not ${JSON.stringify(raw)}`);
  return n;
}

function parseStates(raw: string | boolean | undefined): Set<OperationState> | null {
  if (typeof raw !== 'string') return null;
  const known = new Set<string>(valuesOf(OperationState));
  const states = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  const bad = states.find((s) => !known.has(s));
  if (bad !== undefined || states.length === 0) {
    throw new CliUsageError(
      `unknown state "${bad ?? raw}" (one or more of ${valuesOf(OperationState).join(', ')})`,
    );
  }
  return new Set(states as OperationState[]);
}

async function withLedger(
  url: string,
  io: CommandIo,
  work: (store: LedgerStore) => Promise<number>,
): Promise<number> {
  const opened = await openLedger(url, { readOnly: true });
  if (!opened.ok) {
    if (opened.failure.code === 'BAD_URL') throw new CliUsageError(opened.failure.message);
    io.err(`candor ops: cannot open ledger (${opened.failure.code}): ${opened.failure.message}\n`);
    return Exit.environment;
  }
  try {
    return await work(opened.value);
  } catch (err) {
    io.err(`candor ops: ledger read failed: ${err instanceof Error ? err.message : String(err)}\n`);
    return Exit.environment;
  } finally {
    await opened.value.close();
  }
}

async function list(
  store: LedgerStore,
  states: Set<OperationState> | null,
  json: boolean,
  io: CommandIo,
): Promise<number> {
  let views: OperationView[];
  if (states !== null && [...states].every((s) => UNRESOLVED_STATES.has(s))) {
    // Indexed path: only operations the store lists as unresolved.
    views = [];
    for (const id of await store.unresolved()) {
      const v = projectOperation(await store.query({ operation_id: id }));
      if (v) views.push(v);
    }
  } else {
    const events = [];
    for (let from = 1; ; from += PAGE) {
      const page = await store.read(from, PAGE);
      events.push(...page);
      if (page.length < PAGE) break;
    }
    views = projectOperations(events);
  }
  if (states !== null) views = views.filter((v) => v.state !== null && states.has(v.state));
  if (json) {
    io.out(`${JSON.stringify(views, null, 2)}\n`);
    return Exit.ok;
  }
  if (views.length === 0) {
    io.out(states ? `no operations in state ${[...states].join(', ')}\n` : 'no operations\n');
    return Exit.ok;
  }
  const rows = views.map((v) => [
    v.operation_id,
    v.state ?? '-',
    v.action ?? '-',
    String(v.attempts.length),
    v.intent?.subject_ref ?? '-',
    deliveryVerdict(v).code,
  ]);
  const header = ['OPERATION', 'STATE', 'ACTION', 'ATTEMPTS', 'SUBJECT', 'DELIVERY'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const r of [header, ...rows]) {
    io.out(`${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')}\n`);
  }
  return Exit.ok;
}

async function show(store: LedgerStore, id: string, json: boolean, io: CommandIo): Promise<number> {
  const view = projectOperation(await store.query({ operation_id: id }));
  if (!view) {
    io.err(`candor ops: no operation ${id} in the ledger\n`);
    return Exit.check_failed;
  }
  io.out(json ? `${JSON.stringify(view, null, 2)}\n` : formatOperation(view));
  return Exit.ok;
}

const iso = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? '-' : new Date(ms).toISOString();
const dash = (v: string | number | null | undefined): string =>
  v === null || v === undefined || v === '' ? '-' : String(v);

/** Human-readable timeline of one operation. */
export function formatOperation(v: OperationView): string {
  const verdict = deliveryVerdict(v);
  const d = v.destination;
  const lines = [
    `operation    ${v.operation_id}`,
    `state        ${dash(v.state)}`,
    `intent       ${v.intent ? `${v.intent.kind} ${dash(v.intent.subject_ref)} params ${v.intent.params_digest}` : '-'}`,
    `action       ${dash(v.action)} (${dash(v.action_class)}), owner ${dash(v.owner)}`,
    `destination  ${d ? destinationText(d) : '-'}`,
    `idempotency  ${dash(v.idempotency_key)}`,
    `session      ${dash(v.session_id)}, correlation ${dash(v.correlation_id)}, opened ${iso(v.opened_at)}`,
    `caller       ${v.caller ? callerText(v.caller) : '- (not recorded)'}`,
  ];
  if (v.supersedes_operation_id) lines.push(`supersedes   ${v.supersedes_operation_id}`);
  if (v.superseded_by) lines.push(`superseded   by ${v.superseded_by}`);
  lines.push(`verdict      [${verdict.code}] ${verdict.line}`);
  const first = v.attempts[0];
  for (const a of v.attempts) lines.push('', ...attemptLines(a, first, v.remote_effect));
  v.observations.forEach((o, i) => {
    lines.push(
      '',
      `observation ${i + 1}  ${o.observation_id} (${o.source}, ${iso(o.checked_at)})`,
      `  checked      ${o.checked}`,
      `  found        ${o.matches} match(es)${o.remote_refs.length ? `: ${o.remote_refs.join(', ')}` : ''}`,
      `  conclusion   ${o.conclusion}`,
      `  state after  ${o.state_after}`,
    );
  });
  if (v.policies.length > 0) {
    lines.push('', `policy       ${v.policies.length} decision(s)`);
    for (const p of v.policies) {
      lines.push(
        `  attempt ${p.attempt}  ${p.decision}${p.policy_ids.length ? ` by ${p.policy_ids.join(', ')}` : ''} for ${p.principal} at ${iso(p.at)}`,
        `    reason   ${p.reason}`,
        `    context  ${p.context_digest || '(not built)'}`,
      );
    }
  }
  if (v.approvals.length > 0) {
    lines.push('', `approvals    ${v.prompts} prompt(s)`);
    for (const ap of v.approvals) {
      lines.push(
        `  ${ap.approval_id} ${ap.scope}: ${ap.decision ?? 'pending'}${ap.approver ? ` by ${ap.approver}` : ''}`,
      );
    }
  }
  if (v.resolution) {
    const r = v.resolution;
    lines.push(
      '',
      `resolved     ${r.state} (${r.category}) by ${r.by} at ${iso(r.at)}${r.remote_refs.length ? `, remote ${r.remote_refs.join(', ')}` : ''}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function destinationText(d: NonNullable<OperationView['destination']>): string {
  const parts = [d.method, d.route_template, d.host_ref ? `host ${d.host_ref}` : undefined];
  const text = parts.filter((p) => p !== undefined).join(' ');
  return `${text || '-'}${d.authority_ref ? ` via ${d.authority_ref}` : ''}`;
}

function attemptLines(
  a: AttemptView,
  first: AttemptView | undefined,
  operationEffect: RemoteEffect,
): string[] {
  const f = a.finish;
  const sameFp =
    first && first !== a
      ? a.request_fingerprint === first.request_fingerprint
        ? ` (same as attempt ${first.number})`
        : ` (DIFFERS from attempt ${first.number})`
      : '';
  const out = [
    `attempt ${a.number}    ${a.attempt_id}, worker ${a.worker}, started ${iso(a.started_at)}`,
    `  dispatch     ${f ? f.dispatch_state : 'no finish recorded — the request may have been sent'}`,
    `  retry of     ${dash(a.retry_of_attempt_id)}, reason ${dash(a.retry_reason)}, decision ${dash(a.retry_decision)}, budget left ${a.attempt_budget_remaining}`,
    `  credential   ${dash(a.credential_ref)}`,
    `  destination  ${destinationText(a.destination)}`,
    `  fingerprint  ${a.request_fingerprint}${sameFp}`,
  ];
  if (!f) return out;
  const r = f.response;
  out.push(
    `  response     ${
      r
        ? `status ${dash(r.status)}, replay ${r.replay ? 'yes' : 'no'}, remote ref ${dash(r.remote_ref)}, body ${dash(r.fingerprint)}`
        : 'none'
    }`,
    `  duration     ${f.duration_ms} ms`,
    `  outcome      ${f.category} (rule ${f.rule}), retry ${f.retry}, remote effect ${attemptEffectText(f, operationEffect)}`,
  );
  if (f.diagnostics_ref) out.push(`  diagnostics  ${f.diagnostics_ref}`);
  return out;
}
