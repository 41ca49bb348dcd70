// `candor probe mcp`: how an upstream MCP server's tools behave when a call is repeated after its
// answer was lost — the situation an agent retrying blindly creates. Run against a disposable
// upstream the user provides (it really writes). Per write tool: look first (an upstream whose
// lookup already sees the probe's effect is not fresh), call once, check through the mapped lookup
// that the effect is visible (exactly one), then repeat the identical call as a client whose answer
// was dropped would, and count again. One effect: retry-safe. Two or more: duplicates on retry. No
// lookup, no probe arguments, or a lookup that cannot see the first effect: not determinable, with
// the reason. Read tools are checked as reads: called once with their probe arguments (found or
// failed, with the upstream's words), never repeated as a write.
//
// The probe's own calls go through the engine, so every one is an operation in the ledger (the
// configuration's, or --ledger), and the report lists every effect it left: the operations and the
// references its calls and lookups saw. A write tool the ledger already holds operations of is not
// fresh (an earlier probe or agent left effects there): refused unless `allowRerun`.
import type { Envelope } from '../core/envelope.js';
import type { McpToolReply } from '../core/transport.js';
import type { McpDestination } from '../engine/action.js';
import type { Runtime } from '../engine/runtime.js';
import type { LedgerStore } from '../ledger/store.js';
import type { StartedUpstreams } from '../config/upstreams.js';
import type { UpstreamConfig } from '../config/upstream-schema.js';
import type { ConfiguredAction } from '../config/actions.js';

export type ProbeVerdict =
  'retry-safe' | 'duplicates on retry' | 'not determinable' | 'not fresh' | 'read';

/** One effect the probe left behind: its operation in the ledger and the references it saw. */
export interface ProbeEffect {
  operation_id: string;
  step: 'first_call' | 'repeat_call' | 'read_call';
  /** What the ledger says of the call (the envelope's category and remote_effect). */
  category: string;
  remote_effect: string;
  /** Ids and references seen in the call's answer and in the lookup that counted it. */
  refs: string[];
}

export interface ProbeStep {
  step:
    'lookup_before' | 'first_call' | 'lookup_after_first' | 'repeat_call' | 'lookup_after_repeat';
  /** What the upstream answered (call steps), or how many effects the lookup counted. */
  outcome: string;
  effects?: number;
}

export interface ProbeResult {
  upstream: string;
  tool: string;
  exported_as: string;
  action_class: string;
  verdict: ProbeVerdict;
  reason: string;
  steps: ProbeStep[];
  /** The probe's own operations for this tool (in the ledger) and what they left. */
  effects: ProbeEffect[];
}

export interface ProbeOptions {
  /** Runs the probe's calls as operations (recorded in its ledger). */
  runtime: Runtime;
  ledger: LedgerStore;
  /** Only this tool (upstream or exported name). */
  only?: string;
  /** Probe write tools the ledger already holds operations of. */
  allowRerun?: boolean;
}

let probeSeq = 0;

export async function probeUpstreams(
  started: StartedUpstreams,
  upstreams: Readonly<Record<string, UpstreamConfig>>,
  options: ProbeOptions,
): Promise<ProbeResult[]> {
  const out: ProbeResult[] = [];
  const only = options.only;
  for (const a of started.actions) {
    const d = a.definition;
    const dest = d.destination;
    if (dest.kind !== 'mcp') continue;
    if (only !== undefined && only !== d.name && only !== dest.tool) continue;
    const base = {
      upstream: dest.upstream,
      tool: dest.tool,
      exported_as: d.name,
      action_class: d.class,
      effects: [] as ProbeEffect[],
    };
    const args = upstreams[dest.upstream]?.tools[dest.tool]?.probe?.arguments;
    if (d.class === 'read') {
      out.push({ ...base, ...(await probeRead(options.runtime, a, args)) });
      continue;
    }
    if (!dest.reconciliation) {
      out.push({ ...base, verdict: 'not determinable', reason: 'no lookup', steps: [] });
      continue;
    }
    if (!args) {
      out.push({
        ...base,
        verdict: 'not determinable',
        reason: 'no probe arguments (tools.NAME.probe.arguments)',
        steps: [],
      });
      continue;
    }
    const earlier = await options.ledger.operations({ action: d.name, limit: 1 });
    if (earlier.total > 0 && options.allowRerun !== true) {
      out.push({
        ...base,
        verdict: 'not fresh',
        reason: `the ledger already holds ${earlier.total} operation(s) of ${d.name} (an earlier probe or agent left effects); use a fresh upstream, or --allow-rerun`,
        steps: [],
      });
      continue;
    }
    out.push({ ...base, ...(await probeTool(started, options.runtime, a, dest, args)) });
  }
  return out;
}

/** A read tool, checked as a read: called once, found or failed, nothing repeated. */
async function probeRead(
  runtime: Runtime,
  a: ConfiguredAction,
  args: Record<string, unknown> | undefined,
): Promise<Pick<ProbeResult, 'verdict' | 'reason' | 'steps' | 'effects'>> {
  if (!args)
    return {
      verdict: 'read',
      reason: 'not called: no probe arguments (tools.NAME.probe.arguments)',
      steps: [],
      effects: [],
    };
  const e = await runtime.run(a.definition, args);
  const said = (e.data as { upstream_error?: unknown } | null)?.upstream_error;
  const reason = e.ok
    ? 'answered (found)'
    : `${e.category}${typeof said === 'string' ? `: ${said.slice(0, 200)}` : ''}`;
  return {
    verdict: 'read',
    reason,
    steps: [{ step: 'first_call', outcome: e.ok ? 'result' : e.category }],
    effects: e.operation_id ? [effectOf(e, 'read_call', [])] : [],
  };
}

