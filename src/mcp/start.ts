// Wires a loaded configuration into a running gateway: ledger, vault and credentials, redactor,
// runtime, MCP server, transport. Shutdown waits for in-flight calls so that every dispatched
// attempt has its attempt_finished record before the ledger closes.
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { configCredentials } from '../config/credentials.js';
import { openConfiguredVault } from '../config/vault-open.js';
import type { ConfigIssue } from '../config/locate.js';
import { configSsh } from '../config/ssh-runtime.js';
import type { LoadedConfig } from '../config/load.js';
import { readFileSync } from 'node:fs';
import { createRuntime, type Runtime, type RuntimeOptions } from '../runtime.js';
import { createCheckpointer, type WitnessOptions } from '../ledger/chain/checkpointer.js';
import { parseSignerKey, parseVerifierKey, SigType } from '../ledger/chain/note.js';
import { decodeSealPublicKey } from '../ledger/seal.js';
import { closeHttpPools } from '../http/transport.js';
import { openLedger } from '../ledger/open.js';
import type { LedgerStore } from '../ledger/store.js';
import { createRedactor, type Redactor, type Vault } from '../vault/index.js';
import {
  answerFromElicitation,
  anyLock,
  consoleApprover,
  createApprovalGate,
  createLockGate,
  createPolicy,
  elicitationApprover,
  elicitationRequest,
  lockFile,
  terminalApprover,
  vaultLock,
  type ApprovalGate,
  type Approver,
} from '../approvals/index.js';
import type { Gate } from '../engine/ports.js';
import { createGateway, currentCall, type Gateway } from './gateway.js';
import { serveHttp } from './http.js';
import { GatewayStdioTransport } from './stdio.js';
import { startFleetSweep } from './fleet.js';
import { startOtlpTelemetry, type OtlpTelemetry } from '../telemetry/otlp.js';
import type { Telemetry } from '../telemetry/port.js';

export interface StartOptions {
  loaded: LoadedConfig;
  /** Overrides the configuration's ledger URL. */
  ledgerUrl?: string;
  /** Streamable HTTP on 127.0.0.1:PORT (0: any free port); stdio when absent. */
  httpPort?: number;
  version?: string;
  env?: Readonly<Record<string, string | undefined>>;
  log?: (line: string) => void;
}

export interface ComposeOptions {
  loaded: LoadedConfig;
  /** Tracing (the `telemetry:` section, started by startGateway). */
  telemetry?: Telemetry;
  ledger: LedgerStore;
  vault?: Vault;
  env?: Readonly<Record<string, string | undefined>>;
  version?: string;
  log?: (line: string) => void;
  redactor?: Redactor;
}

/** The gateway and its runtime over an open ledger, without a transport (tests, embedding). */
export function composeGateway(options: ComposeOptions): {
  gateway: Gateway;
  runtime: Runtime;
  /** The approval gate, when the configuration has an `approvals:` section. */
  approvals: ApprovalGate | null;
} {
  const redactor = options.redactor ?? createRedactor();
  const credentials = configCredentials(options.loaded.config, {
    ...(options.vault ? { vault: options.vault } : {}),
    ...(options.env ? { env: options.env } : {}),
    onSecret: (s) => void redactor.addSecret(s),
  });
  const gate = approvalGate(options);
  const audit = auditOptions(options);
  // SSH hosts and actions: keys and secret_env values come from the vault at attempt time.
  const ssh = configSsh(options.loaded.config, {
    ...(options.vault ? { vault: options.vault } : {}),
    onSecret: (s) => void redactor.addSecret(s),
  });
  const runtime = createRuntime({
    ledger: options.ledger,
    credentials,
    redactor,
    agent: 'mcp-gateway',
    ...(gate ? { gate } : {}),
    ...(audit ? { audit } : {}),
    ...(ssh ? { ssh } : {}),
    // Registered up front so that recovery and reconciliation of older operations find them.
    actions: options.loaded.actions.map((a) => a.definition),
    // A fleet member holds an ownership lease (src/engine/ownership.ts).
    ...(options.loaded.config.fleet
      ? { lease: { ttl_ms: options.loaded.config.fleet.lease_ms } }
      : {}),
    ...(options.telemetry ? { telemetry: options.telemetry } : {}),
  });
  const gateway = createGateway({
    runtime,
    ledger: options.ledger,
    actions: options.loaded.actions,
    version: options.version ?? '0.0.0',
    ...(options.log ? { log: options.log } : {}),
    redact: (s) => redactor.redactString(s),
  });
  return { gateway, runtime, approvals: gate && 'shutdown' in gate ? gate : null };
}

/** Sealing and checkpoints from the `audit:` section. Bad keys stop the gateway at start. */
function auditOptions(options: ComposeOptions): RuntimeOptions['audit'] | null {
  const spec = options.loaded.config.audit;
  if (!spec) return null;
  const out: NonNullable<RuntimeOptions['audit']> = {};
  if (spec.seal_to) {
    const pk = decodeSealPublicKey(spec.seal_to);
    if (!pk.ok) throw new Error(`audit.seal_to: ${pk.failure}`);
    out.sealTo = pk.value;
  }
  if (spec.log_key_file) {
    const signer = parseSignerKey(readFileSync(spec.log_key_file, 'utf8').trim());
    if (!signer.ok) throw new Error(`audit.log_key_file ${spec.log_key_file}: ${signer.failure}`);
    out.checkpoints = createCheckpointer({
      ledger: options.ledger,
      signer: signer.value,
      origin: signer.value.name,
      every: spec.checkpoint_every,
      ...(options.log ? { log: options.log } : {}),
      ...(spec.witness_url ? { witness: witnessOptions(spec, spec.witness_url) } : {}),
    });
  }
  return out;
}

