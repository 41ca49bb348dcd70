// The engine over a scripted in-memory transport (no sockets): every outcome category of
// DESIGN.md §1, each asserted on the envelope, on what the transport was handed and on the ledger.
// The transport port (core/transport.ts) is the only way bytes leave, so a script stands in for
// undici or ssh2 exactly: evidence in, the engine's claim and records out.
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { Evidence } from '../core/evidence.js';
import type { McpToolReply, Reply } from '../core/transport.js';
import {
  scriptedHttpTransport,
  scriptedMcpTransport,
  scriptedSshTransport,
  type ScriptStep,
} from '../fakes/scripted-transport.js';
import type { StoredEvent } from '../ledger/events.js';
import { openMemoryLedger } from '../ledger/memory/store.js';
import {
  defineAction,
  type ActionDefinition,
  type EngineAction,
  type HttpDestination,
  type McpDestination,
} from './action.js';
import { UsageError } from './context.js';
import { staticCredentials, type Gate, type GateDecision } from './ports.js';
import { createEngine, type Runtime } from './runtime.js';
import { defineSshAction } from './ssh-action.js';

const SECRET = 'tok-scripted-5d1e0c';

/** One exchange the script answers (what the real transport would report). */
interface Step {
  evidence: Evidence;
  reply?: Reply;
  data?: unknown;
}

/** Phases pinned, so that what the ledger records of them can be asserted exactly. */
const pinned = <F>(step: Step): ScriptStep<F> => ({
  phases: { started_at: 1, finished_at: 2 },
  ...step,
});

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Step => {
  const bytes = Buffer.from(JSON.stringify(body));
  return {
    evidence: { phase: 'response_complete', status },
    reply: {
      status,
      headers: { 'content-type': 'application/json', ...headers },
      body: bytes,
      framing: 'length',
    },
  };
};

const deployment = z.object({ id: z.string(), service: z.string() });

const createDeployment = defineAction({
  name: 'create_deployment',
  class: 'create',
  subject: 'the deployment',
  input: z.object({ service: z.string() }),
  request: (input, ctx) => {
    if (input.service.includes('/'))
      throw new UsageError('invalid_input', 'service: must not contain "/"');
    return {
      method: 'POST',
      path: '/v1/deployments',
      body: { ...input, client_ref: ctx.correlation_id },
    };
  },
  response: deployment,
  remoteRef: (d) => d.id,
  destination: {
    origin: 'http://deploy.test',
    authority_ref: 'vault:deploy',
    failure_body: z.object({ error: z.literal('not_applied') }),
    reconciliation: {
      lookup: (ctx) => ({
        method: 'GET',
        path: `/v1/deployments?client_ref=${encodeURIComponent(ctx.correlation_id)}`,
      }),
      matches: (body) =>
        (body as { items: Array<{ id: string }> }).items.map((r) => ({ ref: r.id, record: r })),
    },
  },
  attempt_budget: 1,
});

/**
 * A proxied MCP write (`fs/write_file`) whose lookup reads the file back through the mapped
 * `read_text_file` tool: one effect when the text read equals the content written.
 */
function mcpWrite() {
  const destination: McpDestination = {
    kind: 'mcp',
    upstream: 'fs',
    tool: 'write_file',
    authority_ref: 'mcp:fs',
    deadline_ms: 1000,
    reconciliation: {
      tool: 'read_text_file',
      arguments: (input) => ({ path: (input as { path: string }).path }),
      matches: (r, input) => {
        const first = r.content[0] as { text?: string } | undefined;
        return first?.text === (input as { content: string }).content
          ? [{ ref: 'file', record: first.text }]
          : [];
      },
    },
  };
  return defineAction<{ path: string; content: string }, unknown, McpDestination>({
    name: 'fs_write_file',
    class: 'create',
    subject: 'the file',
    input: z.object({ path: z.string(), content: z.string() }),
    request: (input) => ({ arguments: input }),
    response: z.any(),
    destination,
  });
}

function gateAnswering(decision: GateDecision): Gate & { asked: number } {
  const gate = {
    asked: 0,
    check() {
      gate.asked++;
      return Promise.resolve(decision);
    },
  };
  return gate;
}

