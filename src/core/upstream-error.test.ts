import { describe, expect, it } from 'vitest';
import { createRedactor } from './redact.js';
import { UPSTREAM_ERROR_MAX, upstreamErrorData, upstreamErrorOf } from './upstream-error.js';

describe('upstream error text', () => {
  it('takes the text items of an isError result, or a JSON-RPC message with its code', () => {
    expect(
      upstreamErrorOf(
        { isError: true, content: [{ type: 'text', text: 'Access denied' }] },
        undefined,
      ),
    ).toEqual({ text: 'Access denied' });
    expect(upstreamErrorOf(null, { code: -32603, message: 'boom' })).toEqual({
      text: 'boom',
      code: -32603,
    });
    expect(upstreamErrorOf({ isError: false, content: [] }, undefined)).toBeNull();
  });

  it('redacts first, then cuts to the bound and flags the cut', () => {
    const secret = 'sekrit-value-0123456789';
    const r = createRedactor([secret]);
    const long = `${'x'.repeat(UPSTREAM_ERROR_MAX - 5)}${secret}tail`;
    const d = upstreamErrorData({ text: long }, r);
    expect(d.upstream_error).not.toContain('sekrit');
    expect(d.upstream_error.endsWith('[REDACTED]')).toBe(true);
    expect(d.upstream_error_truncated).toBe(true);
    const short = upstreamErrorData({ text: `denied ${secret}`, code: -32001 }, r);
    expect(short).toEqual({ upstream_error: 'denied [REDACTED]', upstream_error_code: -32001 });
  });
});
