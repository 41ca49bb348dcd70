// A deterministic scripted agent that follows envelopes (DESIGN.md §4): retry only when allowed
// (continuing the same operation), reconcile on `reconcile_first`, wait on `after_delay`, stop on
// `never` / `escalate`. And its foil, a naive agent that retries blindly, for checker tests.
import type { Envelope } from '../core/envelope.js';

/** Calls a tool and returns its envelope (over MCP, or directly against a runtime). */
export type ToolCaller = (tool: string, args: Record<string, unknown>) => Promise<Envelope>;

export interface TaskStep {
  /** Name under which the step's data is remembered for later steps. */
  name: string;
  tool: string;
  args: (memory: Readonly<Record<string, unknown>>) => Record<string, unknown>;
}

export type NextAction =
  'continue' | 'retry_same_operation' | 'wait_then_retry' | 'reconcile' | 'stop' | 'escalate';

/** What a careful agent does next, from the envelope alone. */
export function nextActionFor(env: Envelope): NextAction {
  if (env.ok) return 'continue';
  switch (env.retry) {
    case 'allowed':
      return 'retry_same_operation';
    case 'after_delay':
      return 'wait_then_retry';
    case 'reconcile_first':
      return 'reconcile';
    case 'escalate':
      return 'escalate';
    default:
      return 'stop';
  }
}

export interface AgentRun {
  completed: boolean;
  /** Why the agent stopped early, if it did. */
  stopped_at: { step: string; category: string; retry: string } | null;
  memory: Record<string, unknown>;
  calls: number;
}

export interface AgentOptions {
  sleep?: (ms: number) => Promise<void>;
  /** Tries per step, counting the first (default 3). */
  max_tries?: number;
}

export async function runScriptedAgent(
  steps: readonly TaskStep[],
  call: ToolCaller,
  options: AgentOptions = {},
): Promise<AgentRun> {
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const maxTries = options.max_tries ?? 3;
  const memory: Record<string, unknown> = {};
  let calls = 0;
  const invoke = async (tool: string, args: Record<string, unknown>): Promise<Envelope> => {
    calls++;
    return call(tool, args);
  };
  for (const step of steps) {
    const args = step.args(memory);
    let env = await invoke(step.tool, args);
    let tries = 1;
    for (;;) {
      const next = nextActionFor(env);
      if (next === 'continue') {
        memory[step.name] = env.data;
        break;
      }
      if (
        (next === 'retry_same_operation' || next === 'wait_then_retry') &&
        tries < maxTries &&
        env.operation_id
      ) {
        if (next === 'wait_then_retry') await sleep(env.retry_after_ms ?? 0);
        tries++;
        env = await invoke(step.tool, { ...args, operation_id: env.operation_id });
        continue;
      }
      if (next === 'reconcile' && env.operation_id) {
        const found = await invoke('reconcile_operation', { operation_id: env.operation_id });
        if (found.ok) {
          memory[step.name] = found.data;
          break;
        }
        if (found.retry === 'allowed' && tries < maxTries) {
          tries++;
          env = await invoke(step.tool, { ...args, operation_id: env.operation_id });
          continue;
        }
        env = found;
      }
      return {
        completed: false,
        stopped_at: { step: step.name, category: env.category, retry: env.retry },
        memory,
        calls,
      };
    }
  }
  return { completed: true, stopped_at: null, memory, calls };
}

/** The foil: repeats any failed call as a fresh call, the way many agent frameworks do. */
export async function runNaiveAgent(
  steps: readonly TaskStep[],
  call: ToolCaller,
  maxTries = 3,
): Promise<AgentRun> {
  const memory: Record<string, unknown> = {};
  let calls = 0;
  for (const step of steps) {
    let env: Envelope | null = null;
    for (let i = 0; i < maxTries; i++) {
      calls++;
      env = await call(step.tool, step.args(memory));
      if (env.ok) break;
    }
    if (!env?.ok) {
      return {
        completed: false,
        stopped_at: {
          step: step.name,
          category: env?.category ?? 'none',
          retry: env?.retry ?? 'none',
        },
        memory,
        calls,
      };
    }
    memory[step.name] = env.data;
  }
  return { completed: true, stopped_at: null, memory, calls };
}
