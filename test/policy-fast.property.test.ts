// Issue 34, evaluation cost: the JavaScript fast path (src/policy/fast.ts) decides requests whose
// matching policies all lie in a small Cedar subset, instead of calling Cedar's wasm. It must never
// change an answer. Differential property: random policy sets drawn from the subset (with
// constructs outside it mixed in, ill-typed expressions, missing attributes, values at the edge of
// what a JS number carries exactly) over random requests give exactly the Decision (decision,
// policy ids, reason) of Cedar itself (`narrow: false`: the whole set and request, no fast path).
// A teeth check shows the property catches a fast path with one wrong operator.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  createEvaluator,
  loadPolicyTexts,
  type CedarRequest,
  type Decision,
} from '../src/policy/index.js';
import type { EvaluatorOptions } from '../src/policy/evaluate.js';

// Attributes: n an integer, s a string, b a boolean, a a record of them (mostly: see `typed`).
const NAMES = ['a', 'b', 'n', 's'] as const;
const name = fc.constantFrom(...NAMES);
const EDGE = 9007199254740991; // 2^53 - 1: the largest integer the fast path carries

// ---- policies (Cedar text) ----

const intLit = fc.oneof(
  fc.integer({ min: -3, max: 7 }).map((n) => (n < 0 ? `(-${-n})` : String(n))),
  fc.constantFrom(String(EDGE), `(-${EDGE})`, '4503599627370496'),
);
const strLit = fc.constantFrom('""', '"x"', '"prod-1"', '"a*b"', '"é"', '"😀x"');
const literal = fc.oneof(fc.constantFrom('true', 'false'), intLit, strLit);
const path = fc.oneof(
  name.map((a) => `context.${a}`),
  fc.tuple(name, name).map(([a, b]) => `context.${a}.${b}`),
  name.map((a) => `principal.${a}`),
  name.map((a) => `resource.${a}`),
);
const hasExpr = fc.oneof(
  name.map((a) => `(context has ${a})`),
  fc.tuple(name, name).map(([a, b]) => `(context.${a} has ${b})`),
  name.map((a) => `(principal has ${a})`),
  name.map((a) => `(resource has ${a})`),
);
const pattern = fc.constantFrom(
  '*',
  'x*',
  '*1',
  'p*d*',
  '',
  'a\\*b',
  '*é*',
  'prod-*',
  '*x*x',
  '😀*',
  '*😀x',
);
// Outside the subset: the set goes to Cedar (the property then checks the split is right).
const outsideExpr = fc.constantFrom(
  '[1, 2].contains(1)',
  '(context == {"a": 1})',
  '(principal == Candor::Caller::"p1")',
  '(context has a.b)',
);

