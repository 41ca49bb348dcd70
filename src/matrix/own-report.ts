// The report a person acts on after a matrix on their own actions: per action, which fault phases
// leave the outcome unknown, whether the declared lookup finds a record the service really wrote,
// whether a declared idempotency key is really honoured (the same key sent twice, compared by the
// service's own ground truth), and the change to make in candor.yaml.
import type { LoadedConfig } from '../config/load.js';
import type { ActionDefinition } from '../engine/action.js';
import type { FakeService } from '../fakes/service.js';
import type { MatrixReport, RowResult } from './runner.js';
import type { Matrix } from './spec.js';

export type IdempotencyProbe =
  | { verdict: 'honoured'; detail: string }
  | { verdict: 'ignored'; detail: string }
  | { verdict: 'not_checked'; detail: string };

export interface ActionFinding {
  action: string;
  class: string;
  /** Conditions after which the caller (and the scripted agent) still cannot know the effect. */
  unknown_after: string[];
  lookup: 'declared_found' | 'declared_not_found' | 'declared_not_exercised' | 'none';
  idempotency: { claimed: boolean; probe: IdempotencyProbe | null };
  fixes: string[];
}

export interface OwnReport {
  actions: ActionFinding[];
  /** Findings that need a change (a claim the service contradicts, a lookup that finds nothing). */
  problems: number;
}

/** `{{setup.id}}` and friends, keeping the type of a whole placeholder. */
function fill(value: unknown, vars: Record<string, unknown>): unknown {
  if (typeof value === 'string') {
    const whole = /^\{\{(\w+(?:\.\w+)?)\}\}$/.exec(value);
    return whole && Object.hasOwn(vars, whole[1]!) ? vars[whole[1]!] : value;
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, vars));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, vars)]));
  return value;
}

async function send(
  service: FakeService,
  action: ActionDefinition,
  input: unknown,
  ids: { operation_id: string; call_id: string; key: string | null },
): Promise<{ status: number; body: unknown }> {
  const req = action.request(input, {
    operation_id: ids.operation_id,
    correlation_id: ids.call_id,
    idempotency_key: ids.key,
  });
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-candor-call-id': ids.call_id,
    ...(req.headers ?? {}),
  };
  const keyHeader = action.destination.idempotency?.header;
  if (keyHeader && ids.key) headers[keyHeader.toLowerCase()] = ids.key;
  const res = await fetch(`${service.url}${req.path}`, {
    method: req.method,
    headers,
    ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: kept as text
  }
  return { status: res.status, body };
}

/**
 * Sends the same request twice with the same idempotency key, for every action whose destination
 * claims the key is honoured, and compares what the service applied (its ground truth).
 */
export async function probeIdempotency(
  service: FakeService,
  actions: ActionDefinition[],
  matrix: Matrix,
): Promise<Map<string, IdempotencyProbe>> {
  const out = new Map<string, IdempotencyProbe>();
  const byName = new Map(actions.map((a) => [a.name, a]));
  for (const action of actions) {
    if (action.destination.idempotency?.honoured !== true || action.class === 'read') continue;
    const row = matrix.rows.find((r) => r.operation === action.name);
    if (!row) {
      out.set(action.name, { verdict: 'not_checked', detail: 'no row names this action' });
      continue;
    }
    const tag = `probe-${action.name}-${Date.now().toString(36)}`;
    const vars: Record<string, unknown> = {};
    if (row.setup?.action !== undefined) {
      const creator = byName.get(row.setup.action);
      const made = creator
        ? await send(service, creator, row.setup.input ?? {}, {
            operation_id: `op_${tag}_setup`,
            call_id: `${tag}.setup`,
            key: `${tag}-setup`,
          })
        : undefined;
      const id = (made?.body as Record<string, unknown> | undefined)?.id;
      if (id === undefined) {
        out.set(action.name, {
          verdict: 'not_checked',
          detail: 'the setup record could not be created',
        });
        continue;
      }
      vars['setup.id'] = id;
    }
    const input = fill(row.input, vars);
    const ids = { operation_id: `op_${tag}`, call_id: tag, key: `key-${tag}` };
    const first = await send(service, action, input, ids);
    const second = await send(service, action, input, ids);
    const applied = service.groundTruth(tag).filter((t) => t.event === 'mutation_committed').length;
    const refOf = (b: unknown): string =>
      JSON.stringify((b as Record<string, unknown> | null)?.id ?? null);
    if (first.status >= 300)
      out.set(action.name, {
        verdict: 'not_checked',
        detail: `the first request was answered ${first.status}`,
      });
    else if (applied <= 1)
      out.set(action.name, {
        verdict: 'honoured',
        detail: `the same key twice: applied once (second answer ${second.status}, id ${refOf(second.body)})`,
      });
    else
      out.set(action.name, {
        verdict: 'ignored',
        detail: `the same key twice: applied ${applied} times (ids ${refOf(first.body)} and ${refOf(second.body)})`,
      });
  }
  return out;
}

