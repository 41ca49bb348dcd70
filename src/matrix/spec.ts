// The matrix file format: each row = operation x injected condition x "remote effect known?" x
// expectations (DESIGN.md §4). `candor schema matrix` prints its JSON Schema.
import { z } from 'zod';
import { Category, RemoteEffect, Retry, valuesOf } from '../core/vocabulary.js';

const nextAction = z.enum([
  'continue',
  'retry_same_operation',
  'wait_then_retry',
  'reconcile',
  'stop',
  'escalate',
]);

/** Injected condition: a fault spec for the fake service (its own schema), or a before-bytes variant. */
export const conditionSchema = z.union([
  z.strictObject({ before_bytes: z.enum(['refused', 'unresolvable', 'blackhole']) }),
  z.strictObject({ none: z.literal(true) }),
  z
    .looseObject({ phase: z.string() })
    .describe('a fault for the fake service; see src/fakes/faults.ts'),
]);

const remoteSchema = z.strictObject({
  kind: z.string().describe('resource kind in the fake service, e.g. deployments'),
  /** Live resources of `kind` whose client_ref is the row's correlation id. */
  count: z.number().int().nonnegative().optional(),
  /** A field of the resource created by `setup`, after the row ran. */
  setup_field: z.string().optional(),
  equals: z.unknown().optional(),
  /** Whether the `setup` resource is deleted after the row ran. */
  setup_deleted: z.boolean().optional(),
  /** Children (e.g. notes) of the `setup` resource. */
  child: z.string().optional(),
  child_count: z.number().int().nonnegative().optional(),
});

export const rowSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9._-]*$/, 'lowercase letters, digits, . _ -'),
  title: z.string().optional(),
  operation: z.string().describe('a reference action name'),
  input: z.record(z.string(), z.unknown()).default({}),
  /** A resource created in the fake before the row runs; `{{setup.id}}` in input refers to it. */
  setup: z
    .strictObject({
      kind: z.string(),
      fields: z.record(z.string(), z.unknown()).default({}),
      /** Also create N extra records carrying the row's client_ref (for duplicate rows). */
      same_client_ref: z.number().int().nonnegative().default(0),
    })
    .optional(),
  /** Run the operation once before arming the condition (keep-alive races need a warm socket). */
  warmup: z.boolean().default(false),
  condition: conditionSchema,
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
    remote: remoteSchema,
    /** Why the remote state stays unknown to the caller (required when it does). */
    unknown_reason: z.string().optional(),
    secret_in_result: z.literal(false).default(false),
  }),
});
export type MatrixRow = z.output<typeof rowSchema>;

export const matrixSchema = z.strictObject({
  matrix: z.string(),
  description: z.string().optional(),
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
