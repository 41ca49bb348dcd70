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
  /** Exports what is still buffered (spans and a last metrics collection) and stops. */
  shutdown(): Promise<void>;
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
  const tracerProvider = new sdk.BasicTracerProvider({
    spanProcessors: [
      new sdk.BatchSpanProcessor(new otlp.OTLPTraceExporter({ url: `${base}/v1/traces` })),
    ],
  });
  const meterProvider = new metricsSdk.MeterProvider({
    readers: [
      new metricsSdk.PeriodicExportingMetricReader({
        exporter: new otlpMetrics.OTLPMetricExporter({ url: `${base}/v1/metrics` }),
        exportIntervalMillis: options.metricsIntervalMs ?? DEFAULT_METRICS_INTERVAL_MS,
      }),
    ],
  });
  return {
    telemetry: openTelemetry(api, {
      tracerProvider,
      meterProvider,
      ...(options.version !== undefined ? { version: options.version } : {}),
    }),
    shutdown: async () => {
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}
