// The result envelope: the one thing the agent sees, for success and failure alike (DESIGN.md §1).
import { z } from 'zod';
import { Category, Retry, RemoteEffect, valuesOf } from './vocabulary.js';

export const envelopeSchema = z
  .strictObject({
    ok: z.boolean().describe('true exactly when category is "succeeded"'),
    category: z.enum(valuesOf(Category)),
    operation: z.string().min(1).describe('the configured action name'),
    operation_id: z.string().min(1).nullable(),
    retry: z.enum(valuesOf(Retry)),
    retry_after_ms: z.number().int().nonnegative().optional(),
    remote_effect: z.enum(valuesOf(RemoteEffect)),
    correlation_id: z.string().min(1).nullable(),
    message: z.string().describe('one plain sentence for people; agents must not parse it'),
    data: z.unknown().nullable(),
    diagnostics_ref: z.string().nullable(),
  })
  .refine((e) => e.ok === (e.category === Category.succeeded), {
    message: 'ok must be true exactly when category is succeeded',
    path: ['ok'],
  })
  .refine((e) => e.retry !== Retry.after_delay || e.retry_after_ms !== undefined, {
    message: 'retry "after_delay" needs retry_after_ms',
    path: ['retry_after_ms'],
  });

export type Envelope = z.infer<typeof envelopeSchema>;

/** JSON Schema (draft 2020-12) of the envelope, with closed enums. */
export function envelopeJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(envelopeSchema, { target: 'draft-2020-12' });
  return {
    $id: 'urn:candor:schema:envelope:v1',
    title: 'Candor result envelope',
    ...schema,
  };
}
