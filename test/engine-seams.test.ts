// Seams of the attempt loop and the record reconciliation (engine/drive.ts,
// engine/reconcile-records.ts), found by a hostile review of their reshaping:
// - an HTTP destination may leave out `kind` (HTTP is the default): it is looked up like any other;
// - an async `onRetry` listener that rejects changes nothing (no unhandled rejection);
// - a proxied MCP lookup the adapter refused before sending (a per-caller token, a locked vault)
//   is "not sent", as an HTTP lookup without its credential is: no observation of a lookup that
//   never happened.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { scriptedHttpTransport, scriptedMcpTransport } from '../src/fakes/scripted-transport.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { defineAction, type EngineAction, type McpDestination } from '../src/engine/action.js';
import { staticCredentials } from '../src/engine/ports.js';
import { createEngine } from '../src/engine/runtime.js';

const json = (status: number, body: unknown) => ({
  phases: { started_at: 1, finished_at: 2 },
  evidence: { phase: 'response_complete' as const, status },
  reply: {
    status,
    headers: { 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify(body)),
    framing: 'length' as const,
  },
});

// A plain action object (no defineAction): its HTTP destination has no `kind`, which the type allows.
const createDeployment: EngineAction<{ service: string }, { id: string }> = {
  name: 'create_deployment',
  class: 'create',
  subject: 'the deployment',
  input: z.object({ service: z.string() }),
  request: (input, ctx) => ({
    method: 'POST',
    path: '/v1/deployments',
    body: { ...input, client_ref: ctx.correlation_id },
  }),
  response: z.object({ id: z.string() }),
  remoteRef: (d) => d.id,
  destination: {
    origin: 'http://deploy.test',
    authority_ref: 'vault:deploy',
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
};

describe('an HTTP destination without an explicit kind', () => {
  it('is still reconciled: the lookup finds the one record bound to the operation', async () => {
    const http = scriptedHttpTransport([
      {
        phases: { started_at: 1, finished_at: 2 },
        evidence: { phase: 'request_sent', local_error: 'deadline' },
      },
      json(200, { items: [{ id: 'dep-1', client_ref: 'cor-kind' }] }),
    ]);
    const runtime = createEngine({
      ledger: openMemoryLedger(),
      credentials: staticCredentials({
        'vault:deploy': { authorization: 'Bearer tok-kind-1234567' },
      }),
      sleep: () => Promise.resolve(),
      transports: { http: http.transport },
    });
    const first = await runtime.run(
      createDeployment,
      { service: 'api' },
      { correlationId: 'cor-kind' },
    );
    // The attempt itself runs over HTTP: a missing kind is HTTP everywhere else.
    expect(first).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    expect(http.sent).toHaveLength(1);
    const env = await runtime.reconcile(first.operation_id!);
    expect(http.sent).toHaveLength(2);
    expect(env.message).not.toContain('has no record lookup');
    expect(env).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
  });
});

const getStatus = defineAction({
  name: 'get_status',
  class: 'read',
  subject: 'the status',
  input: z.object({}),
  request: () => ({ method: 'GET', path: '/v1/status' }),
  response: z.object({ ok: z.boolean() }),
  destination: { origin: 'http://status.test', authority_ref: 'vault:status' },
  attempt_budget: 3,
});

describe('an async onRetry listener that rejects', () => {
  it('changes nothing: no unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const body = Buffer.from(JSON.stringify({ ok: true }));
      const http = scriptedHttpTransport([
        { evidence: { phase: 'not_sent', local_error: 'connect_refused' } },
        {
          evidence: { phase: 'response_complete', status: 200 },
          reply: {
            status: 200,
            headers: { 'content-type': 'application/json' },
            body,
            framing: 'length',
          },
        },
      ]);
      const runtime = createEngine({
        ledger: openMemoryLedger(),
        credentials: staticCredentials({
          'vault:status': { authorization: 'Bearer tok-status-12345' },
        }),
        sleep: () => Promise.resolve(),
        // A listener written async, as users will: its rejection must not escape.
        // eslint-disable-next-line @typescript-eslint/require-await, @typescript-eslint/no-misused-promises
        onRetry: async () => {
          throw new Error('listener failed');
        },
        transports: { http: http.transport },
      });
      const env = await runtime.run(getStatus, {});
      expect(env).toMatchObject({ ok: true, category: 'succeeded' });
      // An unhandled rejection is reported once the microtasks drain: two turns of the loop.
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe('an MCP lookup the adapter refused before sending', () => {
  it('is not recorded as a lookup that got no answer', async () => {
    const ledger = openMemoryLedger();
    const mcp = scriptedMcpTransport([
      {
        phases: { started_at: 1, finished_at: 2 },
        evidence: { phase: 'request_sent', local_error: 'deadline' },
      },
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
    const destination: McpDestination = {
      kind: 'mcp',
      upstream: 'fs',
      tool: 'write_file',
      authority_ref: 'mcp:fs',
      deadline_ms: 1000,
      reconciliation: {
        tool: 'read_text_file',
        arguments: (input) => ({ path: (input as { path: string }).path }),
        matches: () => [],
      },
    };
    const write = defineAction<{ path: string; content: string }, unknown, McpDestination>({
      name: 'fs_write_file',
      class: 'create',
      subject: 'the file',
      input: z.object({ path: z.string(), content: z.string() }),
      request: (input) => ({ arguments: input }),
      response: z.any(),
      destination,
    });
    const first = await runtime.run(write, { path: '/srv/a.txt', content: 'hello' });
    const env = await runtime.reconcile(first.operation_id!);
    expect(env).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    expect(env.message).toMatch(
      /^The lookup was not sent \(credential unavailable: lookup_needs_caller\); whether the file was applied is still unknown/,
    );
    const observed = (await ledger.query({ operation_id: first.operation_id! })).filter(
      (e) => e.kind === 'observation_recorded',
    );
    expect(observed).toEqual([]);
  });
});
