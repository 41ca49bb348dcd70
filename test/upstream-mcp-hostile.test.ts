// Candor in front of a hostile stdio MCP server of its own (test/fixtures/upstream/
// hostile-server.mjs), driven by a real MCP client over stdio through `candor serve` with a SQLite
// ledger. Every invoice tool commits first (a line in the ground-truth file) and then answers
// badly. The tests compare what the agent was told — the envelope and the text line — and what the
// ledger holds with that ground truth: no "NOT DONE" / remote_effect none after a commit, no
// "applied" without one.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { envelopeSchema, type Envelope } from '../src/core/envelope.js';
import type { StoredEvent } from '../src/ledger/events.js';
import { openLedger } from '../src/ledger/open.js';
import { projectOperation } from '../src/ledger/projection.js';
import {
  connectStdio,
  ROOT,
  tempDir,
  writeConfig,
  type StdioGateway,
} from './fixtures/mcp/stdio.js';

const HOSTILE = join(ROOT, 'test', 'fixtures', 'upstream', 'hostile-server.mjs');
const NODE = process.execPath;
const q = (s: string): string => JSON.stringify(s);

let open: StdioGateway[] = [];
afterEach(async () => {
  for (const gw of open) await gw.close().catch(() => undefined);
  open = [];
});

interface Setup {
  dir: string;
  truth: string;
  calls: string;
  config: string;
}

function setup(prefix: string, extraEnv = ''): Setup {
  const dir = tempDir(prefix);
  const truth = join(dir, 'truth.jsonl');
  const calls = join(dir, 'calls.jsonl');
  const config = writeConfig(
    dir,
    `upstreams:
  bill:
    command: ${q(NODE)}
    args: [${q(HOSTILE)}]
    env:
      CANDOR_TRUTH: ${q(truth)}
      CANDOR_CALL_LOG: ${q(calls)}
${extraEnv}    deadline_ms: 2500
`,
  );
  return { dir, truth, calls, config };
}

async function serve(s: Setup): Promise<StdioGateway> {
  const gw = await connectStdio(
    ['--config', s.config, '--ledger', `sqlite:${join(s.dir, 'ledger.db')}`],
    {},
    s.dir,
  );
  open.push(gw);
  return gw;
}

const lines = (file: string): Array<Record<string, unknown>> =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
    : [];

async function call(
  gw: StdioGateway,
  name: string,
  args: Record<string, unknown>,
): Promise<{ env: Envelope; line: string; text: string }> {
  const r = await gw.client.callTool({ name, arguments: args });
  const text = (r.content as Array<{ text: string }>)[0]!.text;
  return { env: envelopeSchema.parse(r.structuredContent), line: text.split('\n')[0]!, text };
}

async function events(dir: string, operationId: string): Promise<StoredEvent[]> {
  const ledger = await openLedger(`sqlite:${join(dir, 'ledger.db')}`);
  if (!ledger.ok) throw new Error(`ledger: ${ledger.failure.message}`);
  try {
    return await ledger.value.query({ operation_id: operationId });
  } finally {
    await ledger.value.close();
  }
}

const ARGS = { customer: 'ACME', amount: 120 };

