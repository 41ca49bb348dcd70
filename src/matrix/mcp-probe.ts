// `candor probe mcp`: how an upstream MCP server's write tools behave when a call is repeated after
// its answer was lost — the situation an agent retrying blindly creates. Run against a disposable
// upstream the user provides (it really writes). Per write tool: call once, check through the
// mapped lookup that the effect is visible (exactly one), then repeat the identical call as a
// client whose answer was dropped would, and count again. One effect: retry-safe. Two or more:
// duplicates on retry. No lookup, no probe arguments, or a lookup that cannot see the first
// effect: not determinable, with the reason. The evidence (calls, answers, counts) is in the report.
import type { McpToolReply } from '../core/transport.js';
import type { McpDestination } from '../engine/action.js';
import type { StartedUpstreams } from '../config/upstreams.js';
import type { UpstreamConfig } from '../config/upstream-schema.js';

export type ProbeVerdict = 'retry-safe' | 'duplicates on retry' | 'not determinable';

export interface ProbeStep {
  step: 'first_call' | 'lookup_after_first' | 'repeat_call' | 'lookup_after_repeat';
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
}

let probeSeq = 0;

export async function probeUpstreams(
  started: StartedUpstreams,
  upstreams: Readonly<Record<string, UpstreamConfig>>,
  only?: string,
): Promise<ProbeResult[]> {
  const out: ProbeResult[] = [];
  for (const a of started.actions) {
    const d = a.definition;
    const dest = d.destination;
    if (dest.kind !== 'mcp' || d.class === 'read') continue;
    if (only !== undefined && only !== d.name && only !== dest.tool) continue;
    const base = {
      upstream: dest.upstream,
      tool: dest.tool,
      exported_as: d.name,
      action_class: d.class,
    };
    const args = upstreams[dest.upstream]?.tools[dest.tool]?.probe?.arguments;
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
    out.push({ ...base, ...(await probeTool(started, dest, args)) });
  }
  return out;
}

async function probeTool(
  started: StartedUpstreams,
  dest: McpDestination,
  args: Record<string, unknown>,
): Promise<Pick<ProbeResult, 'verdict' | 'reason' | 'steps'>> {
  const conn = started.connections.get(dest.upstream)!;
  const lookup = dest.reconciliation!;
  const steps: ProbeStep[] = [];
  const callOnce = async (step: 'first_call' | 'repeat_call') => {
    const facts = await conn.call(dest.tool, args, {
      id: `probe_${++probeSeq}`,
      deadline_ms: dest.deadline_ms,
    });
    const outcome =
      facts.stage === 'answered'
        ? facts.message.error
          ? 'json-rpc error'
          : (facts.message.result as { isError?: boolean } | undefined)?.isError
            ? 'isError'
            : 'result'
        : facts.stage;
    steps.push({ step, outcome });
    return outcome;
  };
  const count = async (step: 'lookup_after_first' | 'lookup_after_repeat') => {
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
  if ((await callOnce('first_call')) !== 'result')
    return { verdict: 'not determinable', reason: 'the first call did not succeed', steps };
  const first = await count('lookup_after_first');
  if (first !== 1)
    return {
      verdict: 'not determinable',
      reason:
        first === null
          ? 'the lookup gave no usable answer'
          : `the lookup saw ${first} effects after one call (use a fresh disposable upstream, or fix the lookup)`,
      steps,
    };
  // The answer of the first call is treated as lost: a client that did not hear it repeats.
  await callOnce('repeat_call');
  const after = await count('lookup_after_repeat');
  if (after === null)
    return { verdict: 'not determinable', reason: 'the lookup gave no usable answer', steps };
  return after >= 2
    ? { verdict: 'duplicates on retry', reason: `${after} effects after the repeat`, steps }
    : { verdict: 'retry-safe', reason: 'still one effect after the repeat', steps };
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
  ];
  return lines.join('\n');
}