function engine(steps: Step[], gate?: Gate) {
  const ledger = openMemoryLedger();
  const http = scriptedHttpTransport(steps.map((s) => pinned(s)));
  const runtime: Runtime = createEngine({
    ledger,
    credentials: staticCredentials({ 'vault:deploy': { authorization: `Bearer ${SECRET}` } }),
    sleep: () => Promise.resolve(),
    transports: { http: http.transport },
    ...(gate ? { gate } : {}),
  });
  const events = async (operationId: string): Promise<StoredEvent[]> =>
    ledger.query({ operation_id: operationId });
  const kinds = async (operationId: string) => (await events(operationId)).map((e) => e.kind);
  return { ledger, runtime, http, events, kinds };
}

function finished(events: StoredEvent[]) {
  return events.filter((e) => e.kind === 'attempt_finished').map((e) => e.data);
}

function resolution(events: StoredEvent[]) {
  const r = events.find((e) => e.kind === 'operation_resolved');
  return r?.kind === 'operation_resolved' ? r.data : null;
}

async function runOnce(steps: Step[], gate?: Gate, budget = 1) {
  const e = engine(steps, gate);
  const action = budget === 1 ? createDeployment : { ...createDeployment, attempt_budget: budget };
  const env = await e.runtime.run(action, { service: 'api' });
  const evs = env.operation_id ? await e.events(env.operation_id) : [];
  return { ...e, env, evs };
}