describe('a hostile upstream that commits, then answers badly: 0 false claims', () => {
  it.each([
    ['invoice_ok', true],
    ['invoice_is_error', true],
    ['invoice_internal', true],
    ['invoice_custom_code', true],
    ['invoice_exit', true],
    ['invoice_hang', true],
    ['invoice_bad_structured', true],
    ['invoice_reject', false],
  ] as const)('%s', async (tool, commits) => {
    const s = setup(`candor-hostile-${tool}-`);
    const gw = await serve(s);
    const { env, line } = await call(gw, `bill_${tool}`, ARGS);
    const committed = lines(s.truth).filter((t) => t['tool'] === tool).length;
    expect(committed).toBe(commits ? 1 : 0);
    // What the agent was told against the ground truth.
    if (committed > 0) {
      expect(env.remote_effect, line).not.toBe('none');
      expect(line).not.toContain('NOT DONE');
      expect(env.category).not.toBe('confirmed_failure');
    } else {
      expect(env.remote_effect).toBe('none');
      expect(env.ok).toBe(false);
      expect(line).toMatch(/^NOT DONE — confirmed_rejection/);
    }
    if (env.remote_effect === 'unknown') {
      expect(env.category).toBe('outcome_unknown');
      expect(line).toMatch(/^OUTCOME UNKNOWN — /);
      // No lookup and no idempotency key: a person decides.
      expect(env.retry).toBe('escalate');
    }
    // The ledger agrees with the envelope.
    await gw.close();
    open = [];
    const view = projectOperation(await events(s.dir, env.operation_id!))!;
    const finished = view.attempts.map((a) => a.finish?.remote_effect);
    expect(finished).toEqual([env.remote_effect]);
    const state = view.state;
    if (env.remote_effect === 'unknown') expect(state).toBe('unknown');
    if (env.remote_effect === 'none') expect(state).toBe('failed');
    if (env.ok) expect(state).toBe('succeeded');
  });

  it('isError_after_commit_is_not_confirmed_failure: the upstream error text reaches data.upstream_error, redacted', async () => {
    const s = setup('candor-hostile-text-');
    const gw = await serve(s);
    const { env, text } = await call(gw, 'bill_invoice_is_error', ARGS);
    expect(env).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      retry: 'escalate',
    });
    const data = env.data as { upstream_error: string; upstream_error_truncated?: true };
    expect(data.upstream_error).toMatch(
      /^payment gateway timeout after the invoice inv_\d+_1 was stored/,
    );
    expect(data.upstream_error).toContain('[REDACTED]');
    expect(data.upstream_error_truncated).toBeUndefined();
    expect(text).not.toContain('abcdefghijklmnopqrstuvwxyz012345');
    expect(env.message).toContain('data.upstream_error');
  });

  it('rpc_internal_error_after_commit_is_not_confirmed_failure: -32603 carries its message and code', async () => {
    const s = setup('candor-hostile-32603-');
    const gw = await serve(s);
    const { env, line } = await call(gw, 'bill_invoice_internal', ARGS);
    expect(env).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    expect(env.data).toMatchObject({ upstream_error_code: -32603 });
    expect((env.data as { upstream_error: string }).upstream_error).toContain('handler crashed');
    expect(line).toMatch(/^OUTCOME UNKNOWN/);
    expect(lines(s.truth)).toHaveLength(1);
  });
});

describe('the upstream inputSchema is enforced before anything is sent', () => {
  it('schema_breaking_arguments_are_never_sent: amount -5 against exclusiveMinimum 0 is invalid_input naming amount', async () => {
    const s = setup('candor-hostile-schema-');
    const gw = await serve(s);
    const { env, line } = await call(gw, 'bill_invoice_ok', { customer: 'ACME', amount: -5 });
    expect(env).toMatchObject({
      ok: false,
      category: 'invalid_input',
      remote_effect: 'none',
      retry: 'never',
      operation_id: null,
      data: { field: 'amount' },
    });
    expect(line).toBe('NOT DONE — invalid input: fix the arguments, nothing was sent');
    // A missing required field and an undeclared one (additionalProperties: false) likewise.
    const missing = await call(gw, 'bill_invoice_ok', { amount: 5 });
    expect(missing.env).toMatchObject({ category: 'invalid_input', data: { field: 'customer' } });
    const extra = await call(gw, 'bill_invoice_ok', { ...ARGS, memo: 'x' });
    expect(extra.env).toMatchObject({ category: 'invalid_input', data: { field: 'memo' } });
    // Ground truth: the upstream was never asked, nothing was written.
    expect(lines(s.calls)).toEqual([]);
    expect(lines(s.truth)).toEqual([]);
    // The control: valid arguments do reach it.
    const ok = await call(gw, 'bill_invoice_ok', ARGS);
    expect(ok.env).toMatchObject({ ok: true, remote_effect: 'applied' });
    expect(lines(s.calls)).toEqual([{ tool: 'invoice_ok', arguments: ARGS }]);
  });
});

