// The operation runner: write-ahead attempts, honest classification, retry decisions,
// reconciliation and recovery. Every attempt_started is durable before a byte leaves; every outcome
// is classified from evidence; unknown writes are never repeated without a licence.
//
// This file holds the public surface; the work is split by concern: context.ts (shared state),
// operation.ts (open, describe), request.ts + attempt.ts (one attempt), drive.ts (licences, gate,
// retry loop), reconcile.ts + reconcile-ssh.ts (looking at the destination), recover.ts. Bytes
// leave only through the transport port (core/transport.ts); src/runtime.ts composes the default
// transports into `createRuntime`.
import type { Envelope } from '../core/envelope.js';
import { isUsageError } from '../core/errors.js';
import { outcomeOf } from '../core/rule-table.js';
import type { OperationView } from '../ledger/projection.js';
import type { EngineAction } from './action.js';
import { classRule } from '../core/rules.js';
import {
  createEngineContext,
  deferOpening,
  UsageError,
  type AnyAction,
  type EngineOptions,
  type RunOptions,
} from './context.js';
import { changedRequest, changedRequestEnvelope, paramsDigest } from './continuation.js';
import { drive } from './drive.js';
import { envelopeFromView, openOperation, prepareOpening, type Unbuildable } from './operation.js';
import { createLeaseKeeper, ownerHold, takeOver } from './ownership.js';
import type { PreparedAttempt } from './request.js';
import { identifyCall, traced } from './trace.js';
import { operationEnvelope } from './truth.js';
import { reconcileOperation } from './reconcile.js';
import { recover, type RecoveryItem } from './recover.js';
import { admitSshInput, holdsSecretPlaceholder, rememberSshInput } from './ssh-action.js';

export { UsageError, type EngineOptions, type RecoveryItem, type RunOptions };

export interface Runtime {
  /** The process that owns the operations this runtime opens (only it decides their retries). */
  readonly owner: string;
  /** The current session's id; the first call records `session_started`. */
  sessionId(): Promise<string>;
  /** Makes an action known by name (for reconcile, recover and supersede of its operations). */
  register(action: AnyAction): void;
  /**
   * Runs an action: opens an operation (or continues `options.operationId` with the same request),
   * passes the gate, attempts within the licence and budget, and answers with the envelope.
   * Throws `UsageError` only for misuse (input that breaks the schema, someone else's operation).
   */
  run<I, O>(action: EngineAction<I, O>, input: I, options?: RunOptions): Promise<Envelope>;
  /**
   * Opens an operation without dispatching it (the owner commits to an intent), e.g. to delegate
   * its attempts to a worker: `run(action, input, { operationId, worker })`.
   */
  open<I>(action: EngineAction<I, unknown>, input: I, options?: RunOptions): Promise<string>;
  /** Looks the operation's result up at the destination and records what was found. */
  reconcile(operationId: string, options?: { signal?: AbortSignal }): Promise<Envelope>;
  /**
   * Works through every unresolved operation after a restart; one report line each. Operations of
   * other owners are taken over first (`owner_changed`); those of owners with a live lease are
   * left to them. `sweep` (a fleet's periodic pass) leaves this runtime's own operations alone
   * and takes over only owners whose lease has lapsed.
   */
  recover(options?: { sweep?: boolean }): Promise<RecoveryItem[]>;
  /** Runs the operation's action with new input as a new operation that supersedes it. */
  supersede<I>(operationId: string, newInput: I, options?: RunOptions): Promise<Envelope>;
  /**
   * The intent's parameter digest `operation_opened` would record for this input (redacted, then
   * canonical): what the ledger's duplicate guard compares (src/mcp/duplicate-guard.ts).
   */
  paramsDigest(action: AnyAction, input: unknown): string;
  /** The operation's ledger view and the envelope it stands at, or null when unknown. */
  status(operationId: string): Promise<{ view: OperationView; envelope: Envelope } | null>;
  /** Records `session_ended` and issues a checkpoint when audit checkpoints are configured. */
  endSession(reason?: string): Promise<void>;
  /** Closes the runtime's transports (pooled HTTP connections). The ledger is the caller's. */
  close(): Promise<void>;
}

