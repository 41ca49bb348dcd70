// Issue 34, evaluation cost: per call the evaluator sends Cedar only the policies whose scope can
// match and only the attributes they read (src/policy/reads.ts). Those cuts must never change an
// answer. Property: for random callers, actions, resources, arguments, operation states, times and
// totals, the narrowed evaluator gives exactly the decision, policy ids and reason of the same
// policies evaluated over the whole set and the whole request — with validated policies, and with
// unvalidated ones whose evaluation errors (fail closed must name the same policies).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Caller } from '../src/core/caller.js';
import type { RemoteEffect } from '../src/core/vocabulary.js';
import {
  cedarRequest,
  cedarSchema,
  createEvaluator,
  loadPolicyTexts,
} from '../src/policy/index.js';
import { cedarValueOf } from '../src/policy/cedar-types.js';
import { readsOf, shapeOf } from '../src/policy/reads.js';

const ACTIONS = [
  {
    name: 'pay',
    input_schema: {
      type: 'object',
      properties: {
        amount: { type: 'integer' },
        memo: { type: 'string' },
        fee: { type: 'number' },
        tags: { type: 'array', items: { type: 'string' } },
      },
      required: ['amount'],
    },
  },
  {
    name: 'ssh_run',
    input_schema: { type: 'object', properties: { command: { type: 'string' } } },
  },
  { name: 'list', input_schema: { type: 'object', properties: {} } },
];
const schema = cedarSchema(ACTIONS, ['spent']);

// Validated against the generated schema: every construct the narrowing treats differently.
const VALID = `permit (principal, action, resource);
@id("alice") permit (principal is Candor::Caller in Candor::Caller::"local:alice", action, resource);
@id("over") @reason("over 500")
forbid (principal, action == Candor::Action::"pay", resource) when { context.args.amount > 500 };
@id("memo") forbid (principal, action == Candor::Action::"pay", resource)
when { context.args has memo && context.args.memo like "*evil*" };
@id("scopes") forbid (principal, action in [Candor::Action::"ssh_run", Candor::Action::"pay"], resource)
unless { principal.scopes.contains("write") || principal.kind == "local" };
@id("prod") @approval("required") @reason("prod after hours")
forbid (principal, action, resource is Candor::Resource) when { resource.name like "prod*" && context.time.hour >= 18 };
@id("retry") @approval("required")
forbid (principal, action, resource) when { context.operation.may_have_applied && !context.operation.first_call };
@id("only-bob") forbid (principal == Candor::Caller::"token:bob", action, resource == Candor::Resource::"ssh:prod-1");
@id("fresh") @approval("required") forbid (principal, action == Candor::Action::"ssh_run", resource)
when { context.operation == {"first_call": true, "attempts": 0, "may_have_applied": false, "effect": "none", "state": "open", "category": "none"} };
@id("literal") forbid (principal, action, resource)
when { Candor::Resource::"ssh:prod-1" has name && context.operation.attempts > 2 };
@id("cap") forbid (principal, action == Candor::Action::"pay", resource)
when { context.totals.spent.sum + context.args.amount > 2000 };
@id("fee") forbid (principal, action == Candor::Action::"pay", resource)
when { context.args has fee && context.args.fee.greaterThan(decimal("99.5")) };
@id("tags") forbid (principal, action == Candor::Action::"pay", resource in Candor::Resource::"http:payments")
when { context.args has tags && context.args.tags.contains("blocked") };
@id("list-only-local") forbid (principal, action == Candor::Action::"list", resource) unless { principal.kind == "local" };
`;

// Not validated: attribute reads that can fail at run time (an optional one read without `has`).
const ERRING = `permit (principal, action, resource);
@id("memo-bare") forbid (principal, action == Candor::Action::"pay", resource) when { context.args.memo == "x" };
@id("client") forbid (principal, action in [Candor::Action::"ssh_run"], resource) when { principal.client_id == "c" };
@id("issuer") @approval("required") forbid (principal, action, resource == Candor::Resource::"mcp:tools") when { principal.issuer like "*" };
@id("args-eq") forbid (principal, action == Candor::Action::"pay", resource) when { context.args == {"amount": 13} };
@id("nope") forbid (principal, action == Candor::Action::"list", resource) when { resource.nope == 1 };
`;

function evaluators(text: string, validate: boolean) {
  const loaded = loadPolicyTexts([{ file: 'p.cedar', text }], validate ? schema : null);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
  return {
    narrow: createEvaluator(loaded.value),
    whole: createEvaluator(loaded.value, { narrow: false }),
  };
}

const callerArb: fc.Arbitrary<Caller> = fc.record({
  kind: fc.constantFrom('token', 'local'),
  subject: fc.constantFrom('bob', 'alice', 'agent'),
  client_id: fc.option(fc.constantFrom('c', 'd'), { nil: null }),
  issuer: fc.option(fc.constantFrom('https://id.example'), { nil: null }),
  scopes: fc.subarray(['read', 'write']),
});

