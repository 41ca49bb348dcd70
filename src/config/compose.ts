// The composition root: a runtime from a loaded candor.yaml — credentials (vault or environment),
// the redactor every secret is added to, the approvals gate and lock, sealing and checkpoints
// (audit:), SSH hosts and actions, upstream MCP servers (started by the caller), and the transports
// (src/runtime.ts). `candor serve` adds only the MCP server around it (mcp/start.ts); `candor
// recover` and other commands use it as it is, without loading the MCP SDK. HTTP connection pools
// belong to the runtime and close with it.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import {
  anyLock,
  consoleApprover,
  createApprovalGate,
  createLockGate,
  createPolicy,
  lockFile,
  terminalApprover,
  vaultLock,
  type ApprovalGate,
  type Approver,
} from '../approvals/index.js';
import { createRedactor, type Redactor } from '../core/redact.js';
import type { Gate } from '../engine/ports.js';
import { createWebhookNotifier, notifyingApprover } from '../approvals/webhook.js';
import { createCheckpointer, type WitnessOptions } from '../ledger/chain/checkpointer.js';
import { traceEvents } from '../engine/trace.js';
import { parseSignerKey, parseVerifierKey, SigType } from '../ledger/chain/note.js';
import { decodeSealPublicKey } from '../ledger/seal.js';
import type { LedgerStore } from '../ledger/store.js';
import { createRuntime, type Runtime, type RuntimeOptions } from '../runtime.js';
import type { Vault } from '../vault/index.js';
import { configCredentials } from './credentials.js';
import type { LoadedConfig } from './load.js';
import { defaultApprovalsDir } from './paths.js';
import { configSsh } from './ssh-runtime.js';
import { configPolicy } from './policy.js';
import type { StartedUpstreams } from './upstreams.js';
import type { Telemetry } from '../telemetry/port.js';

export interface ComposeOptions {
  loaded: LoadedConfig;
  ledger: LedgerStore;
  /** The opened vault (config/vault-open.ts), when the configuration has a `vault:` section. */
  vault?: Vault;
  env?: Readonly<Record<string, string | undefined>>;
  log?: (line: string) => void;
  /** Every resolved secret is added to it; one is made when absent. */
  redactor?: Redactor;
  /** Who runs the session, as the ledger records it (default `candor`). */
  agent?: string;
  /**
   * Whether the calls come from an agent (the MCP gateway; default) or a person's own command
   * (`candor recover`): recorded on approval cards and events.
   */
  requested_via?: 'agent' | 'person';
  /**
   * The approver of the client being served, for `approvals.approver: elicitation` — asked only
   * while `available()` (the MCP gateway: a call whose client offered form elicitation); the
   * configured console or terminal approver otherwise.
   */
  clientApprover?: { available(): boolean; approver: Approver };
  /** Upstream MCP servers already started (`startUpstreams`): their tools become actions. */
  upstreams?: StartedUpstreams;
  /** Tracing (the `telemetry:` section, started by the caller). */
  telemetry?: Telemetry;
  /** Puts a check in front of the gate (the gateway's per-caller access rules). */
  wrapGate?: (gate: Gate) => Gate;
}

export interface Composed {
  runtime: Runtime;
  redactor: Redactor;
  /** The approval gate, when the configuration has an `approvals:` section. */
  approvals: ApprovalGate | null;
}

/**
 * A runtime from configuration, over an open ledger. Throws an Error with a one-line message naming
 * the configuration field when a key or policy in it is unusable (callers exit 2 or 3 with it).
 */
