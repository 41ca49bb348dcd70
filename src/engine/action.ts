// Actions: a declared contract per side effect. The class, idempotency and reconciliation
// declarations — not the HTTP method — decide what may be repeated (DESIGN.md §1).
import type { z } from 'zod';
import type { FiveXxMeaning } from '../core/evidence.js';
import type { ActionClass } from '../core/vocabulary.js';
import type { HttpTimeouts } from '../core/transport.js';

export interface RequestContext {
  operation_id: string;
  correlation_id: string;
  idempotency_key: string | null;
}

/** An SSH action's request: the command text (secrets only as "$NAME" from `secret_env`). */
export interface SshRequestSpec {
  command: string;
}

/** An upstream MCP tool call: the upstream tool's own arguments. */
export interface McpRequestSpec {
  arguments: Record<string, unknown>;
}

/** What an action's request function returns: HTTP for HTTP destinations, a command for SSH. */
export type RequestSpec = HttpRequestSpec | SshRequestSpec | McpRequestSpec;

export interface HttpRequestSpec {
  method: string;
  /** Path and query, relative to the destination origin. */
  path: string;
  headers?: Record<string, string>;
  /** JSON-serialisable body. */
  body?: unknown;
}

export interface IdempotencyDeclaration {
  /** Header that carries the key, e.g. `Idempotency-Key`. */
  header: string;
  /** The destination documents and honours the key (replays instead of re-executing). */
  honoured: boolean;
  /** How long the destination keeps keys; a retry after that is not covered. */
  retention_ms: number;
}

export interface ReconciliationDeclaration {
  /**
   * A lookup that finds remote records by correlation id or client reference (a read). `input` is
   * the operation's recorded input (as stored in the ledger), so a new process can reconcile too.
   */
  lookup(ctx: RequestContext, input: unknown): HttpRequestSpec;
  /** Remote references of the records the lookup found (parsed JSON body in). */
  matches(body: unknown, input: unknown): Array<{ ref: string; record: unknown }>;
  /**
   * `list` (default): the body lists the matching records. `one`: a get-by-id — a 2xx body is the
   * record, and a 404 is a negative observation (absent), not a failed lookup.
   */
  shape?: 'list' | 'one';
  /** The lookup's route as declared (method and path template), for the observation. */
  route?: string;
  /**
   * The action's identifying fields (binding rule b, lookup-binding.ts): record field (dot path)
   * → the value it must equal, from the operation's recorded input. All must equal. Throws when
   * they cannot be built (the record then binds by rule a only).
   */
  identify?(input: unknown, ctx: RequestContext): Record<string, string>;
  /**
   * The record's creation time (ms since the epoch), or null when it has none or it does not
   * parse. A record older than the operation is not this operation's effect.
   */
  createdAt?(record: unknown): number | null;
  /**
   * The largest lookup answer read, in bytes (default `LOOKUP_MAX_ANSWER_BYTES`, 4 MiB): reading
   * stops past it and the lookup learned nothing (`lookup_answer_too_large`).
   */
  maxAnswerBytes?: number;
}

/** Default cap on a lookup's answer body (`reconcile.max_answer_bytes` in candor.yaml). */
export const LOOKUP_MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/**
 * Where an HTTP action's requests go. `kind` may be left out: HTTP is the default transport, and
 * `defineAction` fills it in.
 */
export interface HttpDestination {
  kind?: 'http';
  /** `http://host:port` */
  origin: string;
  /** Where credentials come from, e.g. `vault:deploy-prod`. Never a credential. */
  authority_ref: string;
  /** Route template for the ledger (no ids), e.g. `POST /v1/deployments`. */
  route_template?: string;
  idempotency?: IdempotencyDeclaration;
  reconciliation?: ReconciliationDeclaration;
  /** What a 5xx means here (default: unknown). */
  five_xx?: FiveXxMeaning;
  /** The documented "not applied" failure body, if the destination has one. */
  failure_body?: z.ZodType;
}

/**
 * Where an SSH action's command runs (see ssh-action.ts): an inventory host, under the marker
 * protocol. The remote marker (or, for set_state, the convergence check) is its lookup.
 */
export interface SshDestination {
  kind: 'ssh';
  host_ref: string;
  /** `ssh:<host_ref>`: the key is resolved by the SSH transport, never a credential header. */
  authority_ref: string;
  route_template?: string;
  /** set_state: a command that exits 0 exactly when the desired state holds. */
  check?: (input: unknown) => string;
  /** Secret environment for the command and the check (see SshActionSpec.secret_env). */
  secret_env?: (input: unknown) => Record<string, string>;
  /** Secret environment variables whose values are vault references, resolved at attempt time. */
  secret_refs?: Readonly<Record<string, string>>;
  deadline_ms: number;
}

