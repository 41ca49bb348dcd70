// The MCP gateway: configured actions become tools whose results are Candor envelopes. Built on the
// v2 SDK's low-level Server, which speaks both protocol eras: 2026-07-28 (`server/discover`, no
// `initialize`) and 2025-11-25 / 2025-06-18 / 2025-03-26 (`initialize`), negotiated per connection.
//   - Every tools/call of a known tool answers with one envelope: a failed action, invalid
//     arguments (`invalid_input`, naming the field) and misuse the runtime refuses are results with
//     isError; never a protocol error. Only an unknown tool name is a protocol error.
//   - Our own faults are InternalError: the client is never blamed for a server fault.
//   - The text mirror opens with one line a model cannot mistake (what happened, what to do next),
//     then the JSON envelope: some frameworks hand an isError result to the model like a success.
//   - A cancelled call aborts the action's signal; the runtime still writes attempt_finished with
//     what was dispatched, so operation_status / list_unresolved_operations report it later.
//   - Approvals: the call runs inside a context that says how its client can be asked (form
//     elicitation on a 2025-era connection that declared it, else nobody: the console queue).
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  ProtocolError,
  ProtocolErrorCode,
  Server,
  type CallToolResult,
  type ElicitRequestFormParams,
  type ElicitResult,
  type ServerContext,
  type Tool,
} from '@modelcontextprotocol/server';
import type { ConfiguredAction } from '../config/actions.js';
import { envelopeSchema, type Envelope } from '../core/envelope.js';
import { outcomeOf, retryOf } from '../core/rule-table.js';
import { headline } from '../core/headline.js';
import { UsageError, type Runtime } from '../engine/runtime.js';
import { errorText, isLedgerFault } from '../ledger/ledger-error.js';
import { UNRESOLVED_STATES, type OperationView } from '../ledger/projection.js';
import type { LedgerStore } from '../ledger/store.js';
import { duplicateGuard } from './duplicate-guard.js';
import { actionTool, BUILTIN, builtinTools, noArgsSchema, operationArgsSchema } from './tools.js';
import { OPERATION_ID_PATTERN } from '../core/ids.js';
import { localCaller, type Caller } from '../core/caller.js';
import { currentPrincipal } from '../auth/context.js';

/** How the client of the call in progress can be asked for an approval. */
export interface CallContext {
  /** Set when the client offered form elicitation on a 2025-era connection. */
  elicit: ((params: ElicitRequestFormParams, signal: AbortSignal) => Promise<ElicitResult>) | null;
  /** Who asked: the authenticated HTTP caller, else the gateway's local operator. */
  caller?: Caller;
}

/** The context of the tools/call being served (read by the approver through `currentCall()`). */
const callStore = new AsyncLocalStorage<CallContext>();
export const currentCall = (): CallContext | undefined => callStore.getStore();

/** The first protocol revision of the modern era (no `initialize`, no server-to-client requests). */
const MODERN_ERA = '2026-07-28';

export interface GatewayOptions {
  runtime: Runtime;
  ledger: LedgerStore;
  actions: readonly ConfiguredAction[];
  name?: string;
  version?: string;
  /** Where server-side faults are reported for the operator (stderr); already redacted. */
  log?: (line: string) => void;
  /** Redacts text before it is logged. */
  redact?: (text: string) => string;
  /** The caller of calls no request authenticated (default: the local operating-system user). */
  localCaller?: Caller;
}

export interface Gateway {
  readonly tools: readonly Tool[];
  /** A new MCP Server bound to this gateway (one per stdio connection, HTTP session or request). */
  createServer(): Server;
  /** Calls a tool directly (the same path as tools/call); throws ProtocolError for an unknown tool. */
  callTool(
    name: string,
    args: Record<string, unknown>,
    signal?: AbortSignal,
    call?: CallContext,
  ): Promise<CallToolResult>;
  /** Resolves once no tool call is in flight (their ledger records are written). */
  idle(): Promise<void>;
}

const INSTRUCTIONS =
  'Every tool returns a Candor result envelope. Never repeat a call whose result was outcome_unknown ' +
  'as a new call: follow `retry` (reconcile_first -> reconcile_operation; allowed -> the same call ' +
  'with operation_id). Use list_unresolved_operations after a cancelled call or a restart.';

/** Arguments that break a tool's input schema: reported as an `invalid_input` envelope. */
interface InvalidInput {
  field: string;
  problem: string;
  /** The operation the call named, when it named a well-formed one: the refusal describes it. */
  operationId: string | null;
}