describe('the duplicate guard lives in the ledger', () => {
  it('duplicate_guard_survives_restart: the identical call after a gateway restart is held with the earlier directive, the upstream asked once', async () => {
    const s = setup('candor-hostile-restart-');
    const first = await call(await serve(s), 'bill_invoice_is_error', ARGS);
    expect(first.env).toMatchObject({ remote_effect: 'unknown', retry: 'escalate' });
    for (const gw of open) await gw.close();
    open = [];
    // A new gateway process on the same ledger file.
    const again = await call(await serve(s), 'bill_invoice_is_error', ARGS);
    expect(again.env).toMatchObject({
      ok: false,
      operation_id: first.env.operation_id,
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      // duplicate_repeat_says_the_operations_directive: escalate, as the operation said.
      retry: 'escalate',
      data: {
        refusal: { code: 'duplicate_unresolved' },
        held_operation_id: first.env.operation_id,
      },
    });
    expect(again.env.message).toMatch(/^Not forwarded: an identical call/);
    expect(again.line).toContain('this call was not forwarded: duplicate_unresolved');
    expect(lines(s.calls)).toHaveLength(1);
    expect(lines(s.truth)).toHaveLength(1);
  });

  it('duplicate_guard_spans_gateways: a second gateway on the same ledger holds the identical call the first left unknown', async () => {
    const s = setup('candor-hostile-fleet-');
    const one = await serve(s);
    const two = await serve(s);
    const first = await call(one, 'bill_invoice_internal', ARGS);
    expect(first.env).toMatchObject({ remote_effect: 'unknown' });
    const other = await call(two, 'bill_invoice_internal', ARGS);
    expect(other.env).toMatchObject({
      operation_id: first.env.operation_id,
      remote_effect: 'unknown',
      retry: first.env.retry,
      data: { refusal: { code: 'duplicate_unresolved' } },
    });
    expect(lines(s.calls)).toHaveLength(1);
    expect(lines(s.truth)).toHaveLength(1);
  });

  it('duplicate_guard_holds_in_flight: two concurrent identical calls, the upstream receives exactly one', async () => {
    const s = setup('candor-hostile-inflight-', '      CANDOR_SLOW_MS: "1500"\n');
    const gw = await serve(s);
    const [a, b] = await Promise.all([
      call(gw, 'bill_invoice_slow', ARGS),
      call(gw, 'bill_invoice_slow', ARGS),
    ]);
    expect(lines(s.calls)).toHaveLength(1);
    expect(lines(s.truth)).toHaveLength(1);
    const [done, held] = a.env.ok ? [a, b] : [b, a];
    expect(done.env).toMatchObject({ ok: true, remote_effect: 'applied' });
    expect(held.env).toMatchObject({
      ok: false,
      operation_id: done.env.operation_id,
      remote_effect: 'unknown',
      data: { refusal: { code: 'duplicate_in_flight' } },
    });
    expect(held.line).not.toContain('NOT DONE');
  });

  it('undeclared fields are part of the fingerprint where the schema allows them', async () => {
    const s = setup('candor-hostile-open-');
    const gw = await serve(s);
    const first = await call(gw, 'bill_invoice_is_error', ARGS);
    expect(first.env.remote_effect).toBe('unknown');
    // invoice_open allows undeclared fields: a different argument set is a different call.
    const open1 = await call(gw, 'bill_invoice_open', ARGS);
    const open2 = await call(gw, 'bill_invoice_open', { ...ARGS, note: 'ignored' });
    expect(open1.env.ok).toBe(true);
    expect(open2.env.ok).toBe(true);
    expect(open2.env.operation_id).not.toBe(open1.env.operation_id);
    // The strict tool refuses the extra field instead of letting it slip past the guard.
    const extra = await call(gw, 'bill_invoice_is_error', { ...ARGS, note: 'ignored' });
    expect(extra.env).toMatchObject({ category: 'invalid_input', data: { field: 'note' } });
    expect(lines(s.calls).filter((c) => c['tool'] === 'invoice_is_error')).toHaveLength(1);
  });
});