export function composeRuntime(options: ComposeOptions): Composed {
  const redactor = options.redactor ?? createRedactor();
  const credentials = configCredentials(options.loaded.config, {
    ...(options.vault ? { vault: options.vault } : {}),
    ...(options.env ? { env: options.env } : {}),
    onSecret: (s) => void redactor.addSecret(s),
  });
  const gate = approvalGate(options);
  // Policies are checked at start: a broken file stops the gateway with its FILE:LINE:COL.
  const policy = configPolicy(options.loaded, options.ledger, options.upstreams?.actions ?? []);
  const audit = auditOptions(options);
  // SSH hosts and actions: keys and secret_env values come from the vault at attempt time.
  const ssh = configSsh(options.loaded.config, {
    ...(options.vault ? { vault: options.vault } : {}),
    onSecret: (s) => void redactor.addSecret(s),
  });
  const runtime = createRuntime({
    // Continuations carrying secret inputs are recognised by every gateway opening this vault.
    ...(options.vault ? { secretDigestKey: options.vault.continuationKey() } : {}),
    ledger: options.ledger,
    // A single gateway is the same owner across restarts: it takes its own operations back
    // (continuations, reconcile, recover). A fleet member is one process among several, so each
    // process is its own owner and takes others' operations over only when their lease lapses.
    ...(options.loaded.config.fleet ? {} : { owner: stableOwner(options.loaded) }),
    credentials,
    redactor,
    agent: options.agent ?? 'candor',
    ...(gate ? { gate: options.wrapGate ? options.wrapGate(gate) : gate } : {}),
    ...(policy ? { policy } : {}),
    ...(audit ? { audit } : {}),
    ...(ssh ? { ssh } : {}),
    ...(options.upstreams ? { transports: { mcp: options.upstreams.transport } } : {}),
    // Every gateway holds an ownership lease while it has a session (src/engine/ownership.ts): a
    // fleet member so others take its operations over when it stalls; a lone gateway so that a
    // `candor recover` run from another configuration on the same ledger leaves its operations
    // alone while it lives (its restart is the same owner and takes them back at once).
    lease: options.loaded.config.fleet ? { ttl_ms: options.loaded.config.fleet.lease_ms } : {},
    ...(options.telemetry ? { telemetry: options.telemetry } : {}),
    // Registered up front so that recovery and reconciliation of older operations find them.
    actions: [...options.loaded.actions, ...(options.upstreams?.actions ?? [])].map(
      (a) => a.definition,
    ),
  });
  return { runtime, redactor, approvals: gate && 'shutdown' in gate ? gate : null };
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
      // A checkpoint stored during a call (before a sensitive action) becomes a span event there.
      onCheckpoint: (event) => traceEvents([event]),
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
    requestTimeoutMs: spec.witness_timeout_ms,
    maxAnswerBytes: spec.witness_max_answer_bytes,
  };
}

/** The approval gate from the `approvals:` section; without it, a gate that only watches the lock. */
function approvalGate(options: ComposeOptions): ApprovalGate | Gate | null {
  const spec = options.loaded.config.approvals;
  // Both locks hold: `candor vault lock` and `candor approve lock`.
  const dir =
    spec?.dir ?? (options.loaded.dir ? defaultApprovalsDir(options.loaded.dir) : undefined);
  const lock = options.vault ? anyLock(vaultLock(options.vault), lockFile(dir)) : lockFile(dir);
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
  // The client of the call being served is asked only when it can be (the MCP gateway decides:
  // form elicitation on a 2025-era connection that declared it); anyone else gets the console queue.
  const client = options.clientApprover;
  const approver: Approver =
    spec.approver === 'elicitation' && client
      ? {
          name: 'elicitation_or_console',
          ask: (card, ask) =>
            client.available() ? client.approver.ask(card, ask) : fallback.ask(card, ask),
        }
      : fallback;
  const hook = spec.webhook;
  let notified = approver;
  if (hook) {
    const secret = (options.env ?? process.env)[hook.secret.slice('env:'.length)];
    if (!secret)
      throw new Error(`approvals.webhook.secret: ${hook.secret} is not set (the signing secret)`);
    notified = notifyingApprover(
      approver,
      createWebhookNotifier({
        url: hook.url,
        secret,
        slack: hook.slack,
        attempts: hook.attempts,
        timeout_ms: hook.timeout_ms,
        max_answer_bytes: hook.max_answer_bytes,
        ...(options.log ? { log: options.log } : {}),
      }),
    );
  }
  return createApprovalGate({
    ledger: options.ledger,
    approver: notified,
    policy: policy.value,
    lock,
    ...(spec.wait_ms !== undefined ? { wait_ms: spec.wait_ms } : {}),
    requested_via: options.requested_via ?? 'agent',
  });
}

/**
 * The owner id of a gateway that is not part of a fleet: the same for every process started from
 * this configuration file on this host against this ledger, so a restart keeps ownership.
 */
export function stableOwner(loaded: Pick<LoadedConfig, 'file' | 'config'>): string {
  const digest = createHash('sha256')
    .update(`${resolve(loaded.file)}\n${loaded.config.ledger}`)
    .digest('hex')
    .slice(0, 12);
  return `gateway:${hostname()}:${digest}`;
}
