// OpenTelemetry over real sockets: the engine runs reference actions against the fault-injecting
// fake with the SDK's in-memory exporter, and with the OTLP/HTTP exporter against a local receiver.
// Checked: the span tree (one execute_tool span per call, one child per attempt), the attributes,
// the traceparent the fake received on the wire, and that the canary credential is in no span.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import * as api from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticCredentials } from '../src/engine/ports.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';
import { createRuntime } from '../src/runtime.js';
import { openTelemetry } from '../src/telemetry/otel.js';
import { startOtlpTelemetry } from '../src/telemetry/otlp.js';
import type { Telemetry } from '../src/telemetry/port.js';
import { TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';
import { connectStdio, tempDir, writeConfig } from './fixtures/mcp/stdio.js';

const CANARY = 'telemetry-canary-secret-7f3a91';
let fake: FakeService;

beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 'gateway', token: CANARY }] });
});
afterAll(async () => {
  await fake.close();
  // Each runtime owns its connection pools.
  await Promise.all(opened.map((rt) => rt.close()));
});
const opened: Array<{ close(): Promise<void> }> = [];

function runtime(telemetry: Telemetry) {
  const actions = referenceActions(fake.url);
  const rt = createRuntime({
    ledger: openMemoryLedger(),
    credentials: staticCredentials({
      [REFERENCE_AUTHORITY]: { authorization: `Bearer ${CANARY}` },
    }),
    actions,
    telemetry,
    sleep: () => Promise.resolve(),
  });
  opened.push(rt);
  const action = (name: string) => actions.find((a) => a.name === name)!;
  return { rt, action };
}

