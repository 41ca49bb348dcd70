// Policy as code (issue 34): Cedar policies over the call's arguments, its caller and the
// operation's state, decided before every attempt (engine/policy-step.ts is the engine's side; this
// module implements its PolicyPort). See docs/policy.md.
import type { CedarValueJson } from '@cedar-policy/cedar-wasm/nodejs';
import { createHash } from 'node:crypto';
import type { Caller } from '../core/caller.js';
import { canonicalJson } from '../core/canonical.js';
import { systemClock, type Clock } from '../core/time.js';
import type { PolicyInput, PolicyPort, PolicyVerdict } from '../engine/ports.js';
import type { LedgerStore } from '../ledger/store.js';
import { cedarSchema, cedarValueOf, type SchemaAction } from './cedar-types.js';
import { createEvaluator, type CedarRequest, type Evaluator } from './evaluate.js';
import { formatProblem, loadPolicyFiles, type LoadedPolicy, type PolicyProblem } from './load.js';
import { createTotals, zoneParts, type TotalSpec } from './totals.js';

export { cedarSchema, type SchemaAction } from './cedar-types.js';
export { createEvaluator, type CedarRequest, type Decision } from './evaluate.js';
export {
  formatProblem,
  loadPolicyFiles,
  loadPolicyTexts,
  type LoadedPolicy,
  type PolicyProblem,
} from './load.js';
export { WINDOW, type TotalSpec } from './totals.js';

/** The `policy:` section, normalised (a bare list is `files`). */
export interface PolicySpec {
  files: string[];
  zone: string;
  totals: Record<string, TotalSpec>;
}

/** An action as policies see it: its input schema and the resource it reaches. */
export interface PolicyAction extends SchemaAction {
  resource: { kind: string; name: string };
}

export interface PolicyLoaded {
  spec: PolicySpec;
  policies: LoadedPolicy[];
  actions: PolicyAction[];
}

export type PolicyLoadResult =
  | { ok: true; value: PolicyLoaded; failure?: never }
  | { ok: false; failure: PolicyProblem[]; value?: never };

/** Totals' arguments must be whole numbers in every action they count. */
function totalProblems(
  spec: PolicySpec,
  actions: readonly PolicyAction[],
  configFile: string,
): PolicyProblem[] {
  const out: PolicyProblem[] = [];
  for (const [name, t] of Object.entries(spec.totals)) {
    const counted = t.actions ? actions.filter((a) => t.actions!.includes(a.name)) : [];
    for (const missing of (t.actions ?? []).filter((n) => !actions.some((a) => a.name === n)))
      out.push({
        file: configFile,
        line: 1,
        col: 1,
        message: `policy.totals.${name}.actions: no action "${missing}"`,
      });
    for (const a of counted) {
      const props = a.input_schema['properties'] as Record<string, { type?: unknown }> | undefined;
      if (props?.[t.argument]?.type !== 'integer')
        out.push({
          file: configFile,
          line: 1,
          col: 1,
          message: `policy.totals.${name}: argument "${t.argument}" of action ${a.name} must be an integer (type: integer) to be summed`,
        });
    }
  }
  return out;
}

/** Reads, parses and validates the policy files against the schema of `actions`. */
export function loadPolicy(
  spec: PolicySpec,
  actions: PolicyAction[],
  configFile: string,
): PolicyLoadResult {
  const problems = totalProblems(spec, actions, configFile);
  if (problems.length > 0) return { ok: false, failure: problems };
  const schema = cedarSchema(actions, Object.keys(spec.totals));
  const loaded = loadPolicyFiles(spec.files, schema);
  if (!loaded.ok) return loaded;
  return { ok: true, value: { spec, policies: loaded.value, actions } };
}

/** Policy files that do not parse or validate: every problem, the first one in the message. */
export class PolicyLoadError extends Error {
  constructor(readonly problems: PolicyProblem[]) {
    const more =
      problems.length > 1 ? ` (and ${problems.length - 1} more: candor policy check)` : '';
    super(`policy: ${problems[0] ? formatProblem(problems[0]) : 'invalid'}${more}`);
  }
}

/** `loadPolicy`, throwing a PolicyLoadError (one line: `FILE:LINE:COL: problem`). */
export function loadPolicyOrThrow(
  spec: PolicySpec,
  actions: PolicyAction[],
  configFile: string,
): PolicyLoaded {
  const r = loadPolicy(spec, actions, configFile);
  if (!r.ok) throw new PolicyLoadError(r.failure);
  return r.value;
}

export const principalId = (c: Caller): string => `${c.kind}:${c.subject}`;

function callerAttrs(c: Caller): Record<string, CedarValueJson> {
  return {
    kind: c.kind,
    subject: c.subject,
    ...(c.client_id !== null ? { client_id: c.client_id } : {}),
    ...(c.issuer !== null ? { issuer: c.issuer } : {}),
    scopes: [...c.scopes],
  };
}