export function ownReport(
  config: LoadedConfig,
  report: MatrixReport,
  probes: Map<string, IdempotencyProbe>,
): OwnReport {
  const actions: ActionFinding[] = config.config.actions.map((a) => {
    const rows = report.rows.filter((r) => r.operation === a.name && r.skipped === undefined);
    const unknownAfter = rows
      .filter((r) => (r.final ?? r.envelope)?.remote_effect === 'unknown')
      .map((r) => r.condition);
    const dest = config.config.destinations[a.destination];
    const claimed = dest?.idempotency?.honoured === true;
    const probe = probes.get(a.name) ?? null;
    const lookup = lookupVerdict(a.reconcile !== undefined, rows);
    const fixes: string[] = [];
    if (claimed && probe?.verdict === 'ignored')
      fixes.push(
        `destinations.${a.destination}.idempotency.honoured: false — the service applied a repeated key twice; never claim a key the service does not honour`,
      );
    if (lookup === 'declared_not_found')
      fixes.push(
        `actions.${a.name}.reconcile: the lookup did not find a record the service had written; check its path, items and ref`,
      );
    if (a.class !== 'read' && a.reconcile === undefined && unknownAfter.length > 0)
      fixes.push(
        `actions.${a.name}.reconcile: add a lookup (a list operation filtering by a client reference set to {{operation_id}}); without one, ${unknownAfter.length} conditions escalate to a person`,
      );
    return {
      action: a.name,
      class: a.class,
      unknown_after: unknownAfter,
      lookup,
      idempotency: { claimed, probe },
      fixes,
    };
  });
  const problems = actions.filter(
    (f) => f.idempotency.probe?.verdict === 'ignored' || f.lookup === 'declared_not_found',
  ).length;
  return { actions, problems };
}

function lookupVerdict(declared: boolean, rows: RowResult[]): ActionFinding['lookup'] {
  if (!declared) return 'none';
  // Rows where the service applied the write and the agent looked it up.
  const exercised = rows.filter((r) => {
    const applied = (r.assertions.remote_state.actual as { applied_writes?: number } | null)
      ?.applied_writes;
    return r.envelope?.retry === 'reconcile_first' && (applied ?? 0) > 0;
  });
  if (exercised.length === 0) return 'declared_not_exercised';
  return exercised.every(
    (r) => r.final?.category === 'succeeded' || r.final?.category === 'duplicate_effect',
  )
    ? 'declared_found'
    : 'declared_not_found';
}

export function ownReportText(r: OwnReport): string {
  const lines = ['', 'Per action:'];
  for (const f of r.actions) {
    const idem = !f.idempotency.claimed
      ? 'no key claimed'
      : f.idempotency.probe
        ? `key claimed honoured: ${f.idempotency.probe.verdict.toUpperCase()} (${f.idempotency.probe.detail})`
        : 'key claimed honoured (not probed)';
    const lookup = {
      declared_found: 'lookup finds the record',
      declared_not_found: 'LOOKUP DOES NOT FIND the record',
      declared_not_exercised: 'lookup declared (not exercised)',
      none: 'no lookup',
    }[f.lookup];
    lines.push(
      `  ${f.action} (${f.class}): ${lookup}; ${idem}; outcome stays unknown after: ${f.unknown_after.length ? f.unknown_after.join(', ') : 'nothing'}`,
    );
    for (const fix of f.fixes) lines.push(`    fix: ${fix}`);
  }
  lines.push(`${r.problems} configuration claims contradicted by the service`);
  return `${lines.join('\n')}\n`;
}
