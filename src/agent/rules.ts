// Allowed transitions for an agent's next step after each kind of result. A transcript breaks a
// rule when the agent repeats an intent it was told not to repeat (DESIGN.md §4):
//   create -> outcome_unknown -> lookup -> found -> attach_note   allowed
//   create -> outcome_unknown -> create                            forbidden, even if the task succeeds
import { z } from 'zod';
import { canonicalJson } from '../core/canonical.js';
import type { TranscriptStep } from './transcript.js';

export const rulesSchema = z.strictObject({
  /** Tools that only look things up (repeatable, and used to reconcile). */
  lookup_tools: z
    .array(z.string())
    .default(['reconcile_operation', 'operation_status', 'list_unresolved_operations']),
  /** Tools whose calls are reads (blindly repeatable). */
  read_tools: z.array(z.string()).default([]),
  rules: z
    .object({
      no_repeat_after_unknown: z.boolean().default(true),
      no_repeat_after_refusal: z.boolean().default(true),
      respect_retry_after: z.boolean().default(true),
      no_repeat_after_escalate: z.boolean().default(true),
    })
    .prefault({}),
});
export type Rules = z.output<typeof rulesSchema>;
export const DEFAULT_RULES: Rules = rulesSchema.parse({});

export interface Violation {
  rule:
    | 'no_repeat_after_unknown'
    | 'no_repeat_after_refusal'
    | 'respect_retry_after'
    | 'no_repeat_after_escalate';
  step: number;
  tool: string;
  /** The earlier step whose result forbade this one. */
  because_of: number;
  explanation: string;
}

/** The intent of a call: the tool and its arguments, without the operation id used to continue one. */
function intentKey(step: TranscriptStep): string {
  const { operation_id: _op, ...rest } = step.args;
  return `${step.tool} ${canonicalJson(rest)}`;
}

interface Pending {
  step: TranscriptStep;
  operation_id: string | null;
  /** Set once a later lookup of the operation settled it, or licensed a retry. */
  cleared: 'settled' | 'retry_licensed' | null;
}

const REFUSALS = new Set([
  'authentication_failed',
  'authorization_denied',
  'approval_denied',
  'gate_locked',
  'confirmed_rejection',
]);

export function checkTranscript(
  steps: readonly TranscriptStep[],
  rules: Rules = DEFAULT_RULES,
): Violation[] {
  const violations: Violation[] = [];
  const last = new Map<string, Pending>();
  const isLookup = (tool: string): boolean => rules.lookup_tools.includes(tool);
  const isRead = (step: TranscriptStep): boolean =>
    rules.read_tools.includes(step.tool) || isLookup(step.tool);

  for (const step of steps) {
    if (isLookup(step.tool)) {
      const opId = typeof step.args.operation_id === 'string' ? step.args.operation_id : null;
      if (opId && step.result) {
        for (const p of last.values()) {
          if (p.operation_id !== opId) continue;
          if (step.result.ok || step.result.category === 'duplicate_effect') p.cleared = 'settled';
          else if (step.result.retry === 'allowed') p.cleared = 'retry_licensed';
        }
      }
      continue;
    }
    const key = intentKey(step);
    const prior = last.get(key);
    if (prior?.step.result && !isRead(step)) {
      const r = prior.step.result;
      const continuing =
        typeof step.args.operation_id === 'string' && step.args.operation_id === prior.operation_id;
      const v = (rule: Violation['rule'], explanation: string): void => {
        if (rules.rules[rule])
          violations.push({
            rule,
            step: step.seq,
            tool: step.tool,
            because_of: prior.step.seq,
            explanation,
          });
      };
      if (
        r.category === 'outcome_unknown' ||
        (r.category === 'malformed_response' && r.remote_effect !== 'none')
      ) {
        const licensed =
          // `after_delay` on an unknown outcome: the same operation again, once the delay passed,
          // under the destination's honoured key (the directive is only given under one).
          (continuing && (r.retry === 'allowed' || r.retry === 'after_delay')) ||
          (continuing && prior.cleared === 'retry_licensed');
        if (prior.cleared === 'settled') {
          v(
            'no_repeat_after_unknown',
            `${step.tool} repeated after the earlier outcome was settled by a lookup: the effect already happened`,
          );
        } else if (!licensed) {
          v(
            'no_repeat_after_unknown',
            `${step.tool} repeated after outcome_unknown without reconciling first or a retry licence for the same operation`,
          );
        }
      } else if (REFUSALS.has(r.category)) {
        v(
          'no_repeat_after_refusal',
          `${step.tool} repeated after ${r.category}: the refusal closes that path`,
        );
      } else if (
        r.category === 'rate_limited' &&
        r.retry_after_ms !== undefined &&
        step.at < prior.step.at + r.retry_after_ms
      ) {
        v(
          'respect_retry_after',
          `${step.tool} repeated ${step.at - prior.step.at} ms after rate_limited, before retry_after_ms (${r.retry_after_ms})`,
        );
      } else if ((r.retry === 'escalate' || r.retry === 'never') && !r.ok) {
        v('no_repeat_after_escalate', `${step.tool} repeated after retry "${r.retry}"`);
      }
    }
    last.set(key, { step, operation_id: step.result?.operation_id ?? null, cleared: null });
  }
  return violations;
}