/** Arguments checked against a schema: the parsed value, or the first field that broke it. */
type Checked<T> =
  { ok: true; value: T; failure?: never } | { ok: false; failure: InvalidInput; value?: never };

/** What serving a call produced: an envelope, or arguments refused before anything ran. */
type Served = Checked<Envelope>;

const served = async (envelope: Promise<Envelope>): Promise<Served> => ({
  ok: true,
  value: await envelope,
});

/** The result of a tool call: the text mirror opens with core/headline.ts's line, then the JSON. */
export function resultOf(envelope: Envelope): CallToolResult {
  return {
    content: [{ type: 'text', text: `${headline(envelope)}\n${JSON.stringify(envelope)}` }],
    structuredContent: envelope,
    isError: !envelope.ok,
  };
}

/**
 * The ledger failed while serving (a corrupt file, a full disk, a lost database): this call may not
 * be recorded, and nothing here can say whether a request left. The agent is told to stop, not that
 * the ledger holds the answer.
 */
function ledgerFaultEnvelope(tool: string, operationId: string | null, error: unknown): Envelope {
  return personMustCheck(
    tool,
    operationId,
    `The ledger is broken (${errorText(error)}): this call may not be recorded and whether anything reached the destination is not known here; a person must check the ledger (candor audit verify) before anything is retried.`,
    null,
  );
}

/** Nothing here can say whether the effect exists: outcome unknown, and a person decides. */
function personMustCheck(
  tool: string,
  operationId: string | null,
  message: string,
  data: Record<string, unknown> | null,
): Envelope {
  const row = outcomeOf('unknown_person_decides');
  return {
    ok: false,
    category: row.category,
    operation: tool,
    operation_id: operationId,
    retry: row.retry,
    remote_effect: row.remote_effect,
    correlation_id: null,
    message,
    data,
    diagnostics_ref: null,
  };
}

function invalidInputEnvelope(tool: string, invalid: InvalidInput): Envelope {
  const row = outcomeOf('invalid_input');
  return {
    ok: false,
    category: row.category,
    operation: tool,
    operation_id: invalid.operationId,
    retry: row.retry,
    remote_effect: row.remote_effect,
    correlation_id: null,
    message: `The arguments for ${tool} are invalid (${invalid.field}: ${invalid.problem}); nothing was sent.`,
    data: { field: invalid.field, problem: invalid.problem },
    diagnostics_ref: null,
  };
}

/**
 * An operation id this gateway's ledger does not hold (another gateway's ledger, a ledger moved or
 * reset, or a mistyped id): this call sent nothing, and nothing here can say whether an earlier call
 * under that id applied its effect — never "not applied".
 */
function unknownOperationEnvelope(tool: string, operationId: string): Envelope {
  return personMustCheck(
    tool,
    operationId,
    `This gateway's ledger holds no operation ${operationId}, so this call sent nothing; whether an earlier call under that id applied its effect cannot be known here (is it another gateway's ledger, or was the ledger moved or reset?): a person must check before anything is called again.`,
    {
      refusal: {
        code: 'unknown_operation',
        detail: `no operation ${operationId} in this gateway's ledger`,
      },
    },
  );
}

/** A form-capable client: `elicitation: {}` (2025-06-18 form default) or `elicitation.form`. */
function offersForm(server: Server): boolean {
  const e = server.getClientCapabilities()?.elicitation as Record<string, unknown> | undefined;
  if (!e) return false;
  return Object.keys(e).length === 0 || e['form'] !== undefined;
}

function statusData(view: OperationView): Record<string, unknown> {
  return {
    state: view.state,
    attempts: view.attempts.length,
    last_dispatch_state: view.attempts.at(-1)?.finish?.dispatch_state ?? null,
    observations: view.observations.length,
  };
}

