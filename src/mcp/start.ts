// Wires a loaded configuration into a running gateway: ledger, vault and credentials, redactor,
// runtime, MCP server, transport. Shutdown waits for in-flight calls so that every dispatched
// attempt has its attempt_finished record before the ledger closes.
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import {
  answerFromElicitation,
  elicitationApprover,
  elicitationRequest,
  type ApprovalGate,
} from '../approvals/index.js';
import { PolicyLoadError } from '../policy/index.js';
import { composeRuntime, type ComposeOptions } from '../config/compose.js';
import type { ConfigIssue } from '../config/locate.js';
import type { LoadedConfig } from '../config/load.js';
import { openConfiguredVault } from '../config/vault-open.js';
import { startUpstreams } from '../config/upstreams.js';
import { createRedactor } from '../core/redact.js';
import { openLedger } from '../ledger/open.js';
import type { Runtime } from '../runtime.js';
import { createGateway, currentCall, type Gateway } from './gateway.js';
import { serveHttp } from './http.js';
import { GatewayStdioTransport } from './stdio.js';
import { startFleetSweep } from './fleet.js';
import { startOtlpTelemetry, type OtlpTelemetry } from '../telemetry/otlp.js';
import { accessGate } from '../auth/access-gate.js';
import { createResourceServer } from '../auth/resource-server.js';

export interface StartOptions {
  loaded: LoadedConfig;
  /** Overrides the configuration's ledger URL. */
  ledgerUrl?: string;
  /** Streamable HTTP on 127.0.0.1:PORT (0: any free port); stdio when absent. */
  httpPort?: number;
  version?: string;
  env?: Readonly<Record<string, string | undefined>>;
  log?: (line: string) => void;
  /**
   * Given: vault entries the configuration names and the vault lacks are handed here and the
   * gateway starts (calls needing them fail as local_failure, nothing sent); absent: fatal.
   */
  onMissingVaultEntries?: (issues: ConfigIssue[]) => void;
}

export interface ComposeGatewayOptions extends Omit<ComposeOptions, 'clientApprover' | 'agent'> {
  version?: string;
}

/** The gateway and its runtime over an open ledger, without a transport (tests, embedding). */
export function composeGateway(options: ComposeGatewayOptions): {
  gateway: Gateway;
  runtime: Runtime;
  /** The approval gate, when the configuration has an `approvals:` section. */
  approvals: ApprovalGate | null;
} {
  const access = options.loaded.config.mcp?.http?.auth?.access;
  const { runtime, redactor, approvals } = composeRuntime({
    ...options,
    ...(access ? { wrapGate: (gate) => accessGate(gate, access) } : {}),
    agent: 'mcp-gateway',
    clientApprover: { available: () => Boolean(currentCall()?.elicit), approver: askTheClient },
  });
  const gateway = createGateway({
    runtime,
    ledger: options.ledger,
    actions: [...options.loaded.actions, ...(options.upstreams?.actions ?? [])],
    version: options.version ?? '0.0.0',
    ...(options.log ? { log: options.log } : {}),
    redact: (s) => redactor.redactString(s),
  });
  return { gateway, runtime, approvals };
}

/** Asks the client of the call being served, through form elicitation. */
const askTheClient = elicitationApprover(async (card, signal) => {
  const call = currentCall();
  if (!call?.elicit) return 'denied';
  const result = await call.elicit(
    elicitationRequest(card),
    signal ?? new AbortController().signal,
  );
  return answerFromElicitation(result);
});

export type StartFailure = {
  code: 'ledger' | 'vault' | 'listen' | 'config' | 'upstream' | 'telemetry';
  message: string;
  /** Problems at a place in the configuration file (exit 2, one `FILE:LINE:COL` line each). */
  issues?: ConfigIssue[];
};

export interface RunningGateway {
  readonly gateway: Gateway;
  /** Set for HTTP. */
  readonly url: string | null;
  /** Resolves when the transport closed (stdin ended, or close() was called). */
  readonly closed: Promise<void>;
  close(): Promise<void>;
}

export type StartResult =
  | { ok: true; value: RunningGateway; failure?: never }
  | { ok: false; failure: StartFailure; value?: never };

