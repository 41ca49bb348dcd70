// The MCP gateway: configured actions become tools whose results are Candor envelopes.
//   - A failed action is a result with isError (the envelope says why); never a protocol error.
//   - An unknown tool, malformed arguments or misuse the runtime refuses (UsageError: changed
//     request, unknown operation id) is a protocol error InvalidParams with the reason.
//   - Our own faults are InternalError: the client is never blamed for a server fault.
//   - A cancelled call aborts the action's signal; the runtime still writes attempt_finished with
//     what was dispatched, so operation_status / list_unresolved_operations report it later.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { ConfiguredAction } from '../config/actions.js';
import { envelopeSchema, type Envelope } from '../core/envelope.js';
import { UsageError, type Runtime } from '../engine/runtime.js';
import type { OperationView } from '../ledger/projection.js';
import type { LedgerStore } from '../ledger/store.js';
import {
  actionTool,
  BUILTIN,
  builtinTools,
  noArgsSchema,
  OPERATION_ID_PATTERN,
  operationArgsSchema,
} from './tools.js';

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
  /** Told about every MCP server created (e.g. to ask its client for approvals by elicitation). */
  onServer?: (server: Server) => void;
}

export interface Gateway {
  readonly tools: readonly Tool[];
  /** A new MCP Server bound to this gateway (one for stdio; one per stateless HTTP request). */
  createServer(): Server;
  /** Calls a tool directly (the same path as tools/call); throws McpError for protocol errors. */
  callTool(
    name: string,
    args: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<CallToolResult>;
  /** Resolves once no tool call is in flight (their ledger records are written). */
  idle(): Promise<void>;
}

const INSTRUCTIONS =
  'Every tool returns a Candor result envelope. Never repeat a call whose result was outcome_unknown ' +
  'as a new call: follow `retry` (reconcile_first -> reconcile_operation; allowed -> the same call ' +
  'with operation_id). Use list_unresolved_operations after a cancelled call or a restart.';

function invalid(message: string): McpError {
  return new McpError(ErrorCode.InvalidParams, message);
}

export function resultOf(envelope: Envelope): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(envelope) }],
    structuredContent: envelope,
    isError: !envelope.ok,
  };
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

  const parseArgs = <T>(
    schema: {
      safeParse(
        v: unknown,
      ):
        | { success: true; data: T }
        | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } };
    },
    tool: string,
    args: unknown,
  ): T => {
    const r = schema.safeParse(args);
    if (r.success) return r.data;
    const issue = r.error.issues[0];
    const where = issue?.path.map(String).join('.') || '(arguments)';
    throw invalid(`invalid arguments for ${tool}: ${where}: ${issue?.message ?? 'invalid'}`);
  };

  async function status(operationId: string): Promise<Envelope> {
    const found = await runtime.status(operationId);
    if (!found) throw invalid(`no operation ${operationId} in the ledger`);
    return { ...found.envelope, data: statusData(found.view) };
  }

  async function listUnresolved(): Promise<Envelope> {
    const operations: Array<Record<string, unknown>> = [];
    for (const id of await ledger.unresolved()) {
      const found = await runtime.status(id);
      if (!found) continue;
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
      retry: 'never',
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
  ): Promise<Envelope> {
    const { operation_id: opId, ...input } = args;
    if (opId !== undefined && (typeof opId !== 'string' || !OPERATION_ID_PATTERN.test(opId)))
      throw invalid(
        `invalid arguments for ${action.definition.name}: operation_id: an operation id looks like op_…`,
      );
    return runtime.run(action.definition, input, {
      ...(signal ? { signal } : {}),
      ...(typeof opId === 'string' ? { operationId: opId } : {}),
    });
  }

  async function dispatch(
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal | undefined,
  ): Promise<Envelope> {
    switch (name) {
      case BUILTIN.operation_status:
        return status(parseArgs(operationArgsSchema, name, args).operation_id);
      case BUILTIN.reconcile_operation: {
        const { operation_id } = parseArgs(operationArgsSchema, name, args);
        return runtime.reconcile(operation_id, signal ? { signal } : {});
      }
      case BUILTIN.list_unresolved_operations:
        parseArgs(noArgsSchema, name, args);
        return listUnresolved();
    }
    const action = actions.get(name);
    if (!action) throw invalid(`unknown tool "${name}"`);
    return runAction(action, args, signal);
  }

  async function callTool(
    name: string,
    args: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<CallToolResult> {
    const work = dispatch(name, args, signal);
    inflight.add(work);
    let envelope: Envelope;
    try {
      envelope = await work;
    } catch (error) {
      if (error instanceof McpError) throw error;
      if (error instanceof UsageError) throw invalid(error.message);
      log(
        `candor serve: internal error in ${name}: ${redact(error instanceof Error ? (error.stack ?? error.message) : String(error))}`,
      );
      throw new McpError(
        ErrorCode.InternalError,
        'internal error in the gateway; whatever was dispatched is recorded in the ledger (see list_unresolved_operations)',
      );
    } finally {
      inflight.delete(work);
    }
    const checked = envelopeSchema.safeParse(envelope);
    if (!checked.success) {
      log(
        `candor serve: ${name} produced an invalid envelope: ${checked.error.issues[0]?.message ?? ''}`,
      );
      throw new McpError(
        ErrorCode.InternalError,
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
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }));
      server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
        callTool(request.params.name, request.params.arguments ?? {}, extra.signal),
      );
      options.onServer?.(server);
      return server;
    },
    async idle() {
      while (inflight.size > 0) await Promise.allSettled([...inflight]);
    },
  };
}