function effectOf(e: Envelope, step: ProbeEffect['step'], refs: string[]): ProbeEffect {
  return {
    operation_id: e.operation_id ?? '',
    step,
    category: e.category,
    remote_effect: e.remote_effect,
    refs: [
      ...new Set([
        ...idsIn((e.data as { structuredContent?: unknown } | null)?.structuredContent),
        ...refs,
      ]),
    ],
  };
}

/** String values of `id` / `*_id` / `ref` fields in an answer (the references it names). */
function idsIn(value: unknown, depth = 0): string[] {
  if (depth > 4 || value === null || typeof value !== 'object') return [];
  if (Array.isArray(value)) return value.flatMap((v) => idsIn(v, depth + 1));
  const out: string[] = [];
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (typeof v === 'string' && (k === 'id' || k === 'ref' || k.endsWith('_id'))) out.push(v);
    else out.push(...idsIn(v, depth + 1));
  }
  return out;
}

async function probeTool(
  started: StartedUpstreams,
  runtime: Runtime,
  a: ConfiguredAction,
  dest: McpDestination,
  args: Record<string, unknown>,
): Promise<Pick<ProbeResult, 'verdict' | 'reason' | 'steps' | 'effects'>> {
  const conn = started.connections.get(dest.upstream)!;
  const lookup = dest.reconciliation!;
  const steps: ProbeStep[] = [];
  const effects: ProbeEffect[] = [];
  let lastRefs: string[] = [];
  const callOnce = async (step: 'first_call' | 'repeat_call') => {
    // Through the engine: the call is an operation in the ledger whatever it answers. The repeat
    // is a new operation on purpose (what a blind retry would be), so the gateway's duplicate
    // guard is not in the way.
    const e = await runtime.run(a.definition, args);
    const outcome = e.ok
      ? 'result'
      : (e.data as { upstream_error?: unknown } | null)?.upstream_error !== undefined
        ? `${e.category} (upstream error)`
        : e.category;
    steps.push({ step, outcome });
    if (e.operation_id) effects.push(effectOf(e, step, []));
    return outcome;
  };
  const count = async (step: 'lookup_before' | 'lookup_after_first' | 'lookup_after_repeat') => {
    const facts = await conn.call(lookup.tool, lookup.arguments(args), {
      id: `probe_${++probeSeq}`,
      deadline_ms: dest.deadline_ms,
    });
    let effects: number | null = null;
    if (facts.stage === 'answered' && !facts.message.error) {
      const r = (facts.message.result ?? {}) as Partial<McpToolReply>;
      try {
        const m = lookup.matches(
          {
            content: Array.isArray(r.content) ? r.content : [],
            ...(r.structuredContent !== undefined
              ? { structuredContent: r.structuredContent }
              : {}),
            isError: r.isError === true,
          },
          args,
        );
        effects = m === null ? null : m.length;
        lastRefs = m === null ? [] : m.map((x) => x.ref);
      } catch {
        effects = null;
      }
    }
    steps.push({
      step,
      outcome: effects === null ? 'lookup gave no usable answer' : `${effects} effect(s)`,
      ...(effects !== null ? { effects } : {}),
    });
    return effects;
  };
  const seen = (refs: string[]) => {
    for (const e of effects) e.refs = [...new Set([...e.refs, ...refs])];
  };
  const before = await count('lookup_before');
  if (before !== null && before > 0)
    return {
      verdict: 'not fresh',
      reason: `the lookup already sees ${before} effect(s) before the probe called anything (use a fresh disposable upstream)`,
      steps,
      effects,
    };
  if ((await callOnce('first_call')) !== 'result')
    return {
      verdict: 'not determinable',
      reason: 'the first call did not succeed',
      steps,
      effects,
    };
  const first = await count('lookup_after_first');
  seen(lastRefs);
  if (first !== 1)
    return {
      verdict: 'not determinable',
      reason:
        first === null
          ? 'the lookup gave no usable answer'
          : `the lookup saw ${first} effects after one call (use a fresh disposable upstream, or fix the lookup)`,
      steps,
      effects,
    };
  // The answer of the first call is treated as lost: a client that did not hear it repeats.
  await callOnce('repeat_call');
  const after = await count('lookup_after_repeat');
  seen(lastRefs);
  if (after === null)
    return {
      verdict: 'not determinable',
      reason: 'the lookup gave no usable answer',
      steps,
      effects,
    };
  return after >= 2
    ? {
        verdict: 'duplicates on retry',
        reason: `${after} effects after the repeat`,
        steps,
        effects,
      }
    : { verdict: 'retry-safe', reason: 'still one effect after the repeat', steps, effects };
}

export function probeMarkdown(results: readonly ProbeResult[]): string {
  const lines = [
    '# MCP retry-safety probe',
    '',
    '| upstream | tool | class | verdict | reason | evidence |',
    '| --- | --- | --- | --- | --- | --- |',
    ...results.map(
      (r) =>
        `| ${r.upstream} | ${r.tool} (${r.exported_as}) | ${r.action_class} | ${r.verdict} | ${r.reason} | ${r.steps.map((s) => `${s.step}: ${s.outcome}`).join('; ') || '—'} |`,
    ),
    '',
    '## Effects the probe left',
    '',
    ...(results.some((r) => r.effects.length > 0)
      ? results.flatMap((r) =>
          r.effects.map(
            (e) =>
              `- ${r.upstream}/${r.tool} ${e.step}: operation ${e.operation_id} (${e.category}, remote_effect ${e.remote_effect})${e.refs.length > 0 ? `, refs ${e.refs.join(', ')}` : ''}`,
          ),
        )
      : ['- none']),
    '',
  ];
  return lines.join('\n');
}
