// `candor policy check | test FILE | schema`: Cedar policies against candor.yaml's actions
// (docs/policy.md). check and test are verdicts (exit 1 when they fail); a configuration without a
// `policy:` section, or a test file that does not parse, is a usage error (exit 2).
import { readFileSync } from 'node:fs';
import { schemaToText } from '@cedar-policy/cedar-wasm/nodejs';
import { parse } from 'yaml';
import { z } from 'zod';
import { localCaller, type Caller } from '../../core/caller.js';
import { policyActions, policySpecOf } from '../../config/policy.js';
import {
  cedarRequest,
  cedarSchema,
  createEvaluator,
  formatProblem,
  loadPolicy,
  type PolicyAction,
} from '../../policy/index.js';
import { cedarValueOf } from '../../policy/cedar-types.js';
import { configFrom } from '../config-ledger.js';
import { CliUsageError, parseFlags, type CommandIo } from '../io.js';

const USAGE =
  'usage: candor policy check [--config FILE] | test FILE [--config FILE] | schema [--config FILE] [--json]';

const caseSchema = z.strictObject({
  name: z.string().min(1),
  action: z.string().min(1),
  args: z.record(z.string(), z.unknown()).default({}),
  principal: z
    .strictObject({
      kind: z.enum(['local', 'token']).default('token'),
      subject: z.string().min(1),
      client_id: z.string().nullable().default(null),
      issuer: z.string().nullable().default(null),
      scopes: z.array(z.string()).default([]),
    })
    .optional(),
  operation: z
    .strictObject({
      attempts: z.number().int().min(0).default(0),
      effect: z.enum(['none', 'unknown', 'applied']).default('none'),
      state: z.string().nullable().default(null),
      category: z.string().nullable().default(null),
    })
    .default({ attempts: 0, effect: 'none', state: null, category: null }),
  time: z.iso.datetime({ offset: true }).optional(),
  totals: z
    .record(z.string(), z.strictObject({ count: z.number().int(), sum: z.number().int() }))
    .default({}),
  expect: z.enum(['allow', 'deny', 'require_approval']),
  policies: z.array(z.string()).optional(),
});
const testFileSchema = z.strictObject({ cases: z.array(caseSchema).min(1) });

async function load(flags: Record<string, string | boolean>) {
  const loaded = await configFrom(flags);
  if (!loaded) throw new CliUsageError('no candor.yaml here: pass --config FILE');
  const spec = policySpecOf(loaded.config);
  const actions = policyActions(loaded.config, loaded.actions);
  return { loaded, spec, actions };
}

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, { config: 'string', json: 'boolean' });
  const [sub, ...rest] = positional;
  if (sub === 'schema') {
    if (rest.length > 0) throw new CliUsageError(USAGE);
    const { spec, actions } = await load(flags);
    const schema = cedarSchema(actions, Object.keys(spec?.totals ?? {}));
    if (flags.json === true) {
      io.out(`${JSON.stringify(schema, null, 2)}\n`);
      return 0;
    }
    const text = schemaToText(schema);
    if (text.type === 'failure') throw new Error(text.errors.map((e) => e.message).join('; '));
    io.out(`${text.text}\n`);
    return 0;
  }
  if (sub !== 'check' && sub !== 'test') throw new CliUsageError(USAGE);
  if (sub === 'check' && rest.length > 0) throw new CliUsageError(USAGE);
  if (sub === 'test' && rest.length !== 1) throw new CliUsageError(USAGE);
  const { loaded, spec, actions } = await load(flags);
  if (!spec) throw new CliUsageError(`${loaded.file}: no policy: section (see docs/policy.md)`);
  const result = loadPolicy(spec, actions, loaded.file);
  if (!result.ok) {
    for (const p of result.failure) io.err(`${formatProblem(p)}\n`);
    io.err(`candor policy: ${result.failure.length} problem(s)\n`);
    return 1;
  }
  if (sub === 'check') {
    io.out(
      `${result.value.policies.length} policies in ${spec.files.length} file(s): valid against the schema of ${actions.length} action(s)\n`,
    );
    return 0;
  }
  return runTests(
    rest[0]!,
    result.value.policies,
    actions,
    spec.zone,
    Object.keys(spec.totals),
    io,
  );
}

function runTests(
  file: string,
  policies: Parameters<typeof createEvaluator>[0],
  actions: readonly PolicyAction[],
  zone: string,
  totalNames: readonly string[],
  io: CommandIo,
): number {
  let raw: unknown;
  try {
    raw = parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new CliUsageError(
      `${file}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`,
    );
  }
  const parsed = testFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new CliUsageError(
      `${file}: ${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}`,
    );
  }
  const evaluator = createEvaluator(policies);
  let failed = 0;
  for (const c of parsed.data.cases) {
    const action = actions.find((a) => a.name === c.action);
    if (!action)
      throw new CliUsageError(
        `${file}: case "${c.name}": no action "${c.action}" in the configuration`,
      );
    const unknownTotal = Object.keys(c.totals).find((k) => !totalNames.includes(k));
    if (unknownTotal)
      throw new CliUsageError(
        `${file}: case "${c.name}": no total "${unknownTotal}" under policy.totals`,
      );
    // Every declared total has a value: 0 spent unless the case says otherwise.
    const caller: Caller = c.principal ?? localCaller();
    const request = cedarRequest({
      caller,
      action: c.action,
      resource: action.resource,
      args: cedarValueOf({ ...action.input_schema, type: 'object' }, c.args) ?? {},
      operation: {
        attempts: c.operation.attempts,
        effect: c.operation.effect,
        state: c.operation.state,
        last_category: c.operation.category,
      },
      now: c.time ? Date.parse(c.time) : Date.now(),
      zone,
      totals: Object.fromEntries(totalNames.map((k) => [k, c.totals[k] ?? { count: 0, sum: 0 }])),
    });
    const d = evaluator.evaluate(request);
    const idsOk =
      c.policies === undefined ||
      [...c.policies].sort().join(',') === [...d.policy_ids].sort().join(',');
    if (d.decision === c.expect && idsOk) {
      io.out(
        `ok    ${c.name}: ${d.decision}${d.policy_ids.length ? ` (${d.policy_ids.join(', ')})` : ''}\n`,
      );
    } else {
      failed += 1;
      io.out(
        `FAIL  ${c.name}: expected ${c.expect}${c.policies ? ` by ${c.policies.join(', ')}` : ''}, got ${d.decision}${d.policy_ids.length ? ` by ${d.policy_ids.join(', ')}` : ''} (${d.reason})\n`,
      );
    }
  }
  io.out(`${parsed.data.cases.length - failed} of ${parsed.data.cases.length} cases as expected\n`);
  return failed > 0 ? 1 : 0;
}
