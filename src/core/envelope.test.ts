import { describe, expect, it } from 'vitest';
import { envelopeJsonSchema, envelopeSchema } from './envelope.js';
import { Category, RemoteEffect, Retry, valuesOf } from './vocabulary.js';

const unknownOutcome = {
  ok: false,
  category: 'outcome_unknown',
  operation: 'create_deployment',
  operation_id: 'op_01JD0000000000000000000000',
  retry: 'reconcile_first',
  remote_effect: 'unknown',
  correlation_id: 'case-http-005',
  message:
    'Connection closed after the request was sent; whether the deployment was created is unknown.',
  data: null,
  diagnostics_ref: 'diag_01JD0000000000000000000000',
};

describe('envelope schema', () => {
  it('accepts the DESIGN.md example', () => {
    expect(envelopeSchema.safeParse(unknownOutcome).success).toBe(true);
  });
  it('rejects ok/category disagreement, unknown keys and after_delay without a delay', () => {
    expect(envelopeSchema.safeParse({ ...unknownOutcome, ok: true }).success).toBe(false);
    expect(envelopeSchema.safeParse({ ...unknownOutcome, raw_status: 502 }).success).toBe(false);
    expect(
      envelopeSchema.safeParse({
        ...unknownOutcome,
        category: 'rate_limited',
        retry: 'after_delay',
      }).success,
    ).toBe(false);
    expect(envelopeSchema.safeParse({ ...unknownOutcome, category: 'failed' }).success).toBe(false);
  });
  it('exports closed enums in JSON Schema 2020-12', () => {
    const s = envelopeJsonSchema() as {
      $schema: string;
      properties: Record<string, { enum?: string[] }>;
      additionalProperties: boolean;
    };
    expect(s.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(s.properties.category!.enum).toEqual(valuesOf(Category));
    expect(s.properties.retry!.enum).toEqual(valuesOf(Retry));
    expect(s.properties.remote_effect!.enum).toEqual(valuesOf(RemoteEffect));
    expect(s.additionalProperties).toBe(false);
  });
});
