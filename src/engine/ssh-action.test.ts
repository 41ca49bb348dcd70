import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRedactor } from '../core/redact.js';
import { defineSshAction, recordedInput, secretMismatch, secretsDigest } from './ssh-action.js';

const action = defineSshAction({
  name: 'set_pin',
  class: 'set_state',
  subject: 'the pin',
  input: z.object({ box: z.string(), pin: z.string(), n: z.number() }),
  host_ref: 'box',
  command: () => 'true',
  check: () => 'true',
  secret_env: (i) => ({ PIN: i.pin, N: String(i.n) }),
});

describe('SSH secret inputs', () => {
  it('are recorded as [REDACTED] by position, whatever their length', () => {
    const redactor = createRedactor();
    for (const s of ['ab', 'DA', 'x']) redactor.addSecret(s);
    expect(recordedInput(redactor, action, { box: 'ab-1', pin: 'ab', n: 7 })).toEqual({
      box: 'ab-1',
      pin: '[REDACTED]',
      n: '[REDACTED]',
    });
    expect(recordedInput(redactor, action, { box: 'b', pin: 'DA', n: 1 })).toMatchObject({
      pin: '[REDACTED]',
    });
  });

  it('identify the request by a keyed digest: another secret, key or the placeholder differs', () => {
    const key = { secretDigestKey: new Uint8Array(32).fill(7) };
    const input = { box: 'b', pin: 'ab', n: 1 };
    const d = secretsDigest(key, action, input);
    expect(d).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(secretMismatch(key, action, input, d!)).toBeNull();
    expect(secretMismatch(key, action, { ...input, pin: 'ac' }, d!)).toBe('other_secret');
    expect(secretMismatch(key, action, { ...input, pin: '[REDACTED]' }, d!)).toBe(
      'secret_placeholder',
    );
    const other = { secretDigestKey: new Uint8Array(32).fill(8) };
    expect(secretMismatch(other, action, input, d!)).toBe('other_secret');
    // An operation recorded without a digest cannot be continued with secrets.
    expect(secretMismatch(key, action, input, undefined)).toBe('other_secret');
  });
});
