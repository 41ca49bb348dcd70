// The action-class table in core (src/core/rules.ts) is the one home of what a class means; the
// approval defaults and classify()'s retry after a confirmed failure must say the same per class.
import { describe, expect, it } from 'vitest';
import { DEFAULT_SCOPES, SENSITIVE_CLASSES } from '../src/approvals/policy.js';
import { CONFIRMED_FAILURE_RETRY } from '../src/core/classify.js';
import { ACTION_CLASS_RULES } from '../src/core/rules.js';
import { ActionClass, valuesOf } from '../src/core/vocabulary.js';

describe('ACTION_CLASS_RULES', () => {
  it('has a row for every class, and the approval defaults and retry rules agree with it', () => {
    expect(Object.keys(ACTION_CLASS_RULES).sort()).toEqual([...valuesOf(ActionClass)].sort());
    for (const cls of valuesOf(ActionClass)) {
      const row = ACTION_CLASS_RULES[cls];
      expect([cls, DEFAULT_SCOPES[cls]]).toEqual([cls, row.approval_scope]);
      expect([cls, SENSITIVE_CLASSES.has(cls)]).toEqual([cls, row.sensitive]);
      expect([cls, CONFIRMED_FAILURE_RETRY[cls]]).toEqual([cls, row.confirmed_failure_retry]);
      // A sensitive class is never approved automatically, and only reads are read-only.
      if (row.sensitive) expect(row.approval_scope).toBe('per_call');
      expect(row.read_only).toBe(cls === 'read');
    }
  });
});
