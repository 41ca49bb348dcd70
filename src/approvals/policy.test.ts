import { describe, expect, it } from 'vitest';
import { ActionClass, valuesOf } from '../core/vocabulary.js';
import { createPolicy, DEFAULT_SCOPES, defaultPolicy, SENSITIVE_CLASSES } from './policy.js';

describe('approval policy', () => {
  it('defaults: reads auto, ordinary writes per session, sensitive classes per call', () => {
    const p = defaultPolicy();
    const scopes = Object.fromEntries(valuesOf(ActionClass).map((c) => [c, p.scopeFor('x', c)]));
    expect(scopes).toEqual({
      read: 'auto',
      set_state: 'session',
      create: 'session',
      append: 'session',
      notify: 'session',
      financial: 'per_call',
      destructive: 'per_call',
      permission_change: 'per_call',
      credential_change: 'per_call',
      execute: 'per_call',
    });
    expect(scopes).toEqual(DEFAULT_SCOPES);
    expect([...SENSITIVE_CLASSES].every((c) => p.isSensitive(c as ActionClass))).toBe(true);
    expect(p.isSensitive('create')).toBe(false);
  });

  it('an unknown class is asked per call', () => {
    expect(defaultPolicy().scopeFor('x', 'teleport' as ActionClass)).toBe('per_call');
  });

  it('overrides per class and per action name (the name wins)', () => {
    const p = createPolicy({
      classes: { create: 'per_call' },
      actions: { create_issue: { scope: 'auto' }, read_secret: { scope: 'per_call' } },
    });
    if (!p.ok) throw new Error(JSON.stringify(p.failure));
    expect(p.value.scopeFor('create_build', 'create')).toBe('per_call');
    expect(p.value.scopeFor('create_issue', 'create')).toBe('auto');
    expect(p.value.scopeFor('read_secret', 'read')).toBe('per_call');
  });

  it('refuses auto for a sensitive class, and clamps an override given without its class', () => {
    const bad = createPolicy({
      classes: { destructive: 'auto', teleport: 'auto' } as never,
      actions: { pay: { scope: 'auto', action_class: 'financial' } },
      per_call_ttl_ms: 0,
    });
    expect(bad.ok).toBe(false);
    expect(bad.failure?.map((f) => f.code)).toEqual([
      'unsafe_auto',
      'unknown_class',
      'unsafe_auto',
      'bad_ttl',
    ]);
    const p = createPolicy({ actions: { pay: { scope: 'auto' } } });
    if (!p.ok) throw new Error('policy');
    expect(p.value.scopeFor('pay', 'financial')).toBe('per_call');
    expect(p.value.scopeFor('pay', 'create')).toBe('auto');
  });
});