/** The time attributes of `now` in `zone`. */
export function timeContext(now: number, zone: string): Record<string, CedarValueJson> {
  const p = zoneParts(now, zone);
  const pad = (n: number) => String(n).padStart(2, '0');
  return {
    iso: new Date(now).toISOString(),
    date: `${p.year}-${pad(p.month)}-${pad(p.day)}`,
    hour: p.hour,
    minute: p.minute,
    weekday: p.weekday,
    zone,
  };
}

/** What one request is made of (the decider builds it per attempt; `candor policy test` by hand). */
export interface RequestParts {
  caller: Caller;
  action: string;
  resource: { kind: string; name: string };
  /** The arguments as Cedar values (cedarValueOf). */
  args: CedarValueJson;
  operation: PolicyInput['operation'];
  now: number;
  zone: string;
  totals: Record<string, CedarValueJson>;
}

/** The Cedar request of one attempt: principal, action, resource and context. */
export function cedarRequest(p: RequestParts): CedarRequest {
  const op = p.operation;
  return {
    principal: { id: principalId(p.caller), attrs: callerAttrs(p.caller) },
    action: p.action,
    resource: { id: `${p.resource.kind}:${p.resource.name}`, attrs: { ...p.resource } },
    context: {
      args: p.args,
      operation: {
        first_call: op.attempts === 0,
        attempts: op.attempts,
        may_have_applied: op.effect !== 'none',
        effect: op.effect,
        state: op.state ?? 'open',
        category: op.last_category ?? 'none',
      },
      time: timeContext(p.now, p.zone),
      totals: p.totals,
    },
  };
}

export interface PolicyDeciderOptions {
  loaded: PolicyLoaded;
  ledger: LedgerStore;
  clock?: Clock;
}

/** The engine's PolicyPort over a loaded policy set and the ledger (for totals). */
export function createPolicyDecider(
  options: PolicyDeciderOptions,
): PolicyPort & { evaluator: Evaluator } {
  const { loaded, ledger } = options;
  const clock = options.clock ?? systemClock;
  const evaluator = createEvaluator(loaded.policies);
  const byName = new Map(loaded.actions.map((a) => [a.name, a]));
  const totals = createTotals(ledger);
  const counting = new Set(Object.values(loaded.spec.totals).map((t) => t.argument));

  function resourceOf(input: PolicyInput): { kind: string; name: string } {
    const known = byName.get(input.action.name);
    if (known) return known.resource;
    const d = input.action.destination as {
      kind?: string;
      origin?: string;
      host_ref?: string;
      upstream?: string;
    };
    if (d.kind === 'ssh') return { kind: 'ssh', name: d.host_ref ?? '' };
    if (d.kind === 'mcp') return { kind: 'mcp', name: d.upstream ?? '' };
    return { kind: 'http', name: d.origin ?? '' };
  }

  return {
    evaluator,
    async decide(input: PolicyInput): Promise<PolicyVerdict> {
      const principal = principalId(input.caller);
      const counted: Record<string, number> = {};
      if (typeof input.args === 'object' && input.args !== null)
        for (const name of counting) {
          const v = (input.args as Record<string, unknown>)[name];
          if (typeof v === 'number' && Number.isFinite(v)) counted[name] = v;
        }
      const base = { principal, counted, context_digest: '' };
      try {
        const now = clock.now();
        const schema = byName.get(input.action.name)?.input_schema;
        const args = schema
          ? cedarValueOf({ ...schema, type: 'object' }, input.args)
          : (JSON.parse(JSON.stringify(input.args ?? {})) as CedarValueJson);
        const totalsContext: Record<string, CedarValueJson> = {};
        for (const [name, spec] of Object.entries(loaded.spec.totals))
          totalsContext[name] = await totals.total(spec, {
            now,
            zone: loaded.spec.zone,
            operation_id: input.operation_id,
            action: input.action.name,
            session_id: input.session_id,
            principal,
          });
        const request = cedarRequest({
          caller: input.caller,
          action: input.action.name,
          resource: resourceOf(input),
          args: args ?? {},
          operation: input.operation,
          now,
          zone: loaded.spec.zone,
          totals: totalsContext,
        });
        const digest = `sha256:${createHash('sha256').update(canonicalJson(request)).digest('hex')}`;
        const d = evaluator.evaluate(request);
        if (d.decision !== 'deny') totals.remember(input.operation_id, principal, counted);
        return { ...base, ...d, context_digest: digest };
      } catch (error) {
        // Fail closed: a context that cannot be built (an unreadable total, a number Cedar cannot
        // hold) denies the call.
        return {
          ...base,
          decision: 'deny',
          policy_ids: [],
          reason: `the policy could not be evaluated (${error instanceof Error ? error.message : String(error)})`,
        };
      }
    },
  };
}
