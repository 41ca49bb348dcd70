// The gateway's `telemetry: { otlp: URL }`: spans exported over OTLP/HTTP (JSON) to `URL/v1/traces`.
// The OpenTelemetry packages are optional peer dependencies, loaded here on first use only, so a
// gateway without telemetry never loads them. The provider is Candor's own (not registered
// globally): the process's other instrumentation is left as its owner set it up.
import type * as OtelApi from '@opentelemetry/api';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as TraceSdk from '@opentelemetry/sdk-trace-base';
import type { Telemetry } from './port.js';

/** The packages `telemetry.otlp` needs (`npm install` them beside Candor). */
export const OTLP_PACKAGES = [
  '@opentelemetry/api',
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/exporter-trace-otlp-http',
] as const;

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
  /** Exports what is still buffered and stops. */
  shutdown(): Promise<void>;
}

async function load<T>(name: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch {
    throw new TelemetryUnavailable(name);
  }
}

/** Spans to `endpoint` (the collector's base URL, e.g. `http://localhost:4318`). */
export async function startOtlpTelemetry(
  endpoint: string,
  options: { version?: string } = {},
): Promise<OtlpTelemetry> {
  const api = await load<typeof OtelApi>('@opentelemetry/api');
  const sdk = await load<typeof TraceSdk>('@opentelemetry/sdk-trace-base');
  const otlp = await load<typeof OtlpHttp>('@opentelemetry/exporter-trace-otlp-http');
  const { openTelemetry } = await import('./otel.js');
  const url = `${endpoint.replace(/\/+$/, '')}/v1/traces`;
  const provider = new sdk.BasicTracerProvider({
    spanProcessors: [new sdk.BatchSpanProcessor(new otlp.OTLPTraceExporter({ url }))],
  });
  return {
    telemetry: openTelemetry(api, {
      tracerProvider: provider,
      ...(options.version !== undefined ? { version: options.version } : {}),
    }),
    shutdown: () => provider.shutdown(),
  };
}
