// The gateway's `telemetry: { otlp: URL }`: spans exported over OTLP/HTTP (JSON) to `URL/v1/traces`
// and the two counters (operation calls by state, unknown outcomes) to `URL/v1/metrics`. The
// OpenTelemetry packages are optional peer dependencies, loaded here on first use only, so a
// gateway without telemetry never loads them. The providers are Candor's own (not registered
// globally): the process's other instrumentation is left as its owner set it up.
import type * as OtelApi from '@opentelemetry/api';
import type * as OtlpMetrics from '@opentelemetry/exporter-metrics-otlp-http';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as MetricsSdk from '@opentelemetry/sdk-metrics';
import type * as TraceSdk from '@opentelemetry/sdk-trace-base';
import type { Telemetry } from './port.js';

/** The packages `telemetry.otlp` needs (`npm install` them beside Candor). */
export const OTLP_PACKAGES = [
  '@opentelemetry/api',
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/sdk-metrics',
  '@opentelemetry/exporter-metrics-otlp-http',
] as const;

/** How often metrics are exported when the configuration does not say (the SDK's default). */
export const DEFAULT_METRICS_INTERVAL_MS = 60_000;

/** The OpenTelemetry packages are not installed: an environment problem (the CLI exits 3). */
export class TelemetryUnavailable extends Error {
  readonly code = 'telemetry_unavailable';
  constructor(missing: string) {
    super(
      `telemetry.otlp needs ${missing}: install ${OTLP_PACKAGES.join(', ')} (optional dependencies of candor)`,
    );
  }
}

export interface OtlpTelemetry {
  telemetry: Telemetry;
  /**
   * Exports what is still buffered (spans and a last metrics collection) and stops, waiting at most
   * `SHUTDOWN_WAIT_MS` for a collector that does not answer (what is left is dropped).
   */
  shutdown(): Promise<void>;
  /** Failed exports so far (also counted as `candor.telemetry.export_failures`). */
  failures(): number;
}

/** The longest shutdown waits for the collector. */
export const SHUTDOWN_WAIT_MS = 1_000;
/** Failed exports are logged at most once per this interval (with the count since the last line). */
export const FAILURE_LOG_INTERVAL_MS = 60_000;
/** One export request's time limit (the OTLP exporter's `timeoutMillis`). */
export const EXPORT_TIMEOUT_MS = 5_000;

interface Exporter<T> {
  export(items: T, done: (result: { code: number; error?: Error }) => void): void;
}

/** Reports each failed export: one line per `FAILURE_LOG_INTERVAL_MS` at most, and a count. */
function failureWatch(
  endpoint: string,
  log: (line: string) => void,
  now: () => number = Date.now,
): {
  watch<T, E extends Exporter<T>>(exporter: E, signal: 'traces' | 'metrics'): E;
  count(): number;
  onFailure(fn: (signal: string) => void): void;
} {
  let total = 0;
  let sinceLine = 0;
  let lastLine = -Infinity;
  const listeners: Array<(signal: string) => void> = [];
  return {
    watch(exporter, signal) {
      const original = exporter.export.bind(exporter);
      exporter.export = (items, done) =>
        original(items, (result) => {
          if (result.code !== 0) {
            total++;
            sinceLine++;
            for (const l of listeners) l(signal);
            if (now() - lastLine >= FAILURE_LOG_INTERVAL_MS) {
              const code = (result.error as { code?: unknown } | undefined)?.code;
              const why = typeof code === 'string' || typeof code === 'number' ? ` (${code})` : '';
              log(
                `telemetry: export of ${signal} to ${endpoint} failed${why}; ${sinceLine} failed export(s) since the last report, ${total} in all (reported at most once a minute)`,
              );
              lastLine = now();
              sinceLine = 0;
            }
          }
          done(result);
        });
      return exporter;
    },
    count: () => total,
    onFailure: (fn) => void listeners.push(fn),
  };
}

async function load<T>(name: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch {
    throw new TelemetryUnavailable(name);
  }
}

export interface OtlpOptions {
  /** Instrumentation scope version. */
  version?: string;
  /** Metrics export interval (default 60 s); a last export also happens at shutdown. */
  metricsIntervalMs?: number;
  /** Where a failed export is reported, one line at a time (default: standard error). */
  log?: (line: string) => void;
  /** One export request's time limit, retries included (default `EXPORT_TIMEOUT_MS`). */
  exportTimeoutMs?: number;
}

/** Spans and metrics to `endpoint` (the collector's base URL, e.g. `http://localhost:4318`). */
export async function startOtlpTelemetry(
  endpoint: string,
  options: OtlpOptions = {},
): Promise<OtlpTelemetry> {
  const api = await load<typeof OtelApi>('@opentelemetry/api');
  const sdk = await load<typeof TraceSdk>('@opentelemetry/sdk-trace-base');
  const otlp = await load<typeof OtlpHttp>('@opentelemetry/exporter-trace-otlp-http');
  const metricsSdk = await load<typeof MetricsSdk>('@opentelemetry/sdk-metrics');
  const otlpMetrics = await load<typeof OtlpMetrics>('@opentelemetry/exporter-metrics-otlp-http');
  const { openTelemetry } = await import('./otel.js');
  const base = endpoint.replace(/\/+$/, '');
  const failures = failureWatch(
    base,
    options.log ?? ((line) => void process.stderr.write(`${line}\n`)),
  );
  const traceExporter = failures.watch(
    new otlp.OTLPTraceExporter({
      url: `${base}/v1/traces`,
      timeoutMillis: options.exportTimeoutMs ?? EXPORT_TIMEOUT_MS,
    }),
    'traces',
  );
  const metricExporter = failures.watch(
    new otlpMetrics.OTLPMetricExporter({
      url: `${base}/v1/metrics`,
      timeoutMillis: options.exportTimeoutMs ?? EXPORT_TIMEOUT_MS,
    }),
    'metrics',
  );
  const tracerProvider = new sdk.BasicTracerProvider({
    spanProcessors: [new sdk.BatchSpanProcessor(traceExporter)],
  });
  const meterProvider = new metricsSdk.MeterProvider({
    readers: [
      new metricsSdk.PeriodicExportingMetricReader({
        exporter: metricExporter,
        exportIntervalMillis: options.metricsIntervalMs ?? DEFAULT_METRICS_INTERVAL_MS,
      }),
    ],
  });
  const failureCounter = meterProvider
    .getMeter('candor', options.version)
    .createCounter('candor.telemetry.export_failures', {
      description: 'OTLP exports that failed (the collector refused, timed out or was unreachable)',
    });
  failures.onFailure((signal) => failureCounter.add(1, { 'candor.telemetry.signal': signal }));
  return {
    telemetry: openTelemetry(api, {
      tracerProvider,
      meterProvider,
      ...(options.version !== undefined ? { version: options.version } : {}),
    }),
    shutdown: async () => {
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_WAIT_MS);
        timer.unref();
      });
      await Promise.race([
        Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]),
        waited,
      ]);
      clearTimeout(timer);
    },
    failures: () => failures.count(),
  };
}