export async function startGateway(options: StartOptions): Promise<StartResult> {
  const { config } = options.loaded;
  const log = options.log ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const redactor = createRedactor();
  const opened = await openLedger(options.ledgerUrl ?? config.ledger);
  if (!opened.ok)
    return { ok: false, failure: { code: 'ledger', message: `ledger: ${opened.failure.message}` } };
  const ledger = opened.value;
  const vaultOpened = await openConfiguredVault(options.loaded, redactor, {
    missing: options.onMissingVaultEntries ? 'report' : 'fatal',
  });
  if (!vaultOpened.ok) {
    await ledger.close();
    return { ok: false, failure: vaultOpened.failure };
  }
  if (vaultOpened.missing.length > 0) options.onMissingVaultEntries?.(vaultOpened.missing);
  const vault = vaultOpened.vault;
  const started = await startUpstreams(config, {
    ...(vault ? { vault } : {}),
    onSecret: (s) => void redactor.addSecret(s),
    log: (line) => log(redactor.redactString(line)),
  });
  if (!started.ok) {
    vault?.close();
    await ledger.close();
    return {
      ok: false,
      failure: { code: 'upstream', message: `${options.loaded.file}: ${started.message}` },
    };
  }
  const upstreams = started.value;
  let otlp: OtlpTelemetry | null = null;
  if (config.telemetry?.otlp) {
    try {
      otlp = await startOtlpTelemetry(config.telemetry.otlp, {
        ...(options.version ? { version: options.version } : {}),
        ...(config.telemetry.metrics_interval_ms !== undefined
          ? { metricsIntervalMs: config.telemetry.metrics_interval_ms }
          : {}),
      });
    } catch (error) {
      await upstreams?.close();
      vault?.close();
      await ledger.close();
      return {
        ok: false,
        failure: {
          code: 'telemetry',
          message: error instanceof Error ? error.message : String(error),
        },
      };
    }
  }
  let composed: ReturnType<typeof composeGateway>;
  try {
    composed = composeGateway({
      loaded: options.loaded,
      ...(otlp ? { telemetry: otlp.telemetry } : {}),
      ledger,
      ...(vault ? { vault } : {}),
      ...(options.env ? { env: options.env } : {}),
      version: options.version ?? '0.0.0',
      log,
      redactor,
      ...(upstreams ? { upstreams } : {}),
    });
  } catch (error) {
    await upstreams?.close();
    await otlp?.shutdown().catch(() => undefined);
    await ledger.close();
    if (error instanceof PolicyLoadError) {
      // One line, at the policy's place (exit 2, like any other problem in the configuration).
      const first = error.problems[0]!;
      const more = error.problems.length > 1 ? ` (and ${error.problems.length - 1} more)` : '';
      return {
        ok: false,
        failure: {
          code: 'config',
          message: error.message,
          issues: [{ ...first, field: 'policy', problem: `${first.message}${more}` }],
        },
      };
    }
    return {
      ok: false,
      failure: { code: 'config', message: error instanceof Error ? error.message : String(error) },
    };
  }
  const { gateway, runtime, approvals } = composed;
  // Fleets: settle the operations of gateways whose lease has lapsed, at start, periodically and
  // as soon as another gateway releases its lease (PostgreSQL).
  const releases = ledger.leases?.watchReleases?.bind(ledger.leases);
  const sweep = config.fleet
    ? startFleetSweep(runtime, {
        onStart: config.fleet.recover_on_start,
        everyMs: config.fleet.sweep_every_ms,
        log,
        ...(releases ? { watchReleases: releases } : {}),
      })
    : null;

  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  let stopping: Promise<void> | null = null;
  let stopTransport: () => Promise<void> = () => Promise.resolve();
  const close = (): Promise<void> => {
    stopping ??= (async () => {
      // Open cards are denied at once, so no call waits for a person while the process stops.
      await approvals?.shutdown();
      await sweep?.stop();
      await gateway.idle();
      await stopTransport();
      await runtime.endSession('gateway stopped');
      await upstreams?.close();
      await ledger.close();
      await otlp?.shutdown().catch(() => undefined);
      await runtime.close();
      resolveClosed();
    })();
    return stopping;
  };

  if (options.httpPort !== undefined) {
    // A static token kept in an unset variable would lock its holder out without a word: say so now.
    const env = options.env ?? process.env;
    const unset = (config.mcp?.http?.auth?.static_tokens ?? []).filter(
      (t) => t.ref !== undefined && !env[t.ref.slice('env:'.length)],
    );
    if (unset.length > 0) {
      await close();
      return {
        ok: false,
        failure: {
          code: 'config',
          message: unset
            .map(
              (t) =>
                `${options.loaded.file}: mcp.http.auth.static_tokens: the token of ${t.name} is in ${t.ref}, which is not set`,
            )
            .join('\n'),
        },
      };
    }
    try {
      const httpConfig = config.mcp?.http;
      const auth = httpConfig?.auth;
      const http = await serveHttp(gateway, options.httpPort, {
        log,
        allowedOrigins: httpConfig?.allowed_origins ?? [],
        ...(httpConfig?.host ? { host: httpConfig.host } : {}),
        ...(httpConfig?.public_url ? { publicUrl: httpConfig.public_url } : {}),
        ...(auth
          ? {
              auth: (resource: string) =>
                createResourceServer({
                  auth,
                  resource,
                  ...(options.env ? { env: options.env } : {}),
                }),
            }
          : {}),
      });
      if (auth) log(`candor serve: HTTP: callers authenticate for the resource ${http.resource}`);
      else if (httpConfig?.allow_unauthenticated && httpConfig.host !== '127.0.0.1')
        log(
          `candor serve: HTTP: listening on ${httpConfig.host} WITHOUT authentication (allow_unauthenticated: true)`,
        );
      stopTransport = () => http.close();
      return { ok: true, value: { gateway, url: http.url, closed, close } };
    } catch (error) {
      await ledger.close();
      const code = (error as { code?: unknown }).code;
      return {
        ok: false,
        failure: {
          code: 'listen',
          message: `cannot listen on ${config.mcp?.http?.host ?? '127.0.0.1'}:${options.httpPort} (${String(code ?? error)})`,
        },
      };
    }
  }
  // One connection; its era (2026-07-28 or a 2025 revision) is decided by the client's opening.
  const handle = serveStdio(() => gateway.createServer(), {
    transport: new GatewayStdioTransport({ log }),
    onerror: (error) => log(`candor serve: stdio: ${error.message}`),
  });
  stopTransport = () => handle.close();
  // The client ends stdin to stop us: finish in-flight calls, then close the ledger.
  process.stdin.once('end', () => void close());
  return { ok: true, value: { gateway, url: null, closed, close } };
}