function inMemory() {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spans)],
  });
  const metricsOut = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({
    exporter: metricsOut,
    exportIntervalMillis: 3_600_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const telemetry = openTelemetry(api, { tracerProvider, meterProvider });
  const counter = async (
    name: string,
  ): Promise<Array<{ attrs: api.Attributes; value: number }>> => {
    await reader.forceFlush();
    const found = metricsOut
      .getMetrics()
      .at(-1)
      ?.scopeMetrics.flatMap((s) => s.metrics)
      .find((m) => m.descriptor.name === name);
    return (found?.dataPoints ?? []).map((p) => ({
      attrs: p.attributes,
      value: p.value as number,
    }));
  };
  return { spans, telemetry, counter };
}

/** A local OTLP/HTTP receiver: the JSON bodies it was sent, by path. */
async function otlpReceiver(): Promise<{
  url: string;
  bodies: (path: '/v1/traces' | '/v1/metrics') => string;
  close: () => Promise<void>;
}> {
  const got: Array<{ path: string; body: string }> = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString('utf8')));
    req.on('end', () => {
      got.push({ path: req.url ?? '', body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bodies: (path) =>
      got
        .filter((g) => g.path === path)
        .map((g) => g.body)
        .join('\n'),
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** Data points of a counter in OTLP/JSON metrics bodies: [attributes as an object, value]. */
function otlpCounter(bodies: string, name: string): Array<[Record<string, unknown>, number]> {
  const points: Array<[Record<string, unknown>, number]> = [];
  for (const line of bodies.split('\n').filter(Boolean)) {
    const doc = JSON.parse(line) as {
      resourceMetrics: Array<{
        scopeMetrics: Array<{
          metrics: Array<{
            name: string;
            sum?: {
              dataPoints: Array<{
                asInt?: number | string;
                asDouble?: number;
                attributes: Array<{ key: string; value: Record<string, unknown> }>;
              }>;
            };
          }>;
        }>;
      }>;
    };
    for (const m of doc.resourceMetrics.flatMap((r) => r.scopeMetrics).flatMap((s) => s.metrics)) {
      if (m.name !== name) continue;
      for (const p of m.sum?.dataPoints ?? []) {
        const attrs = Object.fromEntries(
          p.attributes.map((a) => [a.key, Object.values(a.value)[0]]),
        );
        points.push([attrs, Number(p.asInt ?? p.asDouble)]);
      }
    }
  }
  return points;
}

const parentOf = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;
const traceparentOf = (s: ReadableSpan): string =>
  `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`;

describe('OpenTelemetry: spans that tell attempt 1 from attempt 2', () => {
  it('rate limited, then called again: attempt 1 and attempt 2 under their calls, each traceparent on the wire', async () => {
    const { spans, telemetry, counter } = inMemory();
    const { rt, action } = runtime(telemetry);
    fake.arm({ call_id: 'tel-429', phase: 'status', status: 429, retry_after: 0 });
    const input = { service: 'web', version: '1.2.3' };
    const first = await rt.run(action('create_deployment'), input, { correlationId: 'tel-429' });
    expect(first).toMatchObject({ category: 'rate_limited', retry: 'after_delay' });
    const stateAfterFirst = (await rt.status(first.operation_id!))!.view.state;
    const env = await rt.run(action('create_deployment'), input, {
      operationId: first.operation_id!,
    });
    expect(env).toMatchObject({ ok: true, category: 'succeeded' });

    const all = spans.getFinishedSpans();
    const calls = all.filter((s) => s.name === 'execute_tool create_deployment');
    expect(calls).toHaveLength(2);
    for (const call of calls)
      expect(call.attributes).toMatchObject({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'create_deployment',
        'gen_ai.tool.call.id': 'tel-429',
        'candor.operation.id': env.operation_id,
      });
    expect(calls[0]!.attributes).toMatchObject({
      'candor.category': 'rate_limited',
      'error.type': 'rate_limited',
    });
    expect(calls[1]!.attributes).toMatchObject({
      'candor.category': 'succeeded',
      'candor.remote_effect': 'applied',
      'candor.operation.state': 'succeeded',
    });
    const attempts = calls.map((call) => {
      const children = all.filter((s) => parentOf(s) === call.spanContext().spanId);
      expect(children).toHaveLength(1);
      expect(children[0]!.spanContext().traceId).toBe(call.spanContext().traceId);
      return children[0]!;
    });
    expect(all).toHaveLength(4);
    expect(attempts[0]!.attributes).toMatchObject({
      'candor.operation.id': env.operation_id,
      'candor.attempt.number': 1,
      'candor.dispatch_state': 'response_received',
      'candor.category': 'rate_limited',
      'candor.retry': 'after_delay',
      'candor.remote_effect': 'none',
    });
    expect(attempts[0]!.attributes['candor.retry.reason']).toBeUndefined();
    expect(attempts[1]!.attributes).toMatchObject({
      'candor.operation.id': env.operation_id,
      'candor.attempt.number': 2,
      'candor.dispatch_state': 'response_received',
      'candor.category': 'succeeded',
      'candor.retry': 'never',
      'candor.remote_effect': 'applied',
      'candor.retry.reason': 'rate_limited',
    });
    // What the fake received: each attempt's own span as the parent of the server's work.
    const sent = fake
      .groundTruth('tel-429')
      .filter((t) => t.event === 'headers_complete')
      .map((t) => t.traceparent);
    expect(sent).toEqual(attempts.map(traceparentOf));

    expect(await counter('candor.operation.calls')).toEqual([
      {
        attrs: {
          'gen_ai.tool.name': 'create_deployment',
          'candor.operation.state': stateAfterFirst,
        },
        value: 1,
      },
      {
        attrs: { 'gen_ai.tool.name': 'create_deployment', 'candor.operation.state': 'succeeded' },
        value: 1,
      },
    ]);
    expect(JSON.stringify(all.map(dump))).not.toContain(CANARY);
  });

  it('an unknown outcome and its reconciliation: the lookup is a span event, unknown outcomes are counted', async () => {
    const { spans, telemetry, counter } = inMemory();
    const { rt, action } = runtime(telemetry);
    fake.arm({ call_id: 'tel-rst', phase: 'after_commit', action: 'rst' });
    const env = await rt.run(
      action('create_deployment'),
      { service: 'api', version: '2.0.0' },
      { correlationId: 'tel-rst' },
    );
    expect(env).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
    const settled = await rt.reconcile(env.operation_id!);
    expect(settled).toMatchObject({ ok: true, category: 'succeeded' });

    const all = spans.getFinishedSpans();
    const calls = all.filter((s) => s.name === 'execute_tool create_deployment');
    expect(calls).toHaveLength(2);
    const [first, second] = calls;
    const attempt = all.find((s) => parentOf(s) === first!.spanContext().spanId)!;
    expect(attempt.attributes).toMatchObject({
      'candor.attempt.number': 1,
      'candor.dispatch_state': 'sent_no_response',
      'candor.category': 'outcome_unknown',
      'candor.remote_effect': 'unknown',
    });
    // The reconciliation sends no attempt: its call span has an observation event, no children.
    expect(all.filter((s) => parentOf(s) === second!.spanContext().spanId)).toEqual([]);
    expect(second!.attributes['candor.operation.id']).toBe(env.operation_id);
    expect(
      second!.events.map((e) => [e.name, e.attributes?.['candor.observation.source']]),
    ).toEqual([
      ['candor.observation', 'lookup'],
      ['candor.operation.resolved', undefined],
    ]);
    expect(await counter('candor.outcome.unknown')).toEqual([
      { attrs: { 'gen_ai.tool.name': 'create_deployment' }, value: 1 },
    ]);
    expect(JSON.stringify(all.map(dump))).not.toContain(CANARY);
  });

  it('OTLP/HTTP: the spans and the counters reach a local receiver, with no canary in what was exported', async () => {
    const receiver = await otlpReceiver();
    try {
      const otlp = await startOtlpTelemetry(receiver.url, { metricsIntervalMs: 3_600_000 });
      const { rt, action } = runtime(otlp.telemetry);
      const env = await rt.run(
        action('create_deployment'),
        { service: 'otlp', version: '3.0.0' },
        { correlationId: 'tel-otlp' },
      );
      expect(env.ok).toBe(true);
      fake.arm({ call_id: 'tel-otlp-rst', phase: 'after_commit', action: 'rst' });
      const lost = await rt.run(
        action('create_deployment'),
        { service: 'otlp', version: '3.0.1' },
        { correlationId: 'tel-otlp-rst' },
      );
      expect(lost).toMatchObject({ category: 'outcome_unknown' });
      // The metrics interval is an hour: what arrives was exported by shutdown.
      expect(receiver.bodies('/v1/metrics')).toBe('');
      await otlp.shutdown();
      const exported = receiver.bodies('/v1/traces');
      const names = [...exported.matchAll(/"name":"([^"]+)"/g)].map((m) => m[1]);
      expect(names).toEqual(
        expect.arrayContaining(['execute_tool create_deployment', 'attempt 1 create_deployment']),
      );
      expect(exported).toContain('"gen_ai.tool.call.id"');
      expect(exported).toContain(env.operation_id!);
      const tp = fake
        .groundTruth('tel-otlp')
        .find((t) => t.event === 'headers_complete')?.traceparent;
      expect(tp).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(exported).toContain(tp!.split('-')[1]!); // the trace id the fake saw was exported
      const metrics = receiver.bodies('/v1/metrics');
      const calls = otlpCounter(metrics, 'candor.operation.calls');
      expect(calls).toHaveLength(2);
      expect(calls).toEqual(
        expect.arrayContaining([
          [{ 'gen_ai.tool.name': 'create_deployment', 'candor.operation.state': 'succeeded' }, 1],
          [{ 'gen_ai.tool.name': 'create_deployment', 'candor.operation.state': 'unknown' }, 1],
        ]),
      );
      expect(otlpCounter(metrics, 'candor.outcome.unknown')).toEqual([
        [{ 'gen_ai.tool.name': 'create_deployment' }, 1],
      ]);
      expect(exported + metrics).not.toContain(CANARY);
    } finally {
      await receiver.close();
    }
  });
});

describe('telemetry through `candor serve` (telemetry: in candor.yaml, a real MCP client over stdio)', () => {
  it('a tool call is traced and counted at the configured collector; the fake saw the traceparent', async () => {
    const receiver = await otlpReceiver();
    const dir = tempDir('candor-tel-serve-');
    const yaml =
      testConfigYaml({ origin: fake.url }) +
      `telemetry:\n  otlp: ${receiver.url}\n  metrics_interval_ms: 3600000\n`;
    const config = writeConfig(dir, yaml);
    const gw = await connectStdio(
      ['--config', config, '--ledger', `sqlite:${join(dir, 'ledger.db')}`],
      { [TEST_TOKEN_VAR]: CANARY }, // the fake accepts the canary credential
      dir,
    );
    try {
      const before = fake.groundTruth().length;
      const r = await gw.client.callTool({
        name: 'create_record',
        arguments: { title: 'traced through serve' },
      });
      const env = r.structuredContent as { ok: boolean; operation_id: string };
      expect(env.ok).toBe(true);
      // Closing stdin ends the gateway, which flushes its spans and a last metrics export.
      await gw.close();
      const deadline = Date.now() + 10_000;
      while (receiver.bodies('/v1/metrics') === '' && Date.now() < deadline)
        await new Promise((res) => setTimeout(res, 50));
      const traces = receiver.bodies('/v1/traces');
      expect(traces).toContain('execute_tool create_record');
      expect(traces).toContain('attempt 1 create_record');
      expect(traces).toContain(env.operation_id);
      const tp = fake
        .groundTruth()
        .slice(before)
        .find((t) => t.event === 'headers_complete')?.traceparent;
      expect(tp).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(traces).toContain(tp!.split('-')[1]!);
      expect(otlpCounter(receiver.bodies('/v1/metrics'), 'candor.operation.calls')).toEqual([
        [{ 'gen_ai.tool.name': 'create_record', 'candor.operation.state': 'succeeded' }, 1],
      ]);
      expect(traces + receiver.bodies('/v1/metrics')).not.toContain(CANARY);
    } finally {
      await gw.close().catch(() => undefined);
      await receiver.close();
    }
  });
});

describe('span links: a call that settles an operation links to the call that started it', () => {
  /** Gateways on one ledger (a restart, or a fleet), each with its owner id. */
  function gateways(telemetry: Telemetry, owners: string[], lease = false) {
    const ledger = openMemoryLedger();
    const actions = referenceActions(fake.url);
    const rts = owners.map((owner) => {
      const rt = createRuntime({
        ledger,
        owner,
        credentials: staticCredentials({
          [REFERENCE_AUTHORITY]: { authorization: `Bearer ${CANARY}` },
        }),
        actions,
        telemetry,
        sleep: () => Promise.resolve(),
        ...(lease ? { lease: { ttl_ms: 60_000 } } : {}),
      });
      opened.push(rt);
      return rt;
    });
    const action = (name: string) => actions.find((a) => a.name === name)!;
    return { ledger, rts, action };
  }

  /** Leaves an operation unknown (RST after commit) and answers the call's span and its id. */
  async function unknownOperation(
    rt: ReturnType<typeof createRuntime>,
    action: ReturnType<ReturnType<typeof gateways>['action']>,
    spans: InMemorySpanExporter,
    id: string,
  ) {
    fake.arm({ call_id: id, phase: 'after_commit', action: 'rst' });
    const env = await rt.run(action, { service: id, version: '1.0.0' }, { correlationId: id });
    expect(env).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    const original = spans
      .getFinishedSpans()
      .find(
        (s) =>
          s.attributes['candor.operation.id'] === env.operation_id &&
          s.name.startsWith('execute_tool'),
      )!;
    expect(original.name).toBe('execute_tool create_deployment');
    return { operationId: env.operation_id!, original };
  }

  /** The spans after the original that speak of the operation, with the links they carry. */
  function settling(spans: InMemorySpanExporter, original: ReadableSpan, operationId: string) {
    return spans
      .getFinishedSpans()
      .filter((s) => s !== original && s.attributes['candor.operation.id'] === operationId)
      .filter((s) => s.name.startsWith('execute_tool'));
  }

  function expectLinkedTo(span: ReadableSpan, original: ReadableSpan, operationId: string) {
    // A new trace of its own, linked (not parented) to the original call.
    expect(span.spanContext().traceId).not.toBe(original.spanContext().traceId);
    expect(span.parentSpanContext).toBeUndefined();
    expect(span.links.map((l) => [l.context.traceId, l.context.spanId, l.attributes])).toEqual([
      [
        original.spanContext().traceId,
        original.spanContext().spanId,
        { 'candor.operation.id': operationId },
      ],
    ]);
  }

  it('reconcile_operation: the ledger holds the original traceparent, the reconcile span links to it', async () => {
    const { spans, telemetry } = inMemory();
    const { ledger, rts, action } = gateways(telemetry, ['gw-links-1']);
    const { operationId, original } = await unknownOperation(
      rts[0]!,
      action('create_deployment'),
      spans,
      'tel-link-reconcile',
    );
    const events = (await ledger.read(0)).filter((e) => e.operation_id === operationId);
    const recorded = events
      .filter((e) => e.kind === 'operation_opened' || e.kind === 'attempt_started')
      .map((e) => (e.data as { traceparent?: string }).traceparent);
    expect(recorded).toEqual([traceparentOf(original), traceparentOf(original)]);

    const settled = await rts[0]!.reconcile(operationId);
    expect(settled).toMatchObject({ category: 'succeeded' });
    const [reconcile] = settling(spans, original, operationId);
    expect(reconcile!.events.map((e) => e.name)).toContain('candor.observation');
    expectLinkedTo(reconcile!, original, operationId);
  });

  it('candor recover after a restart: the recovery span links to the call that left it unknown', async () => {
    const { spans, telemetry } = inMemory();
    const { rts, action } = gateways(telemetry, ['gw-links-2', 'gw-links-2']);
    const { operationId, original } = await unknownOperation(
      rts[0]!,
      action('create_deployment'),
      spans,
      'tel-link-recover',
    );
    const items = await rts[1]!.recover();
    expect(items.map((i) => [i.operation_id, i.outcome])).toEqual([
      [operationId, 'found_by_lookup'],
    ]);
    const [recovery] = settling(spans, original, operationId);
    expect(recovery!.events.map((e) => e.name)).toContain('candor.observation');
    expectLinkedTo(recovery!, original, operationId);
  });

  it("a fleet sweep: the taking-over gateway's span links to the other gateway's call", async () => {
    const { spans, telemetry } = inMemory();
    const { rts, action } = gateways(telemetry, ['gw-links-a', 'gw-links-b'], true);
    const { operationId, original } = await unknownOperation(
      rts[0]!,
      action('create_deployment'),
      spans,
      'tel-link-sweep',
    );
    // Gateway a goes away: its lease ends, so b's sweep may take its operation over.
    await rts[0]!.endSession('stopped');
    const items = await rts[1]!.recover({ sweep: true });
    expect(items.map((i) => i.operation_id)).toEqual([operationId]);
    const [sweep] = settling(spans, original, operationId);
    expect(sweep!.events.map((e) => e.name)).toContain('candor.owner_changed');
    expectLinkedTo(sweep!, original, operationId);
  });

  it('events without a traceparent (telemetry off, or older ledgers) read back and link to nothing', async () => {
    const { ledger, rts, action } = gateways(undefined as unknown as Telemetry, ['gw-links-off']);
    fake.arm({ call_id: 'tel-link-off', phase: 'after_commit', action: 'rst' });
    const env = await rts[0]!.run(
      action('create_deployment'),
      { service: 'off', version: '1.0.0' },
      { correlationId: 'tel-link-off' },
    );
    const events = (await ledger.read(0)).filter((e) => e.operation_id === env.operation_id);
    expect(events.some((e) => 'traceparent' in e.data)).toBe(false);
    // The same ledger under a traced gateway: the reconcile span starts a trace with no links.
    const { spans, telemetry } = inMemory();
    const traced = createRuntime({
      ledger,
      owner: 'gw-links-off',
      credentials: staticCredentials({
        [REFERENCE_AUTHORITY]: { authorization: `Bearer ${CANARY}` },
      }),
      actions: referenceActions(fake.url),
      telemetry,
      sleep: () => Promise.resolve(),
    });
    opened.push(traced);
    expect(await traced.reconcile(env.operation_id!)).toMatchObject({ category: 'succeeded' });
    const [reconcile] = spans.getFinishedSpans().filter((s) => s.name.startsWith('execute_tool'));
    expect(reconcile!.links).toEqual([]);
  });
});

function dump(s: ReadableSpan): unknown {
  return { name: s.name, attributes: s.attributes, events: s.events, status: s.status };
}

describe('OTLP: a dead collector', () => {
  async function deadCollector(): Promise<string> {
    // A port where nothing listens: every export fails with connection refused.
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
    await new Promise<void>((r) => s.close(() => r()));
    return url;
  }

  it('never holds a call, and shutdown waits at most 1 s (the exporter would retry for 5 s)', async () => {
    const otlp = await startOtlpTelemetry(await deadCollector(), {
      metricsIntervalMs: 3_600_000,
      log: () => undefined,
    });
    const { rt, action } = runtime(otlp.telemetry);
    const started = Date.now();
    for (let i = 0; i < 3; i++) {
      const env = await rt.run(
        action('create_issue'),
        { title: `dead collector ${i}` },
        { correlationId: `otlp-dead-${i}` },
      );
      expect(env.category).toBe('succeeded');
    }
    expect(Date.now() - started).toBeLessThan(5_000);
    const shutdownStarted = Date.now();
    await otlp.shutdown();
    expect(Date.now() - shutdownStarted).toBeLessThan(1_500);
  }, 180_000);

  it('is heard: one rate-limited line however many exports fail, and a count', async () => {
    const dead = await deadCollector();
    const lines: string[] = [];
    const otlp = await startOtlpTelemetry(dead, {
      metricsIntervalMs: 3_600_000,
      exportTimeoutMs: 200,
      log: (l) => lines.push(l),
    });
    const { rt, action } = runtime(otlp.telemetry);
    await rt.run(action('create_issue'), { title: 'heard' }, { correlationId: 'otlp-heard' });
    // Shutdown exports spans and metrics: two exports, both refused within the 200 ms limit.
    await otlp.shutdown();
    await new Promise((r) => setTimeout(r, 300));
    expect(otlp.failures()).toBeGreaterThanOrEqual(2);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(`^telemetry: export of (traces|metrics) to ${dead.replace(/[.]/g, '\\.')} failed`),
    );
    expect(lines[0]).not.toContain('\n');
  }, 180_000);
});