/** The witness: its URL and the key its cosignatures must verify with. */
function witnessOptions(
  spec: NonNullable<ComposeOptions['loaded']['config']['audit']>,
  url: string,
): WitnessOptions {
  if (!spec.witness_key)
    throw new Error(
      'audit.witness_key is required with audit.witness_url: the witness is trusted only through its key',
    );
  const key = parseVerifierKey(spec.witness_key);
  if (!key.ok) throw new Error(`audit.witness_key: ${key.failure}`);
  if (key.value.type !== SigType.cosignature_v1)
    throw new Error('audit.witness_key: not a witness (cosignature, type 0x04) key');
  return {
    url,
    key: key.value,
    required: spec.witness_required,
    waitMs: spec.witness_wait_ms,
  };
}

/** The approval gate from the `approvals:` section; without it, a gate that only watches the lock. */
function approvalGate(options: ComposeOptions): ApprovalGate | Gate | null {
  const spec = options.loaded.config.approvals;
  // Both locks hold: `candor vault lock` and `candor approve lock`.
  const lock = options.vault
    ? anyLock(vaultLock(options.vault), lockFile(spec?.dir))
    : lockFile(spec?.dir);
  // Without approvals the gate still watches the lock: gate_locked, and transitions on record.
  if (!spec) return createLockGate({ ledger: options.ledger, lock });
  const policy = createPolicy({
    ...(spec.classes ? { classes: spec.classes } : {}),
    ...(spec.actions
      ? {
          actions: Object.fromEntries(
            Object.entries(spec.actions).map(([k, scope]) => [k, { scope }]),
          ),
        }
      : {}),
    ...(spec.per_call_ttl_ms !== undefined ? { per_call_ttl_ms: spec.per_call_ttl_ms } : {}),
  });
  if (!policy.ok) throw new Error(`approvals: ${policy.failure.map((p) => p.message).join('; ')}`);
  const fallback =
    spec.approver === 'terminal'
      ? terminalApprover()
      : consoleApprover(spec.dir ? { dir: spec.dir } : {});
  // The client of the call being served is asked only when it offered form elicitation on a
  // 2025-era connection (gateway.ts decides); anyone else gets the console queue.
  const elicit = elicitationApprover(async (card, signal) => {
    const call = currentCall();
    if (!call?.elicit) return 'denied';
    const result = await call.elicit(
      elicitationRequest(card),
      signal ?? new AbortController().signal,
    );
    return answerFromElicitation(result);
  });
  const approver: Approver =
    spec.approver === 'elicitation'
      ? {
          name: 'elicitation_or_console',
          ask: (card, ask) =>
            currentCall()?.elicit ? elicit.ask(card, ask) : fallback.ask(card, ask),
        }
      : fallback;
  return createApprovalGate({
    ledger: options.ledger,
    approver,
    policy: policy.value,
    lock,
    ...(spec.wait_ms !== undefined ? { wait_ms: spec.wait_ms } : {}),
  });
}

export type StartFailure = {
  code: 'ledger' | 'vault' | 'listen' | 'config' | 'telemetry';
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
  const vaultOpened = await openConfiguredVault(options.loaded, redactor);
  if (!vaultOpened.ok) {
    await ledger.close();
    return { ok: false, failure: vaultOpened.failure };
  }
  const vault = vaultOpened.vault;
  let otlp: OtlpTelemetry | null = null;
  if (config.telemetry?.otlp) {
    try {
      otlp = await startOtlpTelemetry(config.telemetry.otlp, {
        ...(options.version ? { version: options.version } : {}),
      });
    } catch (error) {
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
    });
  } catch (error) {
    await ledger.close();
    return {
      ok: false,
      failure: { code: 'config', message: error instanceof Error ? error.message : String(error) },
    };
  }
  const { gateway, runtime, approvals } = composed;
  // Fleets: settle the operations of gateways whose lease has lapsed, at start and periodically.
  const sweep = config.fleet
    ? startFleetSweep(runtime, {
        onStart: config.fleet.recover_on_start,
        everyMs: config.fleet.sweep_every_ms,
        log,
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
      await ledger.close();
      await otlp?.shutdown().catch(() => undefined);
      await closeHttpPools();
      resolveClosed();
    })();
    return stopping;
  };

  if (options.httpPort !== undefined) {
    try {
      const http = await serveHttp(gateway, options.httpPort, {
        log,
        allowedOrigins: config.mcp?.http?.allowed_origins ?? [],
      });
      stopTransport = () => http.close();
      return { ok: true, value: { gateway, url: http.url, closed, close } };
    } catch (error) {
      await ledger.close();
      const code = (error as { code?: unknown }).code;
      return {
        ok: false,
        failure: {
          code: 'listen',
          message: `cannot listen on 127.0.0.1:${options.httpPort} (${String(code ?? error)})`,
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
