// Actions: a declared contract per side effect. The class, idempotency and reconciliation
// declarations — not the HTTP method — decide what may be repeated (DESIGN.md §1).
import type { z } from 'zod';
import type { FiveXxMeaning } from '../core/evidence.js';
import type { ActionClass } from '../core/vocabulary.js';
import type { HttpTimeouts } from '../http/transport.js';
import type { SshDeclaration } from './ssh-action.js';

export interface RequestContext {
  operation_id: string;
  correlation_id: string;
  idempotency_key: string | null;
}

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
}

export interface Destination {
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
  /** Set for SSH actions (see ssh-action.ts): dispatch over SSH under the marker protocol. */
  ssh?: SshDeclaration;
  /** The documented "not applied" failure body, if the destination has one. */
  failure_body?: z.ZodType;
}

export interface ActionDefinition<I = unknown, O = unknown> {
  name: string;
  class: ActionClass;
  /** A short noun for messages, e.g. "the deployment". */
  subject: string;
  input: z.ZodType<I>;
  request(input: I, ctx: RequestContext): HttpRequestSpec;
  /** The response contract: a body that fails it is `malformed_response`, never a guess. */
  response: z.ZodType<O>;
  /** Target-assigned reference from a valid response (e.g. its id). */
  remoteRef?(data: O): string | null;
  /** Structured subject reference for the intent, e.g. `account:A-17`. */
  subjectRef?(input: I): string | null;
  destination: Destination;
  timeouts?: Partial<HttpTimeouts>;
  /** Attempts the engine may make on its own (default 3). */
  attempt_budget?: number;
}

export function defineAction<I, O>(definition: ActionDefinition<I, O>): ActionDefinition<I, O> {
  if (!/^[a-z][a-z0-9_]{0,63}$/.test(definition.name)) {
    throw new TypeError(`action name "${definition.name}" must be snake_case (a-z, 0-9, _)`);
  }
  return Object.freeze({ ...definition });
}

/** The contract for classify(), derived from the action's declarations. */
export function contractOf(action: ActionDefinition<never, never> | ActionDefinition): {
  action_class: ActionClass;
  idempotency_honoured: boolean;
  reconciliation: boolean;
  five_xx: FiveXxMeaning;
} {
  return {
    action_class: action.class,
    idempotency_honoured: action.destination.idempotency?.honoured === true,
    // SSH: the marker (or a set-state check) can always be looked up, except for plain reads.
    reconciliation: action.destination.ssh
      ? action.class !== 'read'
      : action.destination.reconciliation !== undefined,
    five_xx: action.destination.five_xx ?? 'unknown',
  };
}
