import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { parseConfig } from '../../src/config/load.js';

const PETSTORE = 'examples/openapi/petstore.yaml';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) },
    out,
    err,
  };
}

describe('candor init --openapi', () => {
  it('writes a configuration the loader accepts, one action per operation', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-init-'));
    const file = join(dir, 'candor.yaml');
    const t = io();
    const code = await main(['init', '--openapi', PETSTORE, '--out', file], t.io);
    expect(t.err.join('')).toBe('');
    expect(code).toBe(0);
    const text = readFileSync(file, 'utf8');
    console.log(text);
    const loaded = parseConfig(text, file);
    expect(loaded.ok).toBe(true);
  });
});