/** The engine over the given transports (`createRuntime` in src/runtime.ts adds the defaults). */
export function createEngine(options: EngineOptions): Runtime {
  const ctx = createEngineContext(options);
  const { clock, ids, owner, actions, append, load } = ctx;
  const keeper = createLeaseKeeper(ctx, options.lease);
  let session: Promise<string> | null = null;

  function sessionId(): Promise<string> {
    session ??= (async () => {
      // A fleet member is alive in the lease table before it owns anything.
      await keeper.hold();
      const id = ids.mint('ses');
      await append([
        {
          kind: 'session_started',
          at: clock.now(),
          session_id: id,
          operation_id: null,
          correlation_id: null,
          data: { owner, instance_id: id, pid: process.pid, agent: options.agent ?? null },
        },
      ]);
      return id;
    })();
    return session;
  }

  const runtime: Runtime = {
    owner,
    sessionId,
    register(action) {
      actions.set(action.name, action);
    },

    async run<I, O>(
      action: EngineAction<I, O>,
      input: I,
      opts: RunOptions = {},
    ): Promise<Envelope> {
      actions.set(action.name, action);
      const data = validInput(action, input);
      // SSH: secret inputs reach the redactor before anything is recorded.
      admitSshInput(ctx.redactor, action, data);
      let view: OperationView | null;
      let runCtx = ctx;
      let firstPrepared: PreparedAttempt | null = null;
      if (opts.operationId !== undefined) {
        view = await load(opts.operationId);
        if (!view)
          throw new UsageError(
            'unknown_operation',
            `no operation ${opts.operationId} in the ledger`,
          );
        // Only ever the same request, in every state: refused before any prompt or byte.
        const changed = changedRequest(ctx, action, data, view);
        if (changed) return changedRequestEnvelope(ctx, action, changed, view);
        // A settled operation answers its settled state, whoever owns it, and sends nothing.
        if (view.state === 'succeeded' || view.state === 'duplicate_effect_confirmed') {
          return operationEnvelope(ctx, action, view, {
            refusal: {
              code: 'already_settled',
              sentence: `This call sent nothing more: operation ${view.operation_id} is already settled.`,
            },
          });
        }
        if (view.owner !== owner && opts.worker === undefined) {
          // Another process's operation: continued only once that owner's lease has lapsed, by
          // taking it over (`owner_changed`, admitted by the store for exactly one gateway).
          const taken = await takeOver(ctx, view, 'run', { keeper, requireLease: true });
          if (!taken.ok) {
            return operationEnvelope(ctx, action, view, {
              refusal: {
                code: 'not_owner',
                sentence: `This gateway sent nothing for this call: operation ${view.operation_id} is ${taken.why}, and only its owner decides a retry.`,
                data: {
                  owner: taken.held?.owner ?? view.owner,
                  owner_lease_until:
                    taken.held?.until != null ? new Date(taken.held.until).toISOString() : null,
                },
              },
              held: taken.held ?? { owner: view.owner ?? 'unknown', until: null },
            });
          }
          view = taken.view;
        }
      } else {
        refuseSecretPlaceholder(action, data);
        const built = await prepareOpening(ctx, action as EngineAction<I, unknown>, data, {
          run: opts,
          sessionId,
        });
        if (!built.ok) return unbuildableEnvelope(action, built.failure);
        const opening = built.value;
        view = opening.view;
        firstPrepared = opening.prepared;
        if (classRule(action.class).sensitive) {
          // A sensitive action's records are checkpointed before it is dispatched: its opening
          // is written now, so the checkpoint covers it.
          await append(opening.events);
        } else {
          // The opening is written with the first attempt_started (one commit), or with the
          // refusal that resolves the operation; whatever happens, before this run returns.
          runCtx = deferOpening(ctx, opening.events).ctx;
        }
      }
      identifyCall(view);
      // SSH: the owner keeps the real input for its reconciliations (engine/ssh-action.ts).
      rememberSshInput(ctx, action, view.operation_id, data);
      let envelope: Envelope;
      try {
        envelope = await drive(runCtx, action, data, { view, opts, firstPrepared });
      } catch (error) {
        await runCtx.recorded().catch(() => undefined);
        throw error;
      }
      await runCtx.recorded();
      // In the background: a slow witness must not hold a call whose answer is settled.
      options.audit?.checkpoints?.maybeLater();
      return envelope;
    },

    async open<I>(
      action: EngineAction<I, unknown>,
      input: I,
      opts: RunOptions = {},
    ): Promise<string> {
      actions.set(action.name, action);
      const data = validInput(action, input);
      refuseSecretPlaceholder(action, data);
      admitSshInput(ctx.redactor, action, data);
      const id = (await openOperation(ctx, action, data, { run: opts, sessionId })).operation_id;
      rememberSshInput(ctx, action, id, data);
      return id;
    },

    async reconcile(operationId, opts = {}) {
      const envelope = await reconcileOperation(ctx, operationId, opts.signal);
      options.audit?.checkpoints?.maybeLater();
      return envelope;
    },

    recover(opts = {}) {
      const sweep = opts.sweep === true;
      return recover(
        ctx,
        async (view) => {
          const taken = await takeOver(ctx, view, sweep ? 'sweep' : 'recovery', {
            keeper,
            requireLease: sweep,
          });
          return taken.ok
            ? { view: taken.view }
            : { view: null, why: taken.why, ...(taken.held ? { held: taken.held } : {}) };
        },
        sweep,
      );
    },

    async supersede(operationId, newInput, opts = {}) {
      const view = await load(operationId);
      if (!view?.action)
        throw new UsageError('unknown_operation', `no operation ${operationId} in the ledger`);
      const action = actions.get(view.action);
      if (!action)
        throw new UsageError('unknown_action', `no action named ${view.action} is registered`);
      return runtime.run(action, newInput, {
        ...opts,
        supersedes: operationId,
      });
    },

    paramsDigest(action, input) {
      return paramsDigest(ctx, action, input);
    },

    async status(operationId) {
      const view = await load(operationId);
      if (!view) return null;
      // The registered action when this runtime knows it: its key, lookup and budget decide the
      // next step exactly as they do for a call with this operation_id (one answer per state).
      const action = actions.get(view.action ?? '') ?? {
        name: view.action ?? 'unknown',
        subject: 'the operation',
      };
      // On a gateway that does not own it, the next step waits for its owner as a call would.
      const settled = view.state === 'succeeded' || view.state === 'duplicate_effect_confirmed';
      const held = settled ? null : await ownerHold(ctx, view, true);
      return { view, envelope: envelopeFromView(ctx, action, view, held) };
    },

    async endSession(reason = 'finished') {
      // A lease taken by a takeover alone (no session yet) is released too.
      if (!session) return keeper.stop();
      const sid = await session;
      await append([
        {
          kind: 'session_ended',
          at: clock.now(),
          session_id: sid,
          operation_id: null,
          correlation_id: null,
          data: { reason },
        },
      ]);
      session = null;
      await options.audit?.checkpoints?.checkpoint();
      await keeper.stop();
    },

    async close() {
      await options.audit?.checkpoints?.idle();
      const transports = Object.values(ctx.transports) as Array<{ close?: () => Promise<void> }>;
      await Promise.all(transports.map((t) => (t.close ? t.close() : Promise.resolve())));
    },
  };

  // Telemetry: one trace per operation call (src/engine/trace.ts), nothing when not configured.
  if (options.telemetry) {
    const run = runtime.run.bind(runtime);
    const reconcile = runtime.reconcile.bind(runtime);
    runtime.run = (action, input, opts) =>
      traced(options.telemetry, action.name, () => run(action, input, opts));
    runtime.reconcile = (operationId, opts) =>
      traced(options.telemetry, 'reconcile', async () => {
        const view = await load(operationId);
        if (view) identifyCall(view);
        return reconcile(operationId, opts);
      });
  }

  return runtime;
}

