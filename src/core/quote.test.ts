import { describe, expect, it } from 'vitest';
import { quote, quotePath } from './quote.js';

describe('quotePath', () => {
  it('keeps a short path whole, JSON-quoted', () => {
    expect(quotePath('/etc/candor/trusted.cp')).toBe('"/etc/candor/trusted.cp"');
  });

  it('cuts a long path at the front, so the file name survives, and gives the full length', () => {
    const path = `/tmp/${'x'.repeat(80)}/run-3/trusted.cp`;
    const q = quotePath(path, 30);
    expect(q).toBe(`"…${path.slice(-30)}" (${path.length} characters)`);
    expect(q).toContain('/run-3/trusted.cp"');
    // quote() cuts the other end: the name would be lost.
    expect(quote(path, 30)).not.toContain('trusted.cp');
  });

  it('escapes line breaks and bidi controls and never splits a surrogate pair', () => {
    expect(quotePath('/a\nb/\u202ec.cp')).toBe('"/a\\nb/\\u202ec.cp"');
    const emoji = `/${'😀'.repeat(100)}/f`;
    const q = quotePath(emoji, 10);
    expect(q).toBe(`"…${'😀'.repeat(8)}/f" (${emoji.length} characters)`);
    expect(q).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/u);
  });
});
