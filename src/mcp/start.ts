// Wires a loaded configuration into a running gateway on the composition root (config/open.ts):
// vault, ledger, upstreams, telemetry, runtime, fleet sweep, MCP server and transport. Shutdown
// waits for in-flight calls so that every dispatched attempt has its attempt_finished record before
// the ledger closes, and releases everything in reverse order (also after a failed start).
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
import {
  composition,
  CompositionError,
  openConfigured,
  type Composition,
  type OpenFailure,
} from '../config/open.js';
import type { Runtime } from '../runtime.js';
import { createGateway, currentCall, type Gateway } from './gateway.js';
import { serveHttp } from './http.js';
import { GatewayStdioTransport } from './stdio.js';
import { startFleetSweep } from './fleet.js';
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
  code: OpenFailure['code'];
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

/**
 * The gateway from configuration, on the composition root (config/open.ts): vault, ledger,
 * upstreams, telemetry, runtime, fleet sweep, listener — each released by `close()` in reverse
 * order, and by a failed start as far as it got.
 */
export async function startGateway(options: StartOptions): Promise<StartResult> {
  const log = options.log ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const c = composition(log);
  try {
    return { ok: true, value: await openGateway(c, options, log) };
  } catch (error) {
    await c.close();
    if (!(error instanceof CompositionError)) throw error;
    const { code, message, issues } = error.failure;
    return { ok: false, failure: { code, message, ...(issues ? { issues } : {}) } };
  }
}

async function openGateway(
  c: Composition,
  options: StartOptions,
  log: (line: string) => void,
): Promise<RunningGateway> {
  const { config } = options.loaded;
  const parts = await openConfigured(c, {
    loaded: options.loaded,
    ...(options.ledgerUrl !== undefined ? { ledgerUrl: options.ledgerUrl } : {}),
    ...(options.onMissingVaultEntries
      ? { onMissingVaultEntries: options.onMissingVaultEntries }
      : {}),
    telemetry: options.version ? { version: options.version } : {},
    log,
  });
  const { ledger, vault, upstreams, redactor } = parts;
  const { gateway, runtime, approvals } = await c.open(
    'runtime',
    () => {
      try {
        return composeGateway({
          loaded: options.loaded,
          ...(parts.telemetry ? { telemetry: parts.telemetry } : {}),
          ledger,
          ...(vault ? { vault } : {}),
          ...(options.env ? { env: options.env } : {}),
          version: options.version ?? '0.0.0',
          log,
          redactor,
          ...(upstreams ? { upstreams } : {}),
        });
      } catch (error) {
        throw configFailure(error);
      }
    },
    // The session ends (its lease released) and the runtime's pools and checkpoints close before
    // the telemetry, upstreams, vault and ledger under it.
    async (composed) => {
      await composed.approvals?.shutdown();
      await composed.runtime.endSession('gateway stopped');
      await composed.runtime.close();
    },
  );
  // Fleets: settle the operations of gateways whose lease has lapsed, at start, periodically and
  // as soon as another gateway releases its lease (PostgreSQL).
  const fleet = config.fleet;
  if (fleet) {
    const releases = ledger.leases?.watchReleases?.bind(ledger.leases);
    await c.open(
      'sweep',
      () =>
        startFleetSweep(runtime, {
          onStart: fleet.recover_on_start,
          everyMs: fleet.sweep_every_ms,
          log,
          ...(releases ? { watchReleases: releases } : {}),
        }),
      (sweep) => sweep.stop(),
    );
  }

  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  let stopping: Promise<void> | null = null;
  const close = (): Promise<void> => {
    stopping ??= c.close().then(() => resolveClosed());
    return stopping;
  };
  /** The transport's release: open cards denied at once, in-flight calls finished, then it stops. */
  const drained = (stop: () => Promise<void>) => async () => {
    await approvals?.shutdown();
    await gateway.idle();
    await stop();
  };

  if (options.httpPort !== undefined) {
    const port = options.httpPort;
    const http = await c.open(
      'listen',
      async () => {
        checkStaticTokens(options);
        const httpConfig = config.mcp?.http;
        const auth = httpConfig?.auth;
        try {
          return await serveHttp(gateway, port, {
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
        } catch (error) {
          const code = (error as { code?: unknown }).code;
          const reason = String(code ?? error);
          throw new CompositionError('listen', {
            code: 'listen',
            message: `cannot listen on ${httpConfig?.host ?? '127.0.0.1'}:${port} (${reason})`,
            reason,
          });
        }
      },
      (h) => drained(() => h.close())(),
    );
    const httpConfig = config.mcp?.http;
    if (httpConfig?.auth)
      log(`candor serve: HTTP: callers authenticate for the resource ${http.resource}`);
    else if (httpConfig?.allow_unauthenticated && httpConfig.host !== '127.0.0.1')
      log(
        `candor serve: HTTP: listening on ${httpConfig.host} WITHOUT authentication (allow_unauthenticated: true)`,
      );
    return { gateway, url: http.url, closed, close };
  }
  // One connection; its era (2026-07-28 or a 2025 revision) is decided by the client's opening.
  // The client ends stdin to stop us: finish in-flight calls, then close the ledger.
  const onEnd = (): void => void close();
  await c.open(
    'listen',
    () => {
      const handle = serveStdio(() => gateway.createServer(), {
        transport: new GatewayStdioTransport({ log }),
        onerror: (error) => log(`candor serve: stdio: ${error.message}`),
      });
      process.stdin.once('end', onEnd);
      return handle;
    },
    (handle) =>
      drained(async () => {
        process.stdin.off('end', onEnd);
        await handle.close();
      })(),
  );
  return { gateway, url: null, closed, close };
}

/** A static token kept in an unset variable would lock its holder out without a word: say so now. */
function checkStaticTokens(options: StartOptions): void {
  const env = options.env ?? process.env;
  const unset = (options.loaded.config.mcp?.http?.auth?.static_tokens ?? []).filter(
    (t) => t.ref !== undefined && !env[t.ref.slice('env:'.length)],
  );
  if (unset.length === 0) return;
  throw new CompositionError('listen', {
    code: 'config',
    message: unset
      .map(
        (t) =>
          `${options.loaded.file}: mcp.http.auth.static_tokens: the token of ${t.name} is in ${t.ref}, which is not set`,
      )
      .join('\n'),
  });
}

/** A configuration problem found while composing the runtime, as the start failure it is. */
function configFailure(error: unknown): CompositionError {
  if (error instanceof PolicyLoadError) {
    // One line, at the policy's place (exit 2, like any other problem in the configuration).
    const first = error.problems[0]!;
    const more = error.problems.length > 1 ? ` (and ${error.problems.length - 1} more)` : '';
    return new CompositionError('runtime', {
      code: 'config',
      message: error.message,
      issues: [{ ...first, field: 'policy', problem: `${first.message}${more}` }],
    });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new CompositionError('runtime', { code: 'config', message, reason: message });
}
