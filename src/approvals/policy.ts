// Approval policy: which scope of human approval each action needs (DESIGN.md §2 "Approvals").
// Defaults per action class, overridable per class and per action name. A safety floor holds for
// every override: a sensitive class can never be `auto` — a person always sees those calls.
import { ActionClass } from '../core/vocabulary.js';

type ValueOf<T> = T[keyof T];

/**
 * `auto`: approved without a prompt. `session`: one prompt per (session, action), held in memory by
 * one process instance. `per_call`: one prompt per call, bound to operation id + request fingerprint.
 */
export const ApprovalScope = { auto: 'auto', session: 'session', per_call: 'per_call' } as const;
export type ApprovalScope = ValueOf<typeof ApprovalScope>;

/**
 * Classes whose effects are hard to undo: never `auto`, and a retry after an unknown outcome needs a
 * fresh per-call approval even when a session approval exists.
 */
export const SENSITIVE_CLASSES: ReadonlySet<string> = new Set<ActionClass>([
  ActionClass.financial,
  ActionClass.destructive,
  ActionClass.permission_change,
  ActionClass.credential_change,
  ActionClass.execute,
]);

export const DEFAULT_SCOPES: Readonly<Record<ActionClass, ApprovalScope>> = Object.freeze({
  read: 'auto',
  set_state: 'session',
  create: 'session',
  append: 'session',
  notify: 'session',
  financial: 'per_call',
  destructive: 'per_call',
  permission_change: 'per_call',
  credential_change: 'per_call',
  execute: 'per_call',
});

/** How long a per-call approval stays valid: from the prompt until it is used. */
export const DEFAULT_PER_CALL_TTL_MS = 5 * 60_000;

export interface ApprovalPolicy {
  /** The scope for `action` of `actionClass`; an unknown class is treated as `per_call`. */
  scopeFor(action: string, actionClass: ActionClass): ApprovalScope;
  isSensitive(actionClass: ActionClass): boolean;
  readonly per_call_ttl_ms: number;
}

export interface PolicySpec {
  classes?: Partial<Record<ActionClass, ApprovalScope>>;
  /** Per action name; wins over the class. */
  actions?: Readonly<Record<string, { scope: ApprovalScope; action_class?: string }>>;
  per_call_ttl_ms?: number;
}

export interface PolicyProblem {
  code: 'unsafe_auto' | 'unknown_class' | 'unknown_scope' | 'bad_ttl';
  /** One plain sentence naming the offending entry. */
  message: string;
}

export type PolicyResult =
  | { ok: true; value: ApprovalPolicy; failure?: never }
  | { ok: false; failure: PolicyProblem[]; value?: never };

const SCOPES: ReadonlySet<string> = new Set(Object.values(ApprovalScope));

/**
 * Builds a policy, or lists every problem in the spec. A per-action override may name the action's
 * class so the floor can be checked up front; without it the floor is applied at `scopeFor` time.
 */
export function createPolicy(spec: PolicySpec = {}): PolicyResult {
  const problems: PolicyProblem[] = [];
  const classes: Record<string, ApprovalScope> = { ...DEFAULT_SCOPES };
  for (const [cls, scope] of Object.entries(spec.classes ?? {})) {
    if (!Object.hasOwn(DEFAULT_SCOPES, cls)) {
      problems.push({ code: 'unknown_class', message: `unknown action class "${cls}"` });
      continue;
    }
    if (!SCOPES.has(scope)) {
      problems.push({ code: 'unknown_scope', message: `class ${cls}: unknown scope "${scope}"` });
      continue;
    }
    if (scope === 'auto' && SENSITIVE_CLASSES.has(cls)) {
      problems.push({
        code: 'unsafe_auto',
        message: `class ${cls} is sensitive and cannot be approved automatically`,
      });
      continue;
    }
    classes[cls] = scope;
  }
  const actions = new Map<string, ApprovalScope>();
  for (const [name, o] of Object.entries(spec.actions ?? {})) {
    if (!SCOPES.has(o.scope)) {
      problems.push({
        code: 'unknown_scope',
        message: `action ${name}: unknown scope "${o.scope}"`,
      });
      continue;
    }
    if (
      o.scope === 'auto' &&
      o.action_class !== undefined &&
      SENSITIVE_CLASSES.has(o.action_class)
    ) {
      problems.push({
        code: 'unsafe_auto',
        message: `action ${name} is of sensitive class ${o.action_class} and cannot be approved automatically`,
      });
      continue;
    }
    actions.set(name, o.scope);
  }
  const ttl = spec.per_call_ttl_ms ?? DEFAULT_PER_CALL_TTL_MS;
  if (!Number.isFinite(ttl) || ttl <= 0)
    problems.push({ code: 'bad_ttl', message: 'per_call_ttl_ms must be a positive number' });
  if (problems.length > 0) return { ok: false, failure: problems };
  const isSensitive = (cls: string): boolean => SENSITIVE_CLASSES.has(cls);
  return {
    ok: true,
    value: {
      per_call_ttl_ms: ttl,
      isSensitive,
      scopeFor(action, actionClass) {
        const known = Object.hasOwn(classes, actionClass);
        const scope = actions.get(action) ?? (known ? classes[actionClass]! : 'per_call');
        // The floor again: an override given without its class cannot slip a sensitive call through.
        if (scope === 'auto' && (isSensitive(actionClass) || !known)) return 'per_call';
        return scope;
      },
    },
  };
}

/** The default policy (no overrides). */
export function defaultPolicy(): ApprovalPolicy {
  const p = createPolicy();
  if (!p.ok) throw new Error('the default approval policy is invalid'); // unreachable
  return p.value;
}