export function createGateway(options: GatewayOptions): Gateway {
  const { runtime, ledger } = options;
  const redact = options.redact ?? ((s: string) => s);
  const log = options.log ?? (() => undefined);
  const actions = new Map(options.actions.map((a) => [a.definition.name, a]));
  for (const a of options.actions) runtime.register(a.definition);
  const tools: Tool[] = [...options.actions.map(actionTool), ...builtinTools()];
  const inflight = new Set<Promise<unknown>>();
  const guard = duplicateGuard(runtime, ledger);
  const defaultCaller = options.localCaller ?? localCaller();

  const parseArgs = <T>(
    schema: {
      safeParse(
        v: unknown,
      ):
        | { success: true; data: T }
        | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } };
    },
    args: unknown,
  ): Checked<T> => {
    const r = schema.safeParse(args);
    if (r.success) return { ok: true, value: r.data };
    const issue = r.error.issues[0];
    const where = issue?.path.map(String).join('.') || '(arguments)';
    return {
      ok: false,
      failure: { field: where, problem: issue?.message ?? 'invalid', operationId: null },
    };
  };

  async function status(operationId: string): Promise<Envelope> {
    const found = await runtime.status(operationId);
    if (!found) return unknownOperationEnvelope(BUILTIN.operation_status, operationId);
    return { ...found.envelope, data: statusData(found.view) };
  }

  /**
   * A refused call that names an operation describes the operation (its state, remote effect and
   * next step), with the reason as a refusal code: arguments that break the schema say nothing about
   * what earlier calls of that operation did.
   */
  async function refusedCall(
    tool: string,
    operationId: string,
    code: string,
    detail: string,
    extra: Record<string, unknown> = {},
  ): Promise<Envelope> {
    const found = await runtime.status(operationId);
    if (!found) return unknownOperationEnvelope(tool, operationId);
    const e = found.envelope;
    const data = e.data && typeof e.data === 'object' ? (e.data as Record<string, unknown>) : {};
    return {
      ...e,
      message: `This call was refused and sent nothing (${detail}). ${e.message}`,
      data: { ...data, ...extra, refusal: { code, detail } },
    };
  }

  async function listUnresolved(): Promise<Envelope> {
    const operations: Array<Record<string, unknown>> = [];
    for (const id of await ledger.unresolved()) {
      const found = await runtime.status(id);
      // Resolved between the two reads (another gateway's reconciliation, a late answer): its
      // status is read after the list, so it is settled, not unresolved, and is not listed.
      if (!found || found.view.state === null || !UNRESOLVED_STATES.has(found.view.state)) continue;
      const e = found.envelope;
      operations.push({
        operation_id: id,
        operation: e.operation,
        state: found.view.state,
        category: e.category,
        retry: e.retry,
        remote_effect: e.remote_effect,
        correlation_id: e.correlation_id,
      });
    }
    return {
      ok: true,
      category: 'succeeded',
      operation: BUILTIN.list_unresolved_operations,
      operation_id: null,
      // Listing is a local read of the ledger: nothing remote happened, nothing to repeat.
      retry: retryOf('ledger_listing'),
      remote_effect: 'none',
      correlation_id: null,
      message:
        operations.length === 0
          ? 'No operation is unresolved.'
          : `${operations.length} operation(s) are unresolved; check each with operation_status or reconcile_operation.`,
      data: { operations },
      diagnostics_ref: null,
    };
  }

  async function runAction(
    action: ConfiguredAction,
    args: Record<string, unknown>,
    signal: AbortSignal | undefined,
    caller: Caller | undefined,
  ): Promise<Served> {
    const { operation_id: opId, ...input } = args;
    if (opId !== undefined && (typeof opId !== 'string' || !OPERATION_ID_PATTERN.test(opId))) {
      return {
        ok: false,
        failure: {
          field: 'operation_id',
          problem: 'an operation id looks like op_…',
          operationId: null,
        },
      };
    }
    // Checked here as well as in the runtime, to name the field without a raw schema dump.
    const parsed = action.definition.input.safeParse(input);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return {
        ok: false,
        failure: {
          field: issue?.path.map(String).join('.') || '(arguments)',
          problem: issue?.message ?? 'invalid',
          operationId: typeof opId === 'string' ? opId : null,
        },
      };
    }
    const run = (operationId?: string) =>
      runtime.run(action.definition, input, {
        ...(signal ? { signal } : {}),
        ...(operationId !== undefined ? { operationId } : {}),
        ...(caller ? { caller } : {}),
      });
    // A continuation is the same operation's request: the guard is for new calls only.
    if (typeof opId === 'string') return served(run(opId));
    return served(
      guard.run(
        action,
        input,
        () => run(),
        (operationId) => run(operationId),
        caller ? { caller } : {},
      ),
    );
  }

  async function dispatch(
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal | undefined,
    caller: Caller | undefined,
  ): Promise<Served> {
    switch (name) {
      case BUILTIN.operation_status: {
        const a = parseArgs(operationArgsSchema, args);
        return a.ok ? served(status(a.value.operation_id)) : a;
      }
      case BUILTIN.reconcile_operation: {
        const a = parseArgs(operationArgsSchema, args);
        return a.ok ? served(runtime.reconcile(a.value.operation_id, signal ? { signal } : {})) : a;
      }
      case BUILTIN.list_unresolved_operations: {
        const a = parseArgs(noArgsSchema, args);
        return a.ok ? served(listUnresolved()) : a;
      }
    }
    const action = actions.get(name);
    if (!action) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown tool "${name}"`);
    return runAction(action, args, signal, caller);
  }

  /**
   * A call that threw: a protocol error passes through; misuse the runtime refuses and a broken
   * ledger are answered as envelopes; anything else is our own fault (InternalError).
   */
  async function thrown(
    name: string,
    args: Record<string, unknown>,
    error: unknown,
  ): Promise<CallToolResult> {
    if (error instanceof ProtocolError) throw error;
    if (error instanceof UsageError) {
      // Misuse the runtime refuses (an unknown operation id, a placeholder for a secret): the
      // call is refused before any byte, as an envelope the agent can act on — about the
      // operation when it names one.
      const id = typeof args['operation_id'] === 'string' ? args['operation_id'] : null;
      if (id !== null && error.code === 'unknown_operation')
        return resultOf(unknownOperationEnvelope(name, id));
      if (id !== null) return resultOf(await refusedCall(name, id, error.code, error.message));
      return resultOf(
        invalidInputEnvelope(name, {
          field: '(arguments)',
          problem: error.message,
          operationId: null,
        }),
      );
    }
    if (isLedgerFault(error)) {
      // One line for the operator, no stack and no driver class name.
      log(
        `candor serve: the ledger is broken (during ${name}): ${redact(errorText(error))}; run \`candor audit verify\``,
      );
      const id = typeof args['operation_id'] === 'string' ? args['operation_id'] : null;
      return resultOf(ledgerFaultEnvelope(name, id, error));
    }
    log(
      `candor serve: internal error in ${name}: ${redact(error instanceof Error ? (error.stack ?? error.message) : String(error))}`,
    );
    throw new ProtocolError(
      ProtocolErrorCode.InternalError,
      'internal error in the gateway; whatever was dispatched is recorded in the ledger (see list_unresolved_operations)',
    );
  }

  async function callTool(
    name: string,
    args: Record<string, unknown>,
    signal?: AbortSignal,
    call: CallContext = { elicit: null },
  ): Promise<CallToolResult> {
    const work = callStore.run(call, () => dispatch(name, args, signal, call.caller));
    inflight.add(work);
    let envelope: Envelope;
    try {
      let answer: Served;
      try {
        answer = await work;
      } catch (error) {
        return await thrown(name, args, error);
      }
      if (!answer.ok) {
        // Arguments refused before anything ran: the call's answer, not a fault (still in flight
        // while the refusal reads the operation it names).
        const invalid = answer.failure;
        return resultOf(
          invalid.operationId === null
            ? invalidInputEnvelope(name, invalid)
            : await refusedCall(
                name,
                invalid.operationId,
                'invalid_input',
                `the arguments are invalid: ${invalid.field}: ${invalid.problem}`,
                { field: invalid.field, problem: invalid.problem },
              ),
        );
      }
      envelope = answer.value;
    } finally {
      inflight.delete(work);
    }
    const checked = envelopeSchema.safeParse(envelope);
    if (!checked.success) {
      log(
        `candor serve: ${name} produced an invalid envelope: ${checked.error.issues[0]?.message ?? ''}`,
      );
      throw new ProtocolError(
        ProtocolErrorCode.InternalError,
        'internal error: the gateway produced an invalid result',
      );
    }
    return resultOf(envelope);
  }

  return {
    tools,
    callTool,
    createServer() {
      const server = new Server(
        { name: options.name ?? 'candor', version: options.version ?? '0.0.0' },
        { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS },
      );
      server.setRequestHandler('tools/list', () => Promise.resolve({ tools }));
      server.setRequestHandler('tools/call', (request, ctx: ServerContext) => {
        const legacy = (server.getNegotiatedProtocolVersion() ?? MODERN_ERA) < MODERN_ERA;
        const call: CallContext = {
          caller: currentPrincipal()?.caller ?? defaultCaller,
          elicit:
            legacy && offersForm(server)
              ? (params, signal) => ctx.mcpReq.elicitInput(params, { signal })
              : null,
        };
        return callTool(
          request.params.name,
          request.params.arguments ?? {},
          ctx.mcpReq.signal,
          call,
        );
      });
      return server;
    },
    async idle() {
      while (inflight.size > 0) await Promise.allSettled([...inflight]);
    },
  };
}
