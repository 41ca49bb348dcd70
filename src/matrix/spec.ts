// The matrix file format: each row = operation x injected condition x "remote effect known?" x
// expectations (DESIGN.md §4). `candor schema matrix` prints its JSON Schema.
import { z } from 'zod';
import type { Envelope } from '../core/envelope.js';
import type { EngineAction } from '../engine/action.js';
import { Category, RemoteEffect, Retry, valuesOf } from '../core/vocabulary.js';

const nextAction = z.enum([
  'continue',
  'retry_same_operation',
  'wait_then_retry',
  'reconcile',
  'stop',
  'escalate',
]);

/**
 * SSH conditions, injected through the runtime against the real OpenSSH fixture (see
 * src/matrix/ssh-reference.ts): host inventory variants (closed port, a key the server does not
 * accept, a wrong pinned host key, a cut relay), an AbortSignal fired at a precise remote step, a
 * remote kill, or the remote command's own exit status.
 */
export const SSH_CONDITIONS = [
  'none',
  'connect_refused',
  'auth_rejected',
  'host_key_mismatch',
  'cut_before_exec',
  'cut_after_start',
  'transport_lost_after_start',
  'remote_killed_after_start',
  'cut_after_completion',
  'nonzero_exit',
  'exit_255',
  'already_converged',
] as const;
export type SshCondition = (typeof SSH_CONDITIONS)[number];

/**
 * Injected condition: a fault spec for the fake service (its own schema), a before-bytes variant,
 * or an SSH condition.
 */
export const conditionSchema = z.union([
  z.strictObject({ before_bytes: z.enum(['refused', 'unresolvable', 'blackhole']) }),
  z.strictObject({ none: z.literal(true) }),
  z.strictObject({ ssh: z.enum(SSH_CONDITIONS) }),
  z
    .looseObject({ phase: z.string() })
    .describe('a fault for the fake service; see src/fakes/faults.ts'),
]);

const httpRemoteSchema = z.strictObject({
  kind: z.string().describe('resource kind in the fake service, e.g. deployments'),
  /**
   * Live resources of `kind` whose client_ref is the row's correlation id. Rows on a user's own
   * actions (`--config`): how many writes of the row the service applied (ground truth).
   */
  count: z.number().int().nonnegative().optional(),
  /**
   * Count the live resources whose top-level fields equal these instead (`{{correlation_id}}` is
   * filled), e.g. `{ correlation_id: '{{correlation_id}}' }`: the records this row's requests made.
   */
  where: z.record(z.string(), z.string()).optional(),
  /** A field of the resource created by `setup`, after the row ran. */
  setup_field: z.string().optional(),
  equals: z.unknown().optional(),
  /** Whether the `setup` resource is deleted after the row ran. */
  setup_deleted: z.boolean().optional(),
  /** Children (e.g. notes) of the `setup` resource. */
  child: z.string().optional(),
  child_count: z.number().int().nonnegative().optional(),
});

/** SSH rows: the remote job's own record (its log lines, how often it ran, the marker state). */
const sshRemoteSchema = z.strictObject({
  log: z.array(z.enum(['start', 'done'])).describe('lines the remote command wrote, in order'),
  executions: z.number().int().nonnegative().describe('how many times the command body ran'),
  marker: z.enum(['absent', 'claimed', 'started', 'completed']).optional(),
});

const remoteSchema = z.union([httpRemoteSchema, sshRemoteSchema]);

/** A fault for the fake service's later requests of a row (see `then`). */
const laterFaultSchema = z
  .looseObject({ phase: z.string() })
  .describe('a fault for the fake service; see src/fakes/faults.ts');

/** What the agent is told when it calls the operation again (`again`), and whether anything was sent. */
const againExpectSchema = z.strictObject({
  category: z.enum(valuesOf(Category)),
  retry: z.enum(valuesOf(Retry)).optional(),
  remote_effect: z.enum(valuesOf(RemoteEffect)).optional(),
  /** Whether that call sent anything to the service (the fake's ground truth). */
  sent: z.boolean(),
});