const argsArb = fc.record(
  {
    amount: fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.constant(13)),
    memo: fc.constantFrom('', 'evil plan', 'ok', 'x'),
    fee: fc.integer({ min: 0, max: 20000 }).map((n) => n / 100),
    tags: fc.subarray(['blocked', 'ok']),
    command: fc.constantFrom('ls', 'rm'),
  },
  { requiredKeys: [] },
);

const requestArb = fc.record({
  caller: callerArb,
  action: fc.constantFrom('pay', 'ssh_run', 'list'),
  resource: fc.constantFrom(
    { kind: 'http', name: 'payments' },
    { kind: 'ssh', name: 'prod-1' },
    { kind: 'ssh', name: 'dev-1' },
    { kind: 'mcp', name: 'tools' },
  ),
  args: argsArb,
  attempts: fc.integer({ min: 0, max: 4 }),
  effect: fc.constantFrom<RemoteEffect[]>('none', 'unknown', 'applied'),
  now: fc.integer({ min: Date.UTC(2026, 0, 1), max: Date.UTC(2026, 0, 8) }),
  spent: fc.record({ count: fc.nat(20), sum: fc.nat(3000) }),
});

type Drawn = typeof requestArb extends fc.Arbitrary<infer T> ? T : never;

function requestOf(r: Drawn) {
  const input = ACTIONS.find((a) => a.name === r.action)!.input_schema;
  return cedarRequest({
    caller: r.caller,
    action: r.action,
    resource: r.resource,
    args: cedarValueOf(input, r.args) ?? {},
    operation: {
      attempts: r.attempts,
      effect: r.effect,
      state: 'open',
      last_category: r.effect === 'unknown' ? 'unknown' : null,
    },
    now: r.now,
    zone: 'Europe/Berlin',
    totals: { spent: r.spent },
  });
}

describe('narrowed evaluation decides exactly as the whole set over the whole request', () => {
  for (const [name, text, validate] of [
    ['validated policies', VALID, true],
    ['policies whose evaluation errors', ERRING, false],
  ] as const) {
    it(name, () => {
      const { narrow, whole } = evaluators(text, validate);
      const seen = new Set<string>();
      fc.assert(
        fc.property(requestArb, (r) => {
          const req = requestOf(r);
          const a = narrow.evaluate(req);
          const b = whole.evaluate(req);
          expect(a).toEqual(b);
          seen.add(`${a.decision}:${a.policy_ids.join(',')}`);
        }),
        { seed: 3434, numRuns: 600 },
      );
      // The property saw every kind of answer, not only one.
      const kinds = new Set([...seen].map((s) => s.split(':')[0]));
      expect(kinds).toEqual(new Set(['allow', 'deny', 'require_approval']));
    });
  }
});

describe('what a policy set reads', () => {
  it('is the paths it reads attribute by attribute, whole values where read as values', () => {
    const loaded = loadPolicyTexts([{ file: 'p.cedar', text: VALID }], schema);
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
    const reads = readsOf(loaded.value.map((p) => shapeOf(p.text)));
    const plain = (n: unknown): unknown =>
      n instanceof Map ? Object.fromEntries([...n].map(([k, v]) => [k, plain(v)])) : n;
    expect(plain(reads.context)).toEqual({
      args: { amount: true, memo: true, fee: true, tags: true },
      time: { hour: true },
      operation: true, // `context.operation == {...}` reads the whole record
      totals: { spent: { sum: true } },
    });
    expect(plain(reads.principal)).toEqual({ scopes: true, kind: true });
    expect(plain(reads.resource)).toEqual({ name: true });
    // `Candor::Resource::"ssh:prod-1" has name` reads an entity that is not a plain path.
    expect(reads.opaque).toBe(true);
  });

  it('leaves out policies whose scope cannot match, and skips Cedar when none can', () => {
    const loaded = loadPolicyTexts(
      [
        {
          file: 'p.cedar',
          text: `permit (principal, action == Candor::Action::"pay", resource);
@id("lit") forbid (principal, action == Candor::Action::"pay", resource) when { context.args.amount > 5 };`,
        },
      ],
      schema,
    );
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
    const ev = createEvaluator(loaded.value);
    const base = {
      caller: { kind: 'local', subject: 'alice', client_id: null, issuer: null, scopes: [] },
      resource: { kind: 'http', name: 'payments' },
      operation: { attempts: 0, effect: 'none', state: 'open', last_category: null },
      now: Date.UTC(2026, 0, 1),
      zone: 'UTC',
      totals: {},
    } as const;
    expect(ev.evaluate(cedarRequest({ ...base, action: 'list', args: {} }))).toEqual({
      decision: 'deny',
      policy_ids: [],
      reason: 'no policy permits this call',
    });
    expect(ev.evaluate(cedarRequest({ ...base, action: 'pay', args: { amount: 9 } }))).toEqual({
      decision: 'deny',
      policy_ids: ['lit'],
      reason: 'forbidden by policy',
    });
    expect(ev.evaluate(cedarRequest({ ...base, action: 'pay', args: { amount: 1 } }))).toEqual({
      decision: 'allow',
      policy_ids: ['p.cedar:1'],
      reason: 'permitted',
    });
  });
});