describe('the engine over a scripted transport (no sockets)', () => {
  it('succeeded: the checked data, the credential sent (never recorded), resolved by the attempt', async () => {
    const { env, evs, http } = await runOnce([json(201, { id: 'dep-1', service: 'api' })]);
    expect(env).toMatchObject({
      ok: true,
      category: 'succeeded',
      retry: 'never',
      remote_effect: 'applied',
      data: { id: 'dep-1', service: 'api' },
    });
    expect(http.sent).toHaveLength(1);
    expect(http.sent[0]).toMatchObject({
      kind: 'http',
      origin: 'http://deploy.test',
      method: 'POST',
      path: '/v1/deployments',
      reuse_connection: false,
      headers: { authorization: `Bearer ${SECRET}`, 'x-correlation-id': env.correlation_id },
    });
    expect(JSON.parse(http.sent[0]!.body!)).toEqual({
      service: 'api',
      client_ref: env.correlation_id,
    });
    expect(evs.map((e) => e.kind)).toEqual([
      'operation_opened',
      'attempt_started',
      'attempt_finished',
      'operation_resolved',
    ]);
    const started = evs[1]!;
    expect(started.kind === 'attempt_started' && started.data.attempt_id).toBe(http.sent[0]!.id);
    expect(finished(evs)[0]).toMatchObject({
      category: 'succeeded',
      dispatch_state: 'response_received',
      response: { status: 201, remote_ref: 'dep-1', replay: false },
      phases: { started_at: 1, finished_at: 2 },
    });
    expect(resolution(evs)).toEqual({
      state: 'succeeded',
      category: 'succeeded',
      by: 'attempt',
      remote_refs: ['dep-1'],
      writer: expect.any(String),
    });
    expect(JSON.stringify(evs)).not.toContain(SECRET);
  });

  const failures: Array<{
    name: string;
    step: Step;
    envelope: Record<string, unknown>;
    dispatch_state: string;
    state: string | null;
    /** Attempts the action may make (1 unless the case needs room for a later call). */
    budget?: number;
  }> = [
    {
      name: 'local_failure: nothing left this process',
      step: { evidence: { phase: 'not_sent', local_error: 'connect_refused' } },
      envelope: { category: 'local_failure', retry: 'allowed', remote_effect: 'none' },
      dispatch_state: 'not_sent',
      state: 'failed',
    },
    {
      name: 'authentication_failed: 401 with WWW-Authenticate',
      step: {
        ...json(401, { error: 'who' }, { 'www-authenticate': 'Bearer' }),
        evidence: { phase: 'response_complete', status: 401, www_authenticate: true },
      },
      envelope: { category: 'authentication_failed', retry: 'never', remote_effect: 'none' },
      dispatch_state: 'response_received',
      state: 'failed',
    },
    {
      name: 'authorization_denied: 403',
      step: json(403, { error: 'no' }),
      envelope: { category: 'authorization_denied', retry: 'never', remote_effect: 'none' },
      dispatch_state: 'response_received',
      state: 'failed',
    },
    {
      name: 'rate_limited: 429 with Retry-After, never waited out by the engine',
      step: {
        ...json(429, { error: 'slow' }, { 'retry-after': '3' }),
        evidence: { phase: 'response_complete', status: 429, retry_after_ms: 3000 },
      },
      envelope: {
        category: 'rate_limited',
        retry: 'after_delay',
        remote_effect: 'none',
        retry_after_ms: 3000,
      },
      dispatch_state: 'response_received',
      state: 'failed',
      // The caller may try again after the delay, so the budget must leave room for it.
      budget: 3,
    },
    {
      name: 'confirmed_rejection: 422',
      step: json(422, { error: 'bad service' }),
      envelope: { category: 'confirmed_rejection', retry: 'never', remote_effect: 'none' },
      dispatch_state: 'response_received',
      state: 'failed',
    },
    {
      name: 'confirmed_failure: the documented "not applied" body',
      step: json(500, { error: 'not_applied' }),
      envelope: { category: 'confirmed_failure', remote_effect: 'none' },
      dispatch_state: 'response_received',
      state: 'failed',
    },
    {
      name: 'malformed_response: a success status with a body that breaks the contract',
      step: json(201, { service: 'api' }),
      envelope: { category: 'malformed_response', retry: 'reconcile_first' },
      dispatch_state: 'response_received',
      state: null,
    },
    {
      name: 'outcome_unknown: bytes left, the connection was reset',
      step: { evidence: { phase: 'request_sent', local_error: 'connection_reset' } },
      envelope: { category: 'outcome_unknown', retry: 'reconcile_first', remote_effect: 'unknown' },
      dispatch_state: 'sent_no_response',
      state: null,
    },
  ];

  for (const f of failures) {
    it(f.name, async () => {
      const { env, evs, http } = await runOnce([f.step], undefined, f.budget);
      expect(env).toMatchObject({ ok: false, operation: 'create_deployment', ...f.envelope });
      expect(env.diagnostics_ref).toMatch(/^diag_/);
      expect(http.sent).toHaveLength(1);
      const [fin] = finished(evs);
      expect(fin).toMatchObject({
        category: f.envelope.category,
        dispatch_state: f.dispatch_state,
        diagnostics_ref: env.diagnostics_ref,
      });
      // The transport's own diagnostics are kept (protected), next to the evidence.
      expect(fin!.diagnostics).toMatchObject({
        scripted: 1,
        evidence: { phase: f.step.evidence.phase },
      });
      if (f.state === null) expect(resolution(evs)).toBeNull();
      else expect(resolution(evs)).toMatchObject({ state: f.state, by: 'attempt' });
    });
  }

  it('malformed_response names the failing field in diagnostics only, never in the envelope', async () => {
    const { env, evs } = await runOnce([json(201, { service: 'api' })]);
    expect(finished(evs)[0]!.diagnostics).toMatchObject({
      evidence: { contract_check: 'violated' },
      problem: expect.stringContaining('id'),
    });
    expect(JSON.stringify(env)).not.toContain('problem');
  });

  const refusals: Array<{ decision: GateDecision; category: string; retry: string }> = [
    { decision: { decision: 'denied' }, category: 'approval_denied', retry: 'never' },
    {
      decision: { decision: 'pending', approval_id: 'apr_1' },
      category: 'approval_pending',
      retry: 'after_approval',
    },
    { decision: { decision: 'gate_locked' }, category: 'gate_locked', retry: 'never' },
  ];
  for (const r of refusals) {
    it(`${r.category}: the gate answers before any attempt, nothing is dispatched`, async () => {
      const gate = gateAnswering(r.decision);
      const { env, evs, http } = await runOnce([], gate);
      expect(env).toMatchObject({
        ok: false,
        category: r.category,
        retry: r.retry,
        remote_effect: 'none',
        ...(r.category === 'approval_pending' ? { data: { approval_id: 'apr_1' } } : {}),
      });
      expect(gate.asked).toBe(1);
      expect(http.sent).toEqual([]);
      expect(evs.filter((e) => e.kind === 'attempt_started')).toEqual([]);
      if (r.category === 'approval_pending') {
        // Still open: the same operation_id continues it once a person decides.
        expect(resolution(evs)).toBeNull();
      } else {
        expect(resolution(evs)).toMatchObject({ state: 'cancelled', category: r.category });
      }
    });
  }

  it('duplicate_effect: an unknown outcome, then a lookup through the same port finds two records', async () => {
    const { runtime, http, events } = engine([
      { evidence: { phase: 'request_sent', local_error: 'deadline' } },
      // Both records carry the operation's correlation value: both are its effect.
      json(200, {
        items: [
          { id: 'dep-1', client_ref: 'cor-dup' },
          { id: 'dep-2', client_ref: 'cor-dup' },
        ],
      }),
    ]);
    const first = await runtime.run(
      createDeployment,
      { service: 'api' },
      { correlationId: 'cor-dup' },
    );
    expect(first).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    const env = await runtime.reconcile(first.operation_id!);
    expect(env).toMatchObject({
      ok: false,
      category: 'duplicate_effect',
      retry: 'escalate',
      remote_effect: 'applied',
      data: { remote_refs: ['dep-1', 'dep-2'] },
    });
    expect(http.sent).toHaveLength(2);
    expect(http.sent[1]).toMatchObject({
      kind: 'http',
      method: 'GET',
      path: `/v1/deployments?client_ref=${encodeURIComponent(first.correlation_id!)}`,
      reuse_connection: true,
      headers: {
        authorization: `Bearer ${SECRET}`,
        'x-correlation-id': `${first.correlation_id}.lookup`,
      },
    });
    expect(http.sent[1]!.id).toMatch(/^obs_/);
    const evs = await events(first.operation_id!);
    expect(evs.map((e) => e.kind)).toEqual([
      'operation_opened',
      'attempt_started',
      'attempt_finished',
      'observation_recorded',
      'operation_resolved',
    ]);
    expect(resolution(evs)).toEqual({
      state: 'duplicate_effect_confirmed',
      category: 'duplicate_effect',
      by: 'reconciliation',
      remote_refs: ['dep-1', 'dep-2'],
      writer: expect.any(String),
    });
  });

  it('invalid_input: refused before anything is recorded or dispatched', async () => {
    const { runtime, http, ledger } = engine([]);
    const env = await runtime.run(createDeployment, { service: 'a/b' });
    expect(env).toMatchObject({
      ok: false,
      category: 'invalid_input',
      retry: 'never',
      remote_effect: 'none',
      operation_id: null,
    });
    // Input that breaks the schema is misuse: a UsageError naming the field.
    await expect(
      runtime.run(createDeployment as ActionDefinition<unknown, unknown>, { service: 7 }),
    ).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringContaining('service') });
    expect(http.sent).toEqual([]);
    // Nothing recorded: no operation was opened (a session record is not an operation).
    expect((await ledger.read()).filter((e) => e.operation_id !== null)).toEqual([]);
  });

  it('an SSH destination goes to the ssh transport, with the host, command and check it declares', async () => {
    const ledger = openMemoryLedger();
    const http = scriptedHttpTransport([]);
    const ssh = scriptedSshTransport([
      pinned({
        evidence: { phase: 'response_complete', exit_status: 0 },
        data: { exit_status: 0, stdout: 'ok' },
      }),
    ]);
    const runtime = createEngine({
      ledger,
      credentials: staticCredentials({}),
      transports: { http: http.transport, ssh: ssh.transport },
    });
    const restart = defineSshAction({
      name: 'enable_service',
      class: 'set_state',
      subject: 'the service',
      input: z.object({ unit: z.string() }),
      host_ref: 'web-1',
      command: (i) => `systemctl enable --now ${i.unit}`,
      check: (i) => `systemctl is-enabled ${i.unit}`,
    });
    const env = await runtime.run(restart, { unit: 'nginx' });
    expect(env).toMatchObject({
      ok: true,
      category: 'succeeded',
      data: { exit_status: 0, stdout: 'ok' },
    });
    expect(http.sent).toEqual([]);
    expect(ssh.sent).toEqual([
      expect.objectContaining({
        kind: 'ssh',
        op: 'run',
        host_ref: 'web-1',
        command: 'systemctl enable --now nginx',
        check: 'systemctl is-enabled nginx',
        family: 'set_state',
        operation_id: env.operation_id,
      }),
    ]);
    const evs = await ledger.query({ operation_id: env.operation_id! });
    const opened = evs[0]!;
    expect(opened.kind === 'operation_opened' && opened.data.destination).toEqual({
      method: 'SSH',
      route_template: 'web-1:enable_service',
      authority_ref: 'ssh:web-1',
    });
    expect(resolution(evs)).toMatchObject({ state: 'succeeded', by: 'attempt' });
  });

  it('a proxied MCP tool reconciles through the same algorithm: a failed lookup is an observation that learned nothing, a later one that finds the effect settles it', async () => {
    const ledger = openMemoryLedger();
    const reply = (text: string, isError = false): McpToolReply => ({
      content: [{ type: 'text', text }],
      isError,
    });
    const mcp = scriptedMcpTransport([
      // The write reached the upstream and the answer was lost.
      pinned({ evidence: { phase: 'request_sent', local_error: 'deadline' } }),
      // The first lookup gets no answer; the second reads the file back.
      {
        looked: {
          verdict: 'failed',
          evidence: { phase: 'request_sent', local_error: 'deadline' },
          phases: { started_at: 1, finished_at: 2 },
        },
      },
      {
        looked: {
          verdict: 'found',
          found: reply('hello'),
          evidence: { phase: 'response_complete' },
          phases: { started_at: 1, finished_at: 2 },
        },
      },
    ]);
    const runtime = createEngine({
      ledger,
      credentials: staticCredentials({}),
      transports: { mcp: mcp.transport },
    });
    const write = mcpWrite();
    const first = await runtime.run(write, { path: '/srv/a.txt', content: 'hello' });
    expect(first).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    const id = first.operation_id!;

    const failed = await runtime.reconcile(id);
    expect(failed).toMatchObject({
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      data: { lookup: { verdict: 'failed', request: 'fs read_text_file', status: null } },
    });
    expect(failed.message).toMatch(
      /^The lookup failed \(it got no answer \(request_sent\)\), so it learned nothing about this operation\. /,
    );
    const observed = () =>
      ledger
        .query({ operation_id: id })
        .then((evs) => evs.flatMap((e) => (e.kind === 'observation_recorded' ? [e.data] : [])));
    expect(await observed()).toEqual([
      expect.objectContaining({
        source: 'lookup',
        checked: 'fs read_text_file',
        verdict: 'failed',
        matches: 0,
        state_after: 'unknown',
      }),
    ]);

    const found = await runtime.reconcile(id);
    expect(found).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
    expect((await observed()).map((o) => o.verdict)).toEqual(['failed', 'found']);
    // Exactly one write left; both lookups went to the mapped read tool with the recorded path.
    expect(mcp.sent.map((p) => [p.tool, p.arguments])).toEqual([
      ['write_file', { path: '/srv/a.txt', content: 'hello' }],
      ['read_text_file', { path: '/srv/a.txt' }],
      ['read_text_file', { path: '/srv/a.txt' }],
    ]);
    expect(resolution(await ledger.query({ operation_id: id }))).toMatchObject({
      state: 'succeeded',
      by: 'reconciliation',
    });
  });

  it("a retry that reconciliation licenses runs under the reconcile call's signal: aborted, it ends as cancelled", async () => {
    const keyed = {
      ...createDeployment,
      attempt_budget: 2,
      destination: {
        ...createDeployment.destination,
        idempotency: { header: 'Idempotency-Key', honoured: true, retention_ms: 86_400_000 },
      },
    };
    const { runtime, http, events } = engine([
      { evidence: { phase: 'request_sent', local_error: 'deadline' } },
      json(200, { items: [] }),
      // The retry under the key: the destination never answers; only the signal ends it.
      { hold: true } as unknown as Step,
    ]);
    // A delegated worker makes exactly one attempt: the engine does not retry it on its own.
    const first = await runtime.run(keyed, { service: 'api' }, { worker: 'w-1' });
    expect(first).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    expect(http.sent).toHaveLength(1);
    const controller = new AbortController();
    const pending = runtime.reconcile(first.operation_id!, { signal: controller.signal });
    // Abort once the retry has left (the script has handed out its held step).
    await vi.waitFor(() => expect(http.sent).toHaveLength(3));
    controller.abort();
    const env = await pending;
    expect(env).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    const done = finished(await events(first.operation_id!));
    expect(done).toHaveLength(2);
    expect(done[1]).toMatchObject({ dispatch_state: 'sent_no_response' });
    expect(JSON.stringify(done[1])).toContain('cancelled');
    const retry = (await events(first.operation_id!)).filter(
      (e) => e.kind === 'attempt_started',
    )[1];
    expect(retry?.kind === 'attempt_started' && retry.data.retry_decision).toBe(
      'reconciled_absent_key_valid',
    );
  });
});

