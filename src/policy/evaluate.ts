// One decision from Cedar's own authorizer over a loaded policy set.
//
//   allow             Cedar allows, and no policy errored.
//   deny              a forbid without @approval determined it, nothing permits the call, or any
//                     policy errored (fail closed: Cedar skips an erroring policy; Candor does not).
//   require_approval  only @approval("required") forbids stand in the way: without them Cedar
//                     would allow.
//
// Per call, Cedar gets only what can matter (reads.ts): the policies whose scope can match the
// request (a prepared set per distinct subset, made once) and the attributes those policies read.
// When no policy's scope matches, Cedar's answer is known without asking it: deny, no reasons, no
// errors. The decision, reasons and errors are Cedar's own in every case; the cuts only remove
// what cannot change them (bench/policy-eval.js measures the cost).
//
// When every policy whose scope can match lies in the small subset fast.ts understands, and the
// request is plain, a JavaScript evaluator gives Cedar's answer without the call into wasm; on any
// evaluation error it gives up and Cedar decides (so errors are always Cedar's own).
// test/policy-fast.property.test.ts checks both paths give the same decisions.
import {
  preparsePolicySet,
  statefulIsAuthorized,
  type CedarValueJson,
  type EntityJson,
} from '@cedar-policy/cedar-wasm/nodejs';
import { NAMESPACE } from './cedar-types.js';
import {
  compileFast,
  FAST_OPS,
  FastEntity,
  plain,
  satisfied,
  type BinaryOps,
  wellFormed,
  type FastPolicy,
} from './fast.js';
import type { LoadedPolicy } from './load.js';
import { prune, readsOf, shapeOf, type PolicyShape, type Reads } from './reads.js';

export interface CedarRequest {
  principal: { id: string; attrs: Record<string, CedarValueJson> };
  action: string;
  resource: { id: string; attrs: Record<string, CedarValueJson> };
  context: Record<string, CedarValueJson>;
}

export interface Decision {
  decision: 'allow' | 'deny' | 'require_approval';
  policy_ids: string[];
  reason: string;
}

export interface Evaluator {
  evaluate(request: CedarRequest): Decision;
  readonly size: number;
}

let sets = 0;

function preparse(policies: readonly LoadedPolicy[]): string {
  const id = `candor-policy-${process.pid}-${++sets}`;
  const r = preparsePolicySet(id, {
    staticPolicies: Object.fromEntries(policies.map((p) => [p.id, p.text])),
  });
  if (r.type === 'failure')
    throw new Error(`policy set does not parse: ${r.errors.map((e) => e.message).join('; ')}`);
  return id;
}

/** Prepared subsets kept per evaluator; past this, calls use the whole set (same answer). */
const MAX_SUBSETS = 256;

export interface EvaluatorOptions {
  /** false: every call sends the whole set and the whole request (tests compare both ways). */
  narrow?: boolean;
  /** false: never use the JavaScript fast path (fast.ts); it needs `narrow`. Default true. */
  fast?: boolean;
  /** Tests only: told which path decided each call. */
  trace?: (path: 'none' | 'fast' | 'cedar') => void;
  /** Tests only: replaced fast-path operators (the differential test's teeth check). */
  fastOps?: Partial<BinaryOps>;
}

type Answer =
  | { failed: string; response?: never }
  | {
      failed?: never;
      response: {
        decision: 'allow' | 'deny';
        diagnostics: {
          reason: readonly string[];
          errors: ReadonlyArray<{ policyId: string; error: { message: string } }>;
        };
      };
    };