/** The action's input as its schema parses it; misuse (bad input) is a UsageError naming the field. */
/**
 * A secret input that is the placeholder "[REDACTED]" (a copy of a recorded input) is misuse: the
 * command or check would run with the placeholder. A continuation gets its refusal envelope.
 */
function refuseSecretPlaceholder(action: AnyAction, input: unknown): void {
  if (holdsSecretPlaceholder(action, input))
    throw new UsageError(
      'invalid_input',
      `input for ${action.name}: a secret input is the placeholder "[REDACTED]", not a value`,
    );
}

function validInput<I>(action: EngineAction<I, unknown>, input: I): I {
  const parsed = action.input.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new UsageError(
    'invalid_input',
    `input for ${action.name}: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
  );
}

/**
 * The request function refused this input before anything was opened: an input the action's
 * templates cannot place (`invalid_input`, the agent must change it) or a failing function
 * (`local_failure`, a person must look). Nothing was recorded or sent either way.
 */
function unbuildableEnvelope(action: { name: string; subject: string }, e: Unbuildable): Envelope {
  const misuse = isUsageError(e.cause, 'invalid_input');
  const row = outcomeOf(misuse ? 'invalid_input' : 'request_unbuildable');
  return {
    ok: false,
    category: row.category,
    operation: action.name,
    operation_id: null,
    retry: row.retry,
    remote_effect: row.remote_effect,
    correlation_id: null,
    message: misuse
      ? `The arguments do not fit ${action.name}: ${e.cause.message}; nothing was sent.`
      : `The request for ${action.subject} could not be built (the action's request function failed); nothing was sent and a person must look.`,
    data: null,
    diagnostics_ref: null,
  };
}
