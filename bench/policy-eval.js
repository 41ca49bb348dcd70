// Policy evaluation cost per call (issue 34): one decision of a 20-policy Cedar set over a payment
// action — the request built from the arguments, operation state, time and one rolling total, then
// Cedar's authorizer (preparsed set) — against a baseline measured in the same run: the same
// request through Cedar with a 1-policy set. Prints p50/p99 per call and the ratio; no assertion
// (target in the issue: p50 ≤ 0.2 ms for 20 policies). The totals' ledger read is not included:
// it depends on how many operations the window holds (docs/policy.md, Limits).
//
//   node bench/policy-eval.js [--calls N]
//
// Imports the built package from dist/ (run `npm run build` first).
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';

const dist = new URL('../dist/policy/', import.meta.url);
if (!existsSync(new URL('index.js', dist))) {
  console.error('bench: dist/ is missing — run `npm run build` first');
  process.exit(3);
}
const { createEvaluator, cedarRequest, loadPolicyTexts, cedarSchema } = await import(
  new URL('index.js', dist).href
);
const { cedarValueOf } = await import(new URL('cedar-types.js', dist).href);

const { values } = parseArgs({ options: { calls: { type: 'string', default: '20000' } } });
const calls = Number(values.calls);

const input = {
  type: 'object',
  properties: { amount: { type: 'integer' }, memo: { type: 'string' }, env: { type: 'string' } },
  required: ['amount'],
};
const schema = cedarSchema([{ name: 'create_payment', input_schema: input }], ['spent_today']);

function policySet(n) {
  const out = ['permit (principal, action, resource);'];
  for (let i = 1; i < n; i++) {
    const kind = i % 4;
    if (kind === 0)
      out.push(
        `@id("limit-${i}") forbid (principal, action == Candor::Action::"create_payment", resource) when { context.args.amount > ${100000 + i} };`,
      );
    else if (kind === 1)
      out.push(
        `@id("cap-${i}") forbid (principal, action, resource) when { context.totals.spent_today.sum + context.args.amount > ${500000 + i} };`,
      );
    else if (kind === 2)
      out.push(
        `@id("retry-${i}") @approval("required") forbid (principal, action, resource) when { context.operation.may_have_applied && context.operation.attempts > ${i} };`,
      );
    else
      out.push(
        `@id("hours-${i}") forbid (principal, action, resource) when { resource.name like "prod-${i}*" && context.time.hour >= 18 };`,
      );
  }
  return out.join('\n');
}

function evaluatorOf(n) {
  const loaded = loadPolicyTexts([{ file: `bench-${n}.cedar`, text: policySet(n) }], schema);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
  return createEvaluator(loaded.value);
}

const caller = { kind: 'token', subject: 'agent-7', client_id: null, issuer: null, scopes: [] };
function oneCall(evaluator, i) {
  const request = cedarRequest({
    caller,
    action: 'create_payment',
    resource: { kind: 'http', name: 'payments' },
    args: cedarValueOf(input, { amount: 100 + (i % 400), memo: 'bench' }),
    operation: {
      attempts: i % 2,
      effect: i % 2 ? 'unknown' : 'none',
      state: 'open',
      last_category: null,
    },
    now: Date.now(),
    zone: 'Europe/Berlin',
    totals: { spent_today: { count: i % 7, sum: (i % 7) * 100 } },
  });
  return evaluator.evaluate(request);
}

function measure(evaluator) {
  for (let i = 0; i < 500; i++) oneCall(evaluator, i);
  const times = new Float64Array(calls);
  for (let i = 0; i < calls; i++) {
    const t0 = process.hrtime.bigint();
    oneCall(evaluator, i);
    times[i] = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  times.sort();
  return { p50: times[Math.floor(calls * 0.5)], p99: times[Math.floor(calls * 0.99)] };
}

const twenty = measure(evaluatorOf(20));
const one = measure(evaluatorOf(1));
console.log(`policy evaluation per call (${calls} calls, request building included)`);
console.log(`  20 policies   p50 ${twenty.p50.toFixed(3)} ms   p99 ${twenty.p99.toFixed(3)} ms`);
console.log(
  `   1 policy     p50 ${one.p50.toFixed(3)} ms   p99 ${one.p99.toFixed(3)} ms   (baseline)`,
);
console.log(
  `  ratio 20/1 at p50: ${(twenty.p50 / one.p50).toFixed(2)}x   (target: 20-policy p50 <= 0.2 ms)`,
);