export function createEvaluator(
  policies: readonly LoadedPolicy[],
  options: EvaluatorOptions = {},
): Evaluator {
  const byId = new Map(policies.map((p) => [p.id, p]));
  const narrow = options.narrow ?? true;
  // A null shape (not understood) reads everything and matches every request.
  const shapes: Array<PolicyShape | null> = narrow ? policies.map((p) => shapeOf(p.text)) : [];
  const fastOn = narrow && (options.fast ?? true);
  const ops: BinaryOps = { ...FAST_OPS, ...options.fastOps };
  const fast: Array<FastPolicy | null> = fastOn
    ? policies.map((p) => compileFast(p.text, ops))
    : [];
  const all = policies.map((_, i) => i);
  const whole = {
    full: preparse(policies),
    hard: preparse(policies.filter((p) => !p.approval)),
    reads: narrow ? readsOf(shapes) : readsOf([null]),
  };
  // Prepared sets by subset key (indices of the policies in it), with what the subset reads.
  const subsets = new Map<string, typeof whole>([[all.join(','), whole]]);

  const principalType = `${NAMESPACE}::Caller`;
  const resourceType = `${NAMESPACE}::Resource`;
  const actionType = `${NAMESPACE}::Action`;

  /** The policies whose scope can match `req` (indices) and their prepared sets; null: none. */
  const setsFor = (req: CedarRequest): { sets: typeof whole; picked: number[] } | null => {
    if (!narrow) return { sets: whole, picked: all };
    const principal = { type: principalType, id: req.principal.id };
    const action = { type: actionType, id: req.action };
    const resource = { type: resourceType, id: req.resource.id };
    const picked: number[] = [];
    for (let i = 0; i < policies.length; i++) {
      const s = shapes[i];
      if (
        !s ||
        (s.scope.action(action) && s.scope.principal(principal) && s.scope.resource(resource))
      )
        picked.push(i);
    }
    if (picked.length === 0) return null;
    const key = picked.join(',');
    const known = subsets.get(key);
    if (known) return { sets: known, picked };
    if (subsets.size >= MAX_SUBSETS) return { sets: whole, picked: all };
    const chosen = picked.map((i) => policies[i]!);
    try {
      const made = {
        full: preparse(chosen),
        hard: preparse(chosen.filter((p) => !p.approval)),
        reads: readsOf(picked.map((i) => shapes[i] ?? null)),
      };
      subsets.set(key, made);
      return { sets: made, picked };
    } catch {
      return { sets: whole, picked: all }; // the whole set gives the same answer
    }
  };

  const entityOf = (
    type: string,
    part: { id: string; attrs: Record<string, CedarValueJson> },
    need: Reads['principal'],
    opaque: boolean,
  ): EntityJson | null => {
    if (opaque) return { uid: { type, id: part.id }, attrs: part.attrs, parents: [] };
    // No attribute read: Cedar treats an absent entity as one without attributes or parents.
    if (need === null) return null;
    return { uid: { type, id: part.id }, attrs: prune(part.attrs, need), parents: [] };
  };

  const run = (set: string, reads: Reads, req: CedarRequest): Answer => {
    const entities: EntityJson[] = [];
    const principal = entityOf(principalType, req.principal, reads.principal, reads.opaque);
    if (principal) entities.push(principal);
    const resource = entityOf(resourceType, req.resource, reads.resource, reads.opaque);
    if (resource) entities.push(resource);
    const answer = statefulIsAuthorized({
      principal: { type: principalType, id: req.principal.id },
      action: { type: actionType, id: req.action },
      resource: { type: resourceType, id: req.resource.id },
      context: reads.context === null ? {} : prune(req.context, reads.context),
      preparsedPolicySetId: set,
      entities,
    });
    if (answer.type === 'failure')
      return { failed: answer.errors.map((e) => e.message).join('; ') };
    return { response: answer.response };
  };

  /** What the entity's attributes are as Cedar is given them (entityOf); null: no entity. */
  const attrsOf = (
    attrs: Record<string, CedarValueJson>,
    need: Reads['principal'],
    opaque: boolean,
  ): Record<string, unknown> | null => {
    if (opaque) return attrs;
    if (need === null) return null;
    return prune(attrs, need);
  };

  /**
   * Cedar's answers for the full and the approval-free set, from fast.ts; null: Cedar must decide
   * (a policy outside the subset, a value that is not plain, or an evaluation error).
   */
  const runFast = (picked: readonly number[], reads: Reads, req: CedarRequest) => {
    const chosen: Array<{ fast: FastPolicy; index: number }> = [];
    for (const i of picked) {
      const f = fast[i];
      if (!f) return null;
      chosen.push({ fast: f, index: i });
    }
    if (!wellFormed(req.principal.id) || !wellFormed(req.resource.id) || !wellFormed(req.action))
      return null;
    const context = reads.context === null ? {} : prune(req.context, reads.context);
    const pAttrs = attrsOf(req.principal.attrs, reads.principal, reads.opaque);
    const rAttrs = attrsOf(req.resource.attrs, reads.resource, reads.opaque);
    if (!plain(context) || (pAttrs && !plain(pAttrs)) || (rAttrs && !plain(rAttrs))) return null;
    const principal = { type: principalType, id: req.principal.id };
    const resource = { type: resourceType, id: req.resource.id };
    const action = { type: actionType, id: req.action };
    const held = satisfied(chosen, principal, action, resource, {
      context,
      principal: new FastEntity(pAttrs),
      resource: new FastEntity(rAttrs),
    });
    if (held === null) return null;
    const permits = held.filter((i) => policies[i]!.effect === 'permit');
    const forbids = held.filter((i) => policies[i]!.effect === 'forbid');
    const hardForbids = forbids.filter((i) => !policies[i]!.approval);
    const answer = (f: number[]): Answer => ({
      response: {
        decision: f.length === 0 && permits.length > 0 ? 'allow' : 'deny',
        diagnostics: {
          reason: (f.length > 0 ? f : permits).map((i) => policies[i]!.id),
          errors: [],
        },
      },
    });
    return { first: answer(forbids), second: () => answer(hardForbids) };
  };

  // Cedar reports its policy ids as sets (no order): Candor lists them in file order, so a decision
  // reads the same whichever prepared set gave it.
  const order = new Map(policies.map((p, i) => [p.id, i]));
  const rank = (id: string) => order.get(id) ?? policies.length;
  const inOrder = (ids: Iterable<string>) =>
    [...new Set(ids)].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));

  const reasonOf = (ids: readonly string[], fallback: string): string =>
    ids.map((id) => byId.get(id)?.reason).find((r): r is string => typeof r === 'string') ??
    fallback;

  return {
    size: policies.length,
    evaluate(req) {
      const found = setsFor(req);
      // No policy's scope matches: Cedar denies with no reasons and no errors.
      if (found === null) {
        options.trace?.('none');
        return { decision: 'deny', policy_ids: [], reason: 'no policy permits this call' };
      }
      const chosen = found.sets;
      const quick = fastOn ? runFast(found.picked, chosen.reads, req) : null;
      options.trace?.(quick ? 'fast' : 'cedar');
      const first = quick ? quick.first : run(chosen.full, chosen.reads, req);
      if (first.failed !== undefined)
        return {
          decision: 'deny',
          policy_ids: [],
          reason: `the request could not be evaluated (${first.failed})`,
        };
      const { decision, diagnostics } = first.response;
      if (diagnostics.errors.length > 0) {
        const ids = inOrder(diagnostics.errors.map((e) => e.policyId));
        const what = [...diagnostics.errors]
          .sort((a, b) => rank(a.policyId) - rank(b.policyId))
          .map((e) => `${e.policyId}: ${e.error.message}`)
          .join('; ');
        return {
          decision: 'deny',
          policy_ids: ids,
          reason: `a policy failed to evaluate (${what})`,
        };
      }
      const ids = inOrder(diagnostics.reason);
      if (decision === 'allow')
        return { decision: 'allow', policy_ids: ids, reason: reasonOf(ids, 'permitted') };
      if (ids.length === 0)
        return { decision: 'deny', policy_ids: [], reason: 'no policy permits this call' };
      const blocking = ids.filter((id) => !byId.get(id)?.approval);
      if (blocking.length > 0)
        return {
          decision: 'deny',
          policy_ids: blocking,
          reason: reasonOf(blocking, 'forbidden by policy'),
        };
      // Only approval forbids stand in the way: the call is allowed once a person agrees, if and
      // only if the rest of the set allows it.
      const second = quick ? quick.second() : run(chosen.hard, chosen.reads, req);
      if (
        second.failed !== undefined ||
        second.response.decision !== 'allow' ||
        second.response.diagnostics.errors.length > 0
      )
        return { decision: 'deny', policy_ids: ids, reason: 'no policy permits this call' };
      return {
        decision: 'require_approval',
        policy_ids: ids,
        reason: reasonOf(ids, 'a person must approve this call'),
      };
    },
  };
}
