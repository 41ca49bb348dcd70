import { describe, expect, it } from 'vitest';
import { isUsageError, UsageError } from './errors.js';

describe('isUsageError', () => {
  it('recognises a UsageError, by code when one is given, and nothing else', () => {
    const e = new UsageError('not_owner', 'operation op_1 is owned by another process');
    expect(isUsageError(e)).toBe(true);
    expect(isUsageError(e, 'not_owner')).toBe(true);
    expect(isUsageError(e, 'invalid_input')).toBe(false);
    expect(isUsageError(Object.assign(new Error('x'), { code: 'not_owner' }))).toBe(false);
    expect(isUsageError(null)).toBe(false);
  });
});