// Mostly well typed (so that most requests are decided by the fast path and a wrong operator
// shows), with ill-typed expressions (`untyped`) and constructs outside the subset mixed in.
const intPath = fc.constantFrom('context.n', 'context.a.n', 'principal.n', 'resource.n');
const strPath = fc.constantFrom('context.s', 'context.a.s', 'principal.s', 'resource.s');
const boolPath = fc.constantFrom('context.b', 'context.a.b', 'principal.b');
const CMP = ['==', '!=', '<', '<=', '>', '>='];
const { bool } = fc.letrec<{ int: string; bool: string; untyped: string }>((tie) => ({
  int: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    intLit,
    intPath,
    fc
      .tuple(tie('int'), fc.constantFrom('+', '-', '*'), tie('int'))
      .map(([l, op, r]) => `(${l} ${op} ${r})`),
    tie('int').map((e) => `(-(${e}))`),
    fc
      .tuple(tie('bool'), tie('int'), tie('int'))
      .map(([c, t, e]) => `(if ${c} then ${t} else ${e})`),
  ),
  bool: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom('true', 'false'),
    boolPath,
    hasExpr,
    fc
      .tuple(tie('int'), fc.constantFrom(...CMP), tie('int'))
      .map(([l, op, r]) => `(${l} ${op} ${r})`),
    fc
      .tuple(fc.oneof(strPath, strLit), fc.constantFrom('==', '!='), fc.oneof(strPath, strLit))
      .map(([l, op, r]) => `(${l} ${op} ${r})`),
    fc
      .tuple(tie('bool'), fc.constantFrom('&&', '||', '==', '!='), tie('bool'))
      .map(([l, op, r]) => `(${l} ${op} ${r})`),
    tie('bool').map((e) => `(!(${e}))`),
    fc.tuple(strPath, pattern).map(([e, p]) => `(${e} like "${p}")`),
    fc
      .tuple(tie('bool'), tie('bool'), tie('bool'))
      .map(([c, t, e]) => `(if ${c} then ${t} else ${e})`),
    fc
      .integer({ min: 0, max: 12 })
      .chain((n) => (n === 0 ? outsideExpr : n === 1 ? tie('untyped') : fc.constantFrom('true'))),
  ),
  untyped: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    literal,
    path,
    hasExpr,
    fc
      .tuple(tie('untyped'), fc.constantFrom(...CMP, '+', '-', '*', '&&', '||'), tie('untyped'))
      .map(([l, op, r]) => `(${l} ${op} ${r})`),
    fc.tuple(fc.constantFrom('!', '-'), tie('untyped')).map(([op, e]) => `(${op}(${e}))`),
    fc.tuple(tie('untyped'), pattern).map(([e, p]) => `(${e} like "${p}")`),
    fc
      .tuple(tie('untyped'), tie('untyped'), tie('untyped'))
      .map(([c, t, e]) => `(if ${c} then ${t} else ${e})`),
  ),
}));

const entityScope = (v: string, type: string, ids: string[]) => {
  const forms = [v, `${v} == Candor::${type}::"${ids[0]}"`, `${v} in Candor::${type}::"${ids[1]}"`];
  // Cedar allows a list in the action scope only, `is` in the others only.
  if (v === 'action')
    forms.push(`${v} in [Candor::${type}::"${ids[0]}", Candor::${type}::"${ids[1]}"]`);
  else
    forms.push(
      `${v} is Candor::${type}`,
      `${v} is Candor::${type} in Candor::${type}::"${ids[1]}"`,
    );
  return fc.constantFrom(...forms);
};
const PRINCIPALS = ['p1', 'p2', 'p3'];
const ACTIONS = ['pay', 'list'];
const RESOURCES = ['r1', 'r2'];

const policyArb = fc.record({
  effect: fc.constantFrom('permit', 'forbid'),
  approval: fc.boolean(),
  reason: fc.boolean(),
  principal: entityScope('principal', 'Caller', PRINCIPALS),
  action: entityScope('action', 'Action', ACTIONS),
  resource: entityScope('resource', 'Resource', RESOURCES),
  conditions: fc.array(fc.tuple(fc.constantFrom('when', 'unless'), bool), { maxLength: 2 }),
});
type DrawnPolicy = typeof policyArb extends fc.Arbitrary<infer T> ? T : never;

function textOf(ps: DrawnPolicy[]): string {
  return ps
    .map((p, i) => {
      const notes = [`@id("p${i}")`];
      if (p.effect === 'forbid' && p.approval) notes.push('@approval("required")');
      if (p.reason) notes.push(`@reason("because ${i}")`);
      const conds = p.conditions.map(([k, e]) => ` ${k} { ${e} }`).join('');
      return `${notes.join(' ')} ${p.effect} (${p.principal}, ${p.action}, ${p.resource})${conds};`;
    })
    .join('\n');
}

// ---- requests ----