// Seams of the attempt loop and the record reconciliation, found by a hostile review of their
// reshaping (each failed before its fix).
describe('seams of the attempt loop and the record reconciliation', () => {
  it('an HTTP destination without `kind` (HTTP is the default) is looked up like any other', async () => {
    // defineAction adds kind 'http'; a hand-built action may leave it out, as the type allows.
    const { kind: _http, ...plain } = createDeployment.destination as HttpDestination;
    expect(_http).toBe('http');
    const kindless: EngineAction<{ service: string }, unknown> = {
      ...createDeployment,
      destination: plain,
    };
    const { runtime, http } = engine([
      { evidence: { phase: 'request_sent', local_error: 'deadline' } },
      json(200, { items: [{ id: 'dep-1', client_ref: 'cor-kind' }] }),
    ]);
    const first = await runtime.run(kindless, { service: 'api' }, { correlationId: 'cor-kind' });
    expect(first).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    const env = await runtime.reconcile(first.operation_id!);
    expect(http.sent.map((p) => p.kind === 'http' && p.method)).toEqual(['POST', 'GET']);
    expect(env).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
  });

  it('an async onRetry listener that rejects changes nothing (no unhandled rejection)', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const http = scriptedHttpTransport([
        pinned({ evidence: { phase: 'not_sent', local_error: 'connect_refused' } }),
        pinned(json(201, { id: 'dep-1', service: 'api' })),
      ]);
      const runtime = createEngine({
        ledger: openMemoryLedger(),
        credentials: staticCredentials({ 'vault:deploy': { authorization: `Bearer ${SECRET}` } }),
        sleep: () => Promise.resolve(),
        // A listener written async, as users will: its rejection must not escape.
        // eslint-disable-next-line @typescript-eslint/require-await, @typescript-eslint/no-misused-promises
        onRetry: async () => {
          throw new Error('listener failed');
        },
        transports: { http: http.transport },
      });
      const env = await runtime.run({ ...createDeployment, attempt_budget: 2 }, { service: 'api' });
      expect(env).toMatchObject({ ok: true, category: 'succeeded' });
      expect(http.sent).toHaveLength(2);
      // An unhandled rejection is reported once the microtasks drain: two turns of the loop.
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('an MCP lookup the adapter refused before sending (a per-caller token) is "not sent", with no observation', async () => {
    const ledger = openMemoryLedger();
    const mcp = scriptedMcpTransport([
      pinned({ evidence: { phase: 'request_sent', local_error: 'deadline' } }),
      {
        looked: {
          verdict: 'failed',
          // What the upstream adapter reports for lookup_needs_caller: refused before any byte.
          evidence: {
            phase: 'not_sent',
            local_error: 'credential_unavailable',
            error_code: 'lookup_needs_caller',
          },
          phases: { started_at: 1, finished_at: 1 },
        },
      },
    ]);
    const runtime = createEngine({
      ledger,
      credentials: staticCredentials({}),
      transports: { mcp: mcp.transport },
    });
    const first = await runtime.run(mcpWrite(), { path: '/srv/a.txt', content: 'hello' });
    const env = await runtime.reconcile(first.operation_id!);
    expect(env).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    expect(env.message).toMatch(
      /^The lookup was not sent \(credential unavailable: lookup_needs_caller\); whether the file was applied is still unknown/,
    );
    const kinds = (await ledger.query({ operation_id: first.operation_id! })).map((e) => e.kind);
    expect(kinds).not.toContain('observation_recorded');
  });
});
