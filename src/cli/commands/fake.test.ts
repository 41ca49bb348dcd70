import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { run } from './fake.js';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) },
    out,
    err,
  };
}

describe('candor fake serve', () => {
  it.each([
    [[], /usage: candor fake serve/],
    [['serve', '--port', 'x'], /--port must be 0\.\.65535/],
    [['serve', '--port', '70000'], /--port must be/],
    [['serve', '--host', '0.0.0.0'], /--host must be a loopback address/],
    [['serve', '--seed', '1.5'], /--seed must be an integer/],
    [['serve', '--bogus'], /unknown option --bogus/],
    [['serve', '--port'], /option --port needs a value/],
  ])('%j is a usage error (exit 2, one line)', async (args, message) => {
    const c = capture();
    expect(await run(args, c.io)).toBe(2);
    expect(c.err).toHaveLength(1);
    expect(c.err[0]).toMatch(message);
    expect(c.err[0]!.trim().split('\n')).toHaveLength(1);
  });

  it('reports a broken fixture directory as a usage error naming the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-cli-fake-'));
    writeFileSync(join(dir, 'bad.yaml'), 'cases: [{ id: 1 }]');
    const c = capture();
    expect(await run(['serve', '--fixtures', dir], c.io)).toBe(2);
    expect(c.err[0]).toMatch(/^candor fake: fixtures bad\.yaml: cases\.0\.id: /);
  });

  it('prints the URL, serves fixtures and writes the log until stopped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-cli-fake-'));
    writeFileSync(
      join(dir, 'cases.yaml'),
      'cases:\n  - id: rate\n    request: { method: GET, path: /v1/issues }\n    fixture_response: { status: 429, headers: { retry-after: 3 } }\n',
    );
    const log = join(dir, 'truth.jsonl');
    const c = capture();
    const stop = new AbortController();
    const done = run(
      ['serve', '--fixtures', dir, '--port', '0', '--seed', '3', '--log', log],
      c.io,
      { signal: stop.signal },
    );
    while (c.out.length === 0) await new Promise((r) => setTimeout(r, 5));
    const url = c.out[0]!.trim();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await request(`${url}/v1/issues`, { headers: { 'x-candor-call-id': 'rate' } });
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('3');
    await res.body.dump();
    stop.abort();
    expect(await done).toBe(0);
    expect(readFileSync(log, 'utf8')).toContain('"call_id":"rate"');
  });
});
