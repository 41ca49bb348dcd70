// The telemetry port over the OpenTelemetry API, following the GenAI semantic conventions for tool
// execution: a span `execute_tool {tool}` per operation call (gen_ai.operation.name, gen_ai.tool.name,
// gen_ai.tool.call.id), a child span per attempt with Candor's vocabulary (candor.*), observations,
// approvals and takeovers as span events, and two counters (calls by operation state, unknown
// outcomes). With no SDK registered the API hands out non-recording spans: nearly no cost.
//
// Attributes hold only ids, numbers and closed-vocabulary values: never an input, a header, a
// body, a message or an error text (they may hold secrets or raw provider output).
import type * as OtelApi from '@opentelemetry/api';
import type { Attributes, Counter, Span } from '@opentelemetry/api';
import type { OperationState } from '../core/vocabulary.js';
import type { StoredEvent } from '../ledger/events.js';
import { foldEvent, stateOf, type OperationFold } from '../core/fold.js';
import type { CallTrace, Telemetry } from './port.js';

/** The parts of `@opentelemetry/api` used here (pass the module itself). */
export type OtelApiModule = Pick<
  typeof OtelApi,
  'trace' | 'context' | 'metrics' | 'SpanKind' | 'SpanStatusCode'
>;

export interface OpenTelemetryOptions {
  /** Instrumentation scope version (default: none). */
  version?: string;
  /** Where spans go (default: the globally registered provider). */
  tracerProvider?: OtelApi.TracerProvider;
  /** Where metrics go (default: the globally registered provider). */
  meterProvider?: OtelApi.MeterProvider;
}

/** Links per call span: an operation's opening call and every attempt's call fit (budget ≤ 10). */
const MAX_LINKS = 16;

/** The span context a recorded W3C traceparent names (remote: it may be another process's). */
function spanContextOf(tp: string): OtelApi.SpanContext | null {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(tp);
  if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return null;
  return { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16) & 1, isRemote: true };
}

/**
 * Telemetry over the given OpenTelemetry API module, e.g.
 * `createRuntime({ …, telemetry: openTelemetry(await import('@opentelemetry/api')) })`.
 */
