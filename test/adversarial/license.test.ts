// Issue 12, item 17: package.json names a licence; the file that holds its text must ship with it.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const root = new URL('../../', import.meta.url);

describe('licence', () => {
  it('ships the LICENSE file whose licence package.json names', () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
      license: string;
    };
    expect(pkg.license).toBe('Apache-2.0');
    const text = readFileSync(new URL('LICENSE', root), 'utf8');
    expect(text).toMatch(/Apache License\s+Version 2\.0, January 2004/);
    expect(text).toContain('TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION');
    expect(text).toContain('END OF TERMS AND CONDITIONS');
  });
});