export const rowSchema = z
  .strictObject({
    id: z.string().regex(/^[a-z0-9][a-z0-9._-]*$/, 'lowercase letters, digits, . _ -'),
    title: z.string().optional(),
    operation: z.string().describe('a reference action name'),
    input: z.record(z.string(), z.unknown()).default({}),
    /**
     * A resource created in the fake before the row runs; `{{setup.id}}` in input refers to it, and
     * `{{correlation_id}}` in its fields is the row's.
     */
    setup: z
      .strictObject({
        kind: z.string(),
        fields: z.record(z.string(), z.unknown()).default({}),
        /**
         * Rows on a user's own actions (`--config`): the action that creates the record, run through
         * the service without a fault, and its input; `{{setup.id}}` is its remote reference.
         */
        action: z.string().optional(),
        input: z.record(z.string(), z.unknown()).optional(),
        /** Also create N extra records carrying the row's client_ref (for duplicate rows). */
        same_client_ref: z.number().int().nonnegative().default(0),
      })
      .optional(),
    /** Run the operation once before arming the condition (keep-alive races need a warm socket). */
    warmup: z.boolean().default(false),
    condition: conditionSchema,
    /**
     * Faults for the row's later requests, in order: each one is armed behind the one before on the
     * row's call id, so the first request meets `condition`, the next matching one `then[0]`, and so
     * on (a lost reply followed by a 429 on the keyed retry). Give each a `match` (e.g. `method:
     * POST`) when a lookup of the same call must not meet it.
     */
    then: z.array(laterFaultSchema).default([]),
    /**
     * After the agent's follow-up, the agent calls the operation again by its operation_id, as an
     * agent does when it re-runs a step; with `restart: true` the gateway is first closed and opened
     * again on the same ledger with the same owner (a restarted `candor serve`). `expect.again` says
     * what that call must answer.
     */
    again: z.strictObject({ restart: z.boolean().default(false) }).optional(),
    remote_effect_known: z
      .boolean()
      .describe('can the caller know the remote effect from this evidence?'),
    expect: z.strictObject({
      category: z.enum(valuesOf(Category)),
      retry: z.enum(valuesOf(Retry)),
      remote_effect: z.enum(valuesOf(RemoteEffect)),
      next_action: nextAction,
      /** The envelope after the scripted agent's follow-up (reconcile, wait and retry). */
      final: z
        .strictObject({
          category: z.enum(valuesOf(Category)),
          retry: z.enum(valuesOf(Retry)).optional(),
        })
        .optional(),
      attempts: z.number().int().positive().optional(),
      /** Required with `again`: the answer to the agent's call of the operation by its id. */
      again: againExpectSchema.optional(),
      remote: remoteSchema,
      /** Why the remote state stays unknown to the caller (required when it does). */
      unknown_reason: z.string().optional(),
      secret_in_result: z.literal(false).default(false),
    }),
  })
  .superRefine((row, ctx) => {
    if ((row.again === undefined) !== (row.expect.again === undefined))
      ctx.addIssue({
        code: 'custom',
        path: row.again === undefined ? ['expect', 'again'] : ['again'],
        message:
          '`again` and `expect.again` go together: a row that calls again says what it expects',
      });
    if (row.then.length > 0 && !('phase' in row.condition))
      ctx.addIssue({
        code: 'custom',
        path: ['then'],
        message: '`then` follows a fault for the fake service in `condition`',
      });
  });
export type MatrixRow = z.output<typeof rowSchema>;

export const matrixSchema = z.strictObject({
  matrix: z.string(),
  description: z.string().optional(),
  /** The OpenAPI document the rows were generated from (relative to this file): `--target fake` emulates it. */
  openapi: z.string().optional(),
  seed: z.number().int().default(1),
  rows: z.array(rowSchema).min(1),
});
export type Matrix = z.output<typeof matrixSchema>;

export function matrixJsonSchema(): Record<string, unknown> {
  return {
    $id: 'urn:candor:schema:matrix:v1',
    title: 'Candor failure matrix',
    ...z.toJSONSchema(matrixSchema, { target: 'draft-2020-12', io: 'input' }),
  };
}

// What the runner and the row targets (fake service, SSH fixture) share.

export interface Check {
  ok: boolean;
  expected: unknown;
  actual: unknown;
  detail?: string;
}

/** `not_run`: the row never ran (skipped, or it stopped before the oracle could judge a claim). */
export type OracleVerdict = 'consistent' | 'imprecise' | 'unsafe' | 'not_run';

export interface TimelineEntry {
  at: number;
  /** The ledger sequence number of a `ledger` entry: orders client events within one millisecond. */
  seq?: number;
  /** `ledger`: the client's record; `fake`: the ground-truth side (fake service or SSH fixture). */
  source: 'ledger' | 'fake';
  event: string;
  detail: string;
}

/** What one row is run against: the fake service or the SSH fixture. */
export interface RowTarget {
  action: EngineAction;
  input: Record<string, unknown>;
  signal?: AbortSignal;
  /** Runs before the measured call (keep-alive races need a warm socket). */
  warmup?: () => Promise<unknown>;
  /** Right after the first claim, before the agent's follow-up. */
  afterFirstClaim(env: Envelope): Promise<void>;
  /** Assertion (3), once the follow-up ran. */
  remote(): Check;
  /** The oracle on the first claim and on the envelope after the follow-up. */
  oracle(env: Envelope, final: Envelope): { verdict: OracleVerdict; detail: string };
  truthTimeline(): TimelineEntry[];
  /** Requests of this row the service has received so far (rows that call `again`). */
  received?(): number;
  dispose(): Promise<void>;
}

export type Verdict = { verdict: OracleVerdict; detail: string };

/** The first claim's verdict, unless only the follow-up's was unsafe. */
export function combineVerdicts(first: Verdict, after: Verdict): Verdict {
  return first.verdict === 'unsafe' || after.verdict !== 'unsafe'
    ? first
    : { ...after, detail: `after the follow-up: ${after.detail}` };
}

/**
 * Rows on a user's own actions: `{{unique_int}}` in an input is a number drawn from
 * 1..UNIQUE_INT_MAX for each row run (a client-chosen integer id no other row or run uses).
 */
export const UNIQUE_INT_MAX = 2_000_000_000;

/** `{{name}}` substitution in row inputs (`{{correlation_id}}`, `{{setup.id}}`). */
export function fillVars(value: unknown, vars: Record<string, string>): unknown {
  if (typeof value === 'string')
    return value.replace(/\{\{(\w+(?:\.\w+)?)\}\}/g, (m, k: string) => vars[k] ?? m);
  if (Array.isArray(value)) return value.map((v) => fillVars(v, vars));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fillVars(v, vars)]));
  return value;
}