const anyScalar = fc.oneof(
  fc.boolean(),
  fc.integer({ min: -3, max: 7 }),
  fc.constantFrom(EDGE, -EDGE, 2 ** 53, 1.5),
  fc.constantFrom('', 'x', 'prod-1', 'pxd-', 'a*b', 'axb', 'é', '😀x', 'xx1'),
);
const typedScalars = {
  n: fc.oneof(fc.integer({ min: -3, max: 7 }), fc.constantFrom(EDGE, -EDGE, 4503599627370496)),
  s: fc.constantFrom('', 'x', 'prod-1', 'pxd-', 'a*b', 'axb', 'é', '😀x', 'xx1'),
  b: fc.boolean(),
};
/** A record with each of n, s, b (and a, when `nested`) usually present and usually well typed. */
const typed = (nested: boolean): fc.Arbitrary<Record<string, unknown>> => {
  const field = (k: 'n' | 's' | 'b') =>
    fc.oneof({ weight: 8, arbitrary: typedScalars[k] }, { weight: 1, arbitrary: anyScalar });
  const fields: Record<string, fc.Arbitrary<unknown>> = {
    n: field('n'),
    s: field('s'),
    b: field('b'),
  };
  if (nested) fields['a'] = fc.oneof({ weight: 6, arbitrary: typed(false) }, anyScalar);
  return fc.tuple(fc.record(fields), fc.subarray(Object.keys(fields))).map(([rec, gone]) => {
    const out = { ...rec };
    // Usually every attribute is there; sometimes some are missing.
    for (const k of gone.length < 2 ? gone : []) delete out[k];
    return out;
  });
};
const attrs = typed(true);

const requestArb = fc.record({
  principal: fc.record({ id: fc.constantFrom(...PRINCIPALS), attrs }),
  action: fc.constantFrom(...ACTIONS),
  resource: fc.record({ id: fc.constantFrom(...RESOURCES), attrs }),
  context: attrs,
}) as fc.Arbitrary<CedarRequest>;

// ---- the property ----

interface Tally {
  fast: number;
  cedar: number;
  fastDecisions: Set<string>;
}

/** `whole`: also compare with Cedar given the whole request (the teeth check needs only the first). */
function differential(options: Partial<EvaluatorOptions>, tally: Tally, whole = true) {
  return fc.property(
    fc.array(policyArb, { minLength: 1, maxLength: 6 }),
    fc.array(requestArb, { minLength: 1, maxLength: 12 }),
    (drawn, requests) => {
      const loaded = loadPolicyTexts([{ file: 'p.cedar', text: textOf(drawn) }], null);
      if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
      let path = '';
      const fast = createEvaluator(loaded.value, {
        ...options,
        trace: (p) => {
          path = p;
        },
      });
      const cedar = whole ? createEvaluator(loaded.value, { narrow: false }) : null;
      const narrowCedar = createEvaluator(loaded.value, { fast: false });
      for (const req of requests) {
        const a: Decision = fast.evaluate(req);
        if (path === 'fast') {
          tally.fast++;
          tally.fastDecisions.add(a.decision);
        } else tally.cedar++;
        expect(a).toEqual(narrowCedar.evaluate(req));
        // The whole request: Cedar refuses a fractional number anywhere in it, even where no
        // policy reads it, which the narrowed request leaves out (Candor never builds one: its
        // numbers are integers or decimal extension values).
        if (cedar && !JSON.stringify(req).includes('1.5')) expect(a).toEqual(cedar.evaluate(req));
      }
    },
  );
}