/**
 * An upstream MCP server's tool (a proxied tool, src/upstream). Its reconciliation is a mapped
 * read tool of the same upstream, called with arguments built from the operation's input.
 */
export interface McpDestination {
  kind: 'mcp';
  /** The upstream's name in the configuration. */
  upstream: string;
  /** The upstream's own tool name. */
  tool: string;
  /** `mcp:<upstream>`: the upstream's secrets live in its connection, never in a request. */
  authority_ref: string;
  route_template?: string;
  deadline_ms: number;
  reconciliation?: McpReconciliation;
}

export interface McpReconciliation {
  /** The upstream read tool that finds the effect. */
  tool: string;
  /** Its arguments, from the operation's recorded input. Throws when they cannot be built. */
  arguments(input: unknown): Record<string, unknown>;
  /**
   * How many effects the lookup's answer shows (0, 1, 2+) and their references; null when the
   * answer cannot be read (the lookup then learned nothing).
   */
  matches(
    reply: { content: unknown[]; structuredContent?: unknown; isError: boolean },
    input: unknown,
  ): Array<{ ref: string; record: unknown }> | null;
}

/** Where an action's requests go, tagged by the transport that carries them. */
export type Destination = HttpDestination | SshDestination | McpDestination;

/** The request spec an action of a destination kind builds. */
export type RequestFor<D extends Destination> = D extends SshDestination
  ? SshRequestSpec
  : D extends McpDestination
    ? McpRequestSpec
    : HttpRequestSpec;

/**
 * A declared action. `D` is its destination: HTTP by default (`defineAction`), SSH for
 * `defineSshAction`; code that takes any action uses `EngineAction`.
 */
export interface ActionDefinition<
  I = unknown,
  O = unknown,
  D extends Destination = HttpDestination,
> {
  name: string;
  class: ActionClass;
  /** A short noun for messages, e.g. "the deployment". */
  subject: string;
  input: z.ZodType<I>;
  request(input: I, ctx: RequestContext): RequestFor<D>;
  /** The response contract: a body that fails it is `malformed_response`, never a guess. */
  response: z.ZodType<O>;
  /** Target-assigned reference from a valid response (e.g. its id). */
  remoteRef?(data: O): string | null;
  /** Structured subject reference for the intent, e.g. `account:A-17`. */
  subjectRef?(input: I): string | null;
  destination: D;
  timeouts?: Partial<HttpTimeouts>;
  /** Attempts the engine may make on its own (default 3). */
  attempt_budget?: number;
}

/** An action of any destination kind (what the engine runs). */
export type EngineAction<I = unknown, O = unknown> = ActionDefinition<I, O, Destination>;

export function defineAction<I, O, D extends Destination = HttpDestination>(
  definition: ActionDefinition<I, O, D>,
): ActionDefinition<I, O, D> {
  if (!/^[a-z][a-z0-9_]{0,63}$/.test(definition.name)) {
    throw new TypeError(`action name "${definition.name}" must be snake_case (a-z, 0-9, _)`);
  }
  const destination =
    definition.destination.kind === 'ssh' || definition.destination.kind === 'mcp'
      ? definition.destination
      : ({ ...definition.destination, kind: 'http' } as D);
  return Object.freeze({ ...definition, destination });
}

/** An action carried over HTTP (the default transport). */
export function isHttpAction<I, O>(
  action: EngineAction<I, O>,
): action is ActionDefinition<I, O, HttpDestination> {
  const kind = action.destination.kind;
  return kind !== 'ssh' && kind !== 'mcp';
}

/** The HTTP destination of an action, or undefined for other transports. */
export function httpDestination(dest: Destination): HttpDestination | undefined {
  return dest.kind === 'ssh' || dest.kind === 'mcp' ? undefined : dest;
}

/** Whether the destination offers a lookup for reconciliation (an SSH marker or check counts). */
export function hasLookup(action: Pick<EngineAction<never, never>, 'class' | 'destination'>) {
  const dest = action.destination;
  if (dest.kind === 'ssh') return action.class !== 'read';
  return dest.reconciliation !== undefined;
}

/** The contract for classify(), derived from the action's declarations. */
export function contractOf(action: Pick<EngineAction<never, never>, 'class' | 'destination'>): {
  action_class: ActionClass;
  idempotency_honoured: boolean;
  reconciliation: boolean;
  five_xx: FiveXxMeaning;
} {
  const dest = action.destination;
  return {
    action_class: action.class,
    idempotency_honoured: httpDestination(dest)?.idempotency?.honoured === true,
    // SSH: the marker (or a set-state check) can always be looked up, except for plain reads.
    reconciliation: hasLookup(action),
    five_xx: httpDestination(dest)?.five_xx ?? 'unknown',
  };
}
