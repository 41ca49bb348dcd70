// The text mirror's first line is derived from (remote_effect, retry): property-tested over every
// envelope shape, seeded and replayable (CANDOR_SEED).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { classify } from './classify.js';
import { headline } from './headline.js';
import { ActionClass, Category, RemoteEffect, Retry, valuesOf } from './vocabulary.js';

const seed = Number(process.env.CANDOR_SEED ?? 20261201);
const params = { seed, numRuns: 5_000, verbose: 1 } as const;

const envelopeArb = fc
  .record({
    category: fc.constantFrom(...valuesOf(Category)),
    retry: fc.constantFrom(...valuesOf(Retry)),
    remote_effect: fc.constantFrom(...valuesOf(RemoteEffect)),
    operation: fc.constantFrom('create_record', 'fs_read_text_file'),
    operation_id: fc.option(fc.constantFrom('op_01JDX', 'op_01JDY'), { nil: null }),
    retry_after_ms: fc.option(fc.nat(60_000), { nil: undefined }),
    data: fc.oneof(
      fc.constant(null),
      fc.record({
        refusal: fc.record({
          code: fc.constantFrom('duplicate_in_flight', 'duplicate_unresolved'),
        }),
      }),
      fc.record({ approval_id: fc.constant('apr_1') }),
      fc.record({ upstream_error: fc.string() }),
    ),
  })
  .map((e) => ({ ...e, ok: e.category === 'succeeded' }));

describe(`headline (seed ${seed})`, () => {
  it('says NOT DONE exactly when the envelope is a failure known not applied', () => {
    fc.assert(
      fc.property(envelopeArb, (e) => {
        const line = headline(e);
        expect(line.includes('NOT DONE')).toBe(!e.ok && e.remote_effect === 'none');
        if (e.ok) expect(line).toMatch(/^DONE — /);
        if (!e.ok && e.remote_effect === 'unknown') expect(line).toMatch(/^OUTCOME UNKNOWN — /);
        if (!e.ok && e.remote_effect === 'applied') expect(line).toMatch(/^DONE/);
        expect(line).not.toContain('\n');
      }),
      params,
    );
  });

  it('names a refusal code of a call that was held', () => {
    const line = headline({
      ok: false,
      category: 'outcome_unknown',
      operation: 'billing_create_invoice',
      operation_id: 'op_1',
      retry: 'escalate',
      remote_effect: 'unknown',
      data: { refusal: { code: 'duplicate_in_flight' } },
    });
    expect(line).toBe(
      'OUTCOME UNKNOWN — outcome_unknown: stop; do not repeat this call — a person must check and decide (operation op_1) (this call was not forwarded: duplicate_in_flight)',
    );
  });
});

describe('the MCP result table: category and remote_effect agree', () => {
  const replies = ['result', 'tool_error', 'rpc_error', 'rpc_internal_error'] as const;
  it.each(valuesOf(ActionClass))('for class %s', (action_class) => {
    for (const mcp_reply of replies)
      for (const contract_check of [undefined, 'violated', 'valid'] as const) {
        for (const reconciliation of [false, true]) {
          const c = classify(
            {
              phase: 'response_complete',
              mcp_reply,
              ...(contract_check ? { contract_check } : {}),
            },
            { action_class, reconciliation },
          );
          // Never "the service said it did not do it" while its effect is unknown.
          if (c.category === 'confirmed_failure') expect(c.remote_effect).toBe('none');
          if (c.remote_effect === 'unknown') expect(c.category).toBe('outcome_unknown');
          // A read changes nothing and never says "applied".
          if (action_class === 'read') expect(c.remote_effect).toBe('none');
          // Once written, a tool error of a write is never claimed as known not applied.
          if (action_class !== 'read' && mcp_reply !== 'rpc_error')
            expect(c.remote_effect).not.toBe('none');
        }
      }
  });
});