describe('the fast path decides exactly as Cedar', () => {
  it('for random policy sets from the subset and random requests (seeded)', () => {
    const tally: Tally = { fast: 0, cedar: 0, fastDecisions: new Set() };
    fc.assert(differential({}, tally), { seed: 3434, numRuns: 400 });
    // Thousands of requests, about half decided by the fast path with every kind of answer among
    // them, and Cedar deciding the rest (an evaluation error, a policy outside the subset, a value
    // that is not plain).
    expect(tally.fast + tally.cedar).toBeGreaterThan(2000);
    expect(tally.fast).toBeGreaterThan(1000);
    expect(tally.cedar).toBeGreaterThan(200);
    expect(tally.fastDecisions).toEqual(new Set(['allow', 'deny', 'require_approval']));
  });

  it('and the property catches a fast path with one wrong operator (teeth)', () => {
    // A boundary slip (< read as <=) and a wrong operator: with this seed fast-check meets the
    // first decision that differs after about 300 and 10 runs. The comparison with Cedar given
    // the whole request is left out here: the wrong operator is in the fast path, and the narrowed
    // comparison is the one that sees it (it halves the Cedar work of this check).
    for (const wrong of [
      { '<': (a: number, b: number) => a <= b },
      { '*': (a: number, b: number) => a + b },
    ]) {
      const tally: Tally = { fast: 0, cedar: 0, fastDecisions: new Set() };
      const run = fc.check(differential({ fastOps: wrong }, tally, false), {
        seed: 3434,
        numRuns: 400,
        endOnFailure: true,
      });
      expect(run.failed).toBe(true);
      // Failed on a decision that differs, not on anything else.
      expect(String(run.errorInstance)).toMatch(/expected .* to deeply equal/);
    }
  });
});

describe('the fast path on chosen cases', () => {
  const decide = (text: string, req: Partial<CedarRequest> = {}) => {
    const loaded = loadPolicyTexts([{ file: 'p.cedar', text }], null);
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
    let path = '';
    const full: CedarRequest = {
      principal: { id: 'p1', attrs: {} },
      action: 'pay',
      resource: { id: 'r1', attrs: { name: 'prod-7' } },
      context: { n: 5 },
      ...req,
    };
    const d = createEvaluator(loaded.value, { trace: (p) => (path = p) }).evaluate(full);
    expect(d).toEqual(createEvaluator(loaded.value, { narrow: false }).evaluate(full));
    return { d, path };
  };

  it('short-circuits && and || as Cedar does: no error from the side not evaluated', () => {
    const r = decide(`permit (principal, action, resource) when { context.n > 9 && context.nope };
@id("f") forbid (principal, action, resource) when { context.n > 1 || context.nope };`);
    expect(r).toEqual({
      path: 'fast',
      d: { decision: 'deny', policy_ids: ['f'], reason: 'forbidden by policy' },
    });
  });

  it('leaves an erroring request to Cedar, which denies naming the policy', () => {
    // The last one overflows i64 in Cedar (the fast path gives up past 2^53 already).
    const overflow = `context.n * ${EDGE} * ${EDGE} > 0`;
    for (const cond of ['context.nope == 1', 'context.n like "5"', overflow]) {
      const r = decide(`permit (principal, action, resource);
@id("e") forbid (principal, action, resource) when { ${cond} };`);
      expect(r.path).toBe('cedar');
      expect(r.d.decision).toBe('deny');
      expect(r.d.policy_ids).toEqual(['e']);
      expect(r.d.reason).toMatch(/^a policy failed to evaluate \(e: /);
    }
  });

  it('gives approval-only forbids require_approval, and denies them when nothing permits', () => {
    const rules = `@id("night") @approval("required") forbid (principal, action, resource) when { resource.name like "prod-*" };`;
    expect(decide(`permit (principal, action, resource);\n${rules}`)).toEqual({
      path: 'fast',
      d: {
        decision: 'require_approval',
        policy_ids: ['night'],
        reason: 'a person must approve this call',
      },
    });
    expect(decide(rules)).toEqual({
      path: 'fast',
      d: { decision: 'deny', policy_ids: ['night'], reason: 'no policy permits this call' },
    });
  });

  it('leaves policies outside the subset, and values that are not plain, to Cedar', () => {
    expect(decide(`permit (principal, action, resource) when { [1].contains(1) };`).path).toBe(
      'cedar',
    );
    const rule = `permit (principal, action, resource) when { context.n == 5 };`;
    expect(decide(rule).path).toBe('fast');
    expect(decide(rule, { context: { n: [5] } }).path).toBe('cedar');
    expect(decide(rule, { context: { n: 2 ** 53 } }).path).toBe('cedar');
  });
});