export function openTelemetry(api: OtelApiModule, options: OpenTelemetryOptions = {}): Telemetry {
  const tracer = (options.tracerProvider ?? api.trace.getTracerProvider()).getTracer(
    'candor',
    options.version,
  );
  const meter = (options.meterProvider ?? api.metrics.getMeterProvider()).getMeter(
    'candor',
    options.version,
  );
  const calls: Counter = meter.createCounter('candor.operation.calls', {
    description: 'Operation calls by the state the operation stands at afterwards',
  });
  const unknown: Counter = meter.createCounter('candor.outcome.unknown', {
    description: 'Attempts whose remote effect is unknown (sent, no usable answer)',
  });

  return {
    call(tool) {
      const span = tracer.startSpan(`execute_tool ${tool}`, {
        kind: api.SpanKind.INTERNAL,
        attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': tool },
      });
      const parent = api.trace.setSpan(api.context.active(), span);
      const attempts = new Map<string, Span>();
      let open: Span | null = null;
      // The operation fold (core/fold.ts) over the events this call recorded.
      let fold: OperationFold | null = null;
      let state: OperationState | null = null;
      let toolName = tool;
      let identified = false;

      const traceparent = (s: Span): string | null => {
        const c = s.spanContext();
        if (!api.trace.isSpanContextValid(c)) return null;
        return `00-${c.traceId}-${c.spanId}-${(c.traceFlags & 1) === 1 ? '01' : '00'}`;
      };

      const trace: CallTrace = {
        identify(op) {
          if (identified) return;
          identified = true;
          if (op.action && op.action !== toolName) {
            toolName = op.action;
            span.updateName(`execute_tool ${toolName}`);
            span.setAttribute('gen_ai.tool.name', toolName);
          }
          span.setAttributes({
            'gen_ai.tool.call.id': op.correlation_id ?? op.operation_id,
            'candor.operation.id': op.operation_id,
          });
          // The calls this one settles or continues: links, not parents (each keeps its trace).
          let linked = 0;
          for (const tp of op.links ?? []) {
            const context = spanContextOf(tp);
            if (!context || linked >= MAX_LINKS) continue;
            linked++;
            span.addLink({ context, attributes: { 'candor.operation.id': op.operation_id } });
          }
        },
        context: () => traceparent(span),
        record(events) {
          for (const e of events) {
            if (e.kind === 'checkpoint') {
              witnessEvent(e);
              continue;
            }
            if (e.operation_id === null) continue;
            if (e.kind === 'operation_opened' && e.data.caller) {
              // Who asked (OpenTelemetry enduser.*): the token's subject, never the token.
              const c = e.data.caller;
              span.setAttributes({
                'enduser.id': c.subject,
                'candor.caller.kind': c.kind,
                ...(c.client_id ? { 'candor.caller.client_id': c.client_id } : {}),
                ...(c.scopes.length > 0 ? { 'enduser.scope': c.scopes.join(' ') } : {}),
              });
            }
            fold = foldEvent(fold, e);
            state = stateOf(fold);
            recordOne(e);
          }
        },
        traceparent: () => traceparent(open ?? span),
        end(outcome) {
          for (const s of attempts.values()) s.end();
          attempts.clear();
          if ('envelope' in outcome) {
            const env = outcome.envelope;
            if (env.operation_id && !identified)
              trace.identify({
                operation_id: env.operation_id,
                correlation_id: env.correlation_id,
                action: null,
              });
            span.setAttributes({
              'candor.category': env.category,
              'candor.retry': env.retry,
              'candor.remote_effect': env.remote_effect,
              ...(state ? { 'candor.operation.state': state } : {}),
            });
            if (!env.ok) {
              span.setAttribute('error.type', env.category);
              span.setStatus({ code: api.SpanStatusCode.ERROR, message: env.category });
            }
          } else {
            // Never the error's message: it may quote input or a provider's answer.
            const code = (outcome.error as { code?: unknown } | null)?.code;
            const type = typeof code === 'string' ? code : 'exception';
            span.setAttribute('error.type', type);
            span.setStatus({ code: api.SpanStatusCode.ERROR, message: type });
          }
          calls.add(1, {
            'gen_ai.tool.name': toolName,
            'candor.operation.state': state ?? 'none',
          });
          span.end();
        },
      };

      /** A checkpoint stored during this call whose witness did not cosign: a span event. */
      function witnessEvent(e: Extract<StoredEvent, { kind: 'checkpoint' }>): void {
        const code = e.data.witness_problem_code;
        if (code === undefined) return;
        span.addEvent(
          code === 'fork' ? 'candor.witness.fork' : 'candor.witness.problem',
          {
            'candor.witness.problem': code,
            'candor.checkpoint.size': e.data.size,
            ...(e.data.witness_size !== undefined
              ? { 'candor.witness.size': e.data.witness_size }
              : {}),
          },
          e.at,
        );
      }

      function recordOne(e: StoredEvent): void {
        switch (e.kind) {
          case 'operation_opened':
            trace.identify({
              operation_id: e.operation_id!,
              correlation_id: e.correlation_id,
              action: e.data.action,
            });
            return;
          case 'attempt_started': {
            const attrs: Attributes = {
              'candor.operation.id': e.operation_id!,
              'candor.attempt.number': e.data.number,
              'candor.attempt.id': e.data.attempt_id,
            };
            if (e.data.retry_reason) attrs['candor.retry.reason'] = e.data.retry_reason;
            if (e.data.retry_decision) attrs['candor.retry.decision'] = e.data.retry_decision;
            const s = tracer.startSpan(
              `attempt ${e.data.number} ${toolName}`,
              { kind: api.SpanKind.CLIENT, attributes: attrs, startTime: e.at },
              parent,
            );
            attempts.set(e.data.attempt_id, s);
            open = s;
            return;
          }
          case 'attempt_finished': {
            const s = attempts.get(e.data.attempt_id);
            if (!s) return;
            s.setAttributes({
              'candor.dispatch_state': e.data.dispatch_state,
              'candor.category': e.data.category,
              'candor.retry': e.data.retry,
              'candor.remote_effect': e.data.remote_effect,
              ...(e.data.response?.status != null
                ? { 'http.response.status_code': e.data.response.status }
                : {}),
            });
            if (e.data.category !== 'succeeded') {
              s.setAttribute('error.type', e.data.category);
              s.setStatus({ code: api.SpanStatusCode.ERROR, message: e.data.category });
            }
            if (e.data.remote_effect === 'unknown')
              unknown.add(1, { 'gen_ai.tool.name': toolName });
            s.end(e.at);
            attempts.delete(e.data.attempt_id);
            if (open === s) open = null;
            return;
          }
          case 'observation_recorded':
            span.addEvent(
              'candor.observation',
              {
                'candor.observation.source': e.data.source,
                'candor.observation.matches': e.data.matches,
                'candor.operation.state': e.data.state_after,
              },
              e.at,
            );
            return;
          case 'approval_requested':
            span.addEvent(
              'candor.approval.requested',
              { 'candor.approval.id': e.data.approval_id, 'candor.approval.scope': e.data.scope },
              e.at,
            );
            return;
          case 'policy_decided':
            span.addEvent(
              'candor.policy.decided',
              {
                'candor.policy.decision': e.data.decision,
                'candor.policy.ids': e.data.policy_ids.join(','),
                'candor.policy.attempt': e.data.attempt,
                'candor.policy.context_digest': e.data.context_digest,
              },
              e.at,
            );
            return;
          case 'approval_decided':
            span.addEvent(
              'candor.approval.decided',
              {
                'candor.approval.id': e.data.approval_id,
                'candor.approval.decision': e.data.decision,
              },
              e.at,
            );
            return;
          case 'owner_changed':
            span.addEvent(
              'candor.owner_changed',
              {
                'candor.owner.from': e.data.from,
                'candor.owner.to': e.data.to,
                'candor.owner.reason': e.data.reason,
              },
              e.at,
            );
            return;
          case 'operation_resolved':
            span.addEvent(
              'candor.operation.resolved',
              { 'candor.operation.state': e.data.state, 'candor.resolved_by': e.data.by },
              e.at,
            );
            return;
          default:
            return;
        }
      }

      return trace;
    },
  };
}
