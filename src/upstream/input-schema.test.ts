// The upstream inputSchema check: dialect by $schema, the failing field named, a schema that
// cannot be compiled refuses every call instead of letting arguments through unchecked.
import { describe, expect, it } from 'vitest';
import { compileInputSchema } from './input-schema.js';

const invoice = {
  type: 'object',
  properties: {
    customer: { type: 'string' },
    amount: { type: 'number', exclusiveMinimum: 0 },
    lines: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } },
  },
  required: ['customer', 'amount'],
  additionalProperties: false,
};

describe('compileInputSchema', () => {
  it('2020-12 (no $schema: the MCP default) names the failing field', () => {
    const check = compileInputSchema(invoice);
    expect(check({ customer: 'A', amount: 3 })).toBeNull();
    expect(check({ customer: 'A', amount: -5 })).toMatchObject({ path: ['amount'] });
    expect(check({ amount: 3 })).toEqual({ path: ['customer'], message: 'required' });
    expect(check({ customer: 'A', amount: 3, memo: 'x' })).toMatchObject({ path: ['memo'] });
    expect(check({ customer: 'A', amount: 3, lines: [{ sku: 7 }] })).toMatchObject({
      path: ['lines', 0, 'sku'],
    });
  });

  it('draft-07 by $schema (its own exclusiveMinimum and tuple items)', () => {
    const check = compileInputSchema({
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: {
        amount: { type: 'number', exclusiveMinimum: 0 },
        pair: { type: 'array', items: [{ type: 'string' }, { type: 'number' }] },
      },
    });
    expect(check({ amount: -5 })).toMatchObject({ path: ['amount'] });
    expect(check({ pair: ['a', 'b'] })).toMatchObject({ path: ['pair', 1] });
    expect(check({ amount: 1, pair: ['a', 2] })).toBeNull();
  });

  it('formats are checked (ajv-formats)', () => {
    const check = compileInputSchema({
      type: 'object',
      properties: { when: { type: 'string', format: 'date-time' } },
    });
    expect(check({ when: 'yesterday' })).toMatchObject({ path: ['when'] });
    expect(check({ when: '2026-12-01T10:00:00Z' })).toBeNull();
  });

  it('a schema ajv cannot compile refuses every call, saying why', () => {
    const broken = compileInputSchema({
      type: 'object',
      properties: { a: { $ref: '#/$defs/missing' } },
    });
    const p = broken({ a: 1 });
    expect(p?.path).toEqual([]);
    expect(p?.message).toMatch(/cannot be checked: its inputSchema cannot be compiled/);
    const unknown = compileInputSchema({
      $schema: 'https://example.com/my-dialect',
      type: 'object',
    });
    expect(unknown({})?.message).toMatch(/unsupported \$schema/);
  });
});
