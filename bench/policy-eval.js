// Policy evaluation cost per call (issue 34): one decision of a 20-policy Cedar set over a payment
// action — the request built from the arguments, operation state, time and one rolling total, then
// Cedar's authorizer (preparsed set) — against a baseline measured in the same run: the same
// request with a 1-policy set (both by the default path). More same-run rows say where the time goes: the 20-policy set
// decided by Cedar's wasm only (no JavaScript fast path, src/policy/fast.ts: what Candor did before
// it), the 20-policy set given the whole request (no narrowing to what the policies read, no fast
// path) and the floor, one empty call into Cedar's wasm (no policy, empty context). Prints
// p50/p99 per call, CPU per call, the ratio, the target (issue: 20-policy p50 <= 0.2 ms) and whether
// this run met it; no assertion (the machine's load moves wall-clock p50s). The totals' ledger read
// is not included: it depends on how many operations the window holds (docs/policy.md, Limits).
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
const { preparsePolicySet, statefulIsAuthorized } = await import('@cedar-policy/cedar-wasm/nodejs');

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

function evaluatorOf(n, options) {
  const loaded = loadPolicyTexts([{ file: `bench-${n}.cedar`, text: policySet(n) }], schema);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
  return createEvaluator(loaded.value, options);
}

// The floor: Cedar's wasm entry point with nothing to decide.
preparsePolicySet('bench-empty', { staticPolicies: {} });
const floor = {
  evaluate: () =>
    statefulIsAuthorized({
      principal: { type: 'Candor::Caller', id: 'a' },
      action: { type: 'Candor::Action', id: 'x' },
      resource: { type: 'Candor::Resource', id: 'r' },
      context: {},
      preparsedPolicySetId: 'bench-empty',
      entities: [],
    }),
};

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
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) oneCall(evaluator, i);
  const cpu = process.cpuUsage(cpu0);
  return {
    p50: times[Math.floor(calls * 0.5)],
    p99: times[Math.floor(calls * 0.99)],
    cpu: (cpu.user + cpu.system) / 1000 / calls,
  };
}

const TARGET_MS = 0.2;
const twenty = measure(evaluatorOf(20));
const one = measure(evaluatorOf(1));
const cedarOnly = measure(evaluatorOf(20, { fast: false }));
const wholeRequest = measure(evaluatorOf(20, { narrow: false }));
const empty = measure(floor);
const row = (label, m, note = '') =>
  console.log(
    `  ${label.padEnd(26)} p50 ${m.p50.toFixed(3)} ms   p99 ${m.p99.toFixed(3)} ms   cpu ${m.cpu.toFixed(3)} ms/call${note}`,
  );
console.log(`policy evaluation per call (${calls} calls, request building included)`);
row('20 policies', twenty, '   (default: fast path)');
row('1 policy', one, '   (baseline)');
row('20 policies, Cedar only', cedarOnly, '   (no fast path)');
row('20 policies, whole request', wholeRequest, '   (no narrowing, no fast path)');
row('empty wasm call', empty, '   (floor)');
console.log(`  ratio 20/1 at p50: ${(twenty.p50 / one.p50).toFixed(2)}x`);
console.log(`  ratio Cedar only / fast path at p50: ${(cedarOnly.p50 / twenty.p50).toFixed(2)}x`);
console.log(
  `  target: 20-policy p50 <= ${TARGET_MS} ms -> ${twenty.p50 <= TARGET_MS ? 'met' : 'NOT met'} in this run (p50 ${twenty.p50.toFixed(3)} ms; floor ${empty.p50.toFixed(3)} ms)`,
);
