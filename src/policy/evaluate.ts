// One decision from Cedar's own authorizer over a loaded policy set.
//
//   allow             Cedar allows, and no policy errored.
//   deny              a forbid without @approval determined it, nothing permits the call, or any
//                     policy errored (fail closed: Cedar skips an erroring policy; Candor does not).
//   require_approval  only @approval("required") forbids stand in the way: without them Cedar
//                     would allow.
import {
  preparsePolicySet,
  statefulIsAuthorized,
  type CedarValueJson,
  type EntityJson,
} from '@cedar-policy/cedar-wasm/nodejs';
import { NAMESPACE } from './cedar-types.js';
import type { LoadedPolicy } from './load.js';

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

export function createEvaluator(policies: readonly LoadedPolicy[]): Evaluator {
  const byId = new Map(policies.map((p) => [p.id, p]));
  const full = preparse(policies);
  const hard = preparse(policies.filter((p) => !p.approval));

  const run = (set: string, req: CedarRequest) => {
    const entities: EntityJson[] = [
      {
        uid: { type: `${NAMESPACE}::Caller`, id: req.principal.id },
        attrs: req.principal.attrs,
        parents: [],
      },
      {
        uid: { type: `${NAMESPACE}::Resource`, id: req.resource.id },
        attrs: req.resource.attrs,
        parents: [],
      },
    ];
    const answer = statefulIsAuthorized({
      principal: { type: `${NAMESPACE}::Caller`, id: req.principal.id },
      action: { type: `${NAMESPACE}::Action`, id: req.action },
      resource: { type: `${NAMESPACE}::Resource`, id: req.resource.id },
      context: req.context,
      preparsedPolicySetId: set,
      entities,
    });
    if (answer.type === 'failure')
      return { failed: answer.errors.map((e) => e.message).join('; ') } as const;
    return { response: answer.response } as const;
  };

  const reasonOf = (ids: readonly string[], fallback: string): string =>
    ids.map((id) => byId.get(id)?.reason).find((r): r is string => typeof r === 'string') ??
    fallback;

  return {
    size: policies.length,
    evaluate(req) {
      const first = run(full, req);
      if ('failed' in first)
        return {
          decision: 'deny',
          policy_ids: [],
          reason: `the request could not be evaluated (${first.failed})`,
        };
      const { decision, diagnostics } = first.response;
      if (diagnostics.errors.length > 0) {
        const ids = [...new Set(diagnostics.errors.map((e) => e.policyId))];
        const what = diagnostics.errors.map((e) => `${e.policyId}: ${e.error.message}`).join('; ');
        return {
          decision: 'deny',
          policy_ids: ids,
          reason: `a policy failed to evaluate (${what})`,
        };
      }
      const ids = diagnostics.reason;
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
      const second = run(hard, req);
      if (
        'failed' in second ||
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
