// Bad input on the own-tools commands: one line naming the file and the place, exit 2 (usage) or
// 3 (environment), nothing half-written; and --help for each command.
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { run as proxyRun } from '../../src/cli/commands/proxy.js';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) },
    out,
    err,
  };
}
const tmp = (): string => mkdtempSync(join(tmpdir(), 'candor-bad-'));

async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('own tools: bad input', () => {
  it('proxy: an upstream that refuses connections is one line, exit 3', async () => {
    const port = await closedPort();
    const t = io();
    expect(await main(['proxy', '--upstream', `http://127.0.0.1:${port}`], t.io)).toBe(3);
    expect(t.err.join('')).toBe(
      `candor proxy: upstream http://127.0.0.1:${port}: connection refused (ECONNREFUSED)\n`,
    );
    expect(t.out.join('')).toBe('');
  });

  it('proxy: a fault file with an unknown phase names the file, line and field, exit 2', async () => {
    const dir = tmp();
    const file = join(dir, 'faults.yaml');
    writeFileSync(
      file,
      'faults:\n  - { call_id: a, phase: after_commit, action: rst }\n  - call_id: b\n    phase: before_coffee\n',
    );
    const t = io();
    expect(await main(['proxy', '--upstream', 'http://127.0.0.1:9', '--faults', file], t.io)).toBe(
      2,
    );
    const err = t.err.join('');
    expect(err.trim().split('\n')).toHaveLength(1);
    expect(err).toMatch(
      new RegExp(`${file.replace(/[.*+?^$()|[\]\\]/g, '\\$&')}:4:12: faults\\.1\\.phase: `),
    );
  });

  it('proxy: arms the fault file, serves an admin API on its own port, stops on abort', async () => {
    const upstream = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    const dir = tmp();
    const file = join(dir, 'faults.json');
    writeFileSync(
      file,
      JSON.stringify([
        {
          match: { method: 'POST', path: '/x' },
          phase: 'after_request_body',
          action: 'rst',
          times: 'always',
        },
      ]),
    );
    const t = io();
    const stop = new AbortController();
    const running = proxyRun(
      [
        '--upstream',
        `http://127.0.0.1:${(upstream.address() as net.AddressInfo).port}`,
        '--faults',
        file,
      ],
      t.io,
      { signal: stop.signal },
    );
    for (let i = 0; i < 100 && !t.out.join('').includes('admin'); i++)
      await new Promise((r) => setTimeout(r, 50));
    const [proxyUrl, adminLine] = t.out.join('').trim().split('\n');
    const admin = adminLine!.replace('admin ', '');
    expect(admin).not.toBe(proxyUrl);
    const faults = (await (await fetch(`${admin}/faults`)).json()) as {
      faults: Array<{ fault: { phase: string } }>;
    };
    expect(faults.faults.map((f) => f.fault.phase)).toEqual(['after_request_body']);
    const bad = await fetch(`${admin}/faults`, {
      method: 'POST',
      body: JSON.stringify({ call_id: 'z', phase: 'nope' }),
    });
    expect(bad.status).toBe(400);
    const ok = await fetch(`${admin}/faults`, {
      method: 'POST',
      body: JSON.stringify({ call_id: 'c1', phase: 'after_forward', action: 'rst' }),
    });
    expect(ok.status).toBe(201);
    // The GET passes through untouched; its truth says it was forwarded and answered.
    const res = await fetch(`${proxyUrl}/y`, { headers: { 'x-candor-call-id': 'g1' } });
    expect(res.status).toBe(204);
    const truth = await (await fetch(`${admin}/truth?call_id=g1`)).text();
    expect(
      truth
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { event: string }).event),
    ).toEqual([
      'received',
      'headers_complete',
      'body_complete',
      'forwarded',
      'upstream_answered',
      'response_bytes_written',
      'close_kind',
    ]);
    // The armed POST never reaches the upstream.
    await expect(fetch(`${proxyUrl}/x`, { method: 'POST', body: '{}' })).rejects.toThrow();
    stop.abort();
    expect(await running).toBe(0);
    upstream.closeAllConnections();
    await new Promise<void>((r) => upstream.close(() => r()));
  });

  it('fake serve --openapi and matrix generate --config: a broken document is one line, exit 2', async () => {
    const dir = tmp();
    const spec = join(dir, 'broken.yaml');
    writeFileSync(
      spec,
      'openapi: 3.1.0\ninfo: {title: x, version: "1"}\npaths:\n  /a:\n    post:\n      operationId: a\n      requestBody: { $ref: "#/components/requestBodies/Gone" }\n      responses: {"200": {description: ok}}\n',
    );
    for (const args of [
      ['fake', 'serve', '--openapi', spec],
      [
        'matrix',
        'generate',
        '--openapi',
        spec,
        '--config',
        'examples/candor.yaml',
        '--out',
        join(dir, 'm.yaml'),
      ],
    ]) {
      const t = io();
      expect(await main(args, t.io)).toBe(2);
      // The place: file, line:column and JSON pointer of the reference, and the rule broken.
      expect(t.err.join('')).toMatch(
        /broken\.yaml:7:28: \/paths\/~1a\/post\/requestBody\/\$ref: "#\/components\/requestBodies\/Gone" points nowhere/,
      );
      expect(t.err.join('').trim().split('\n')).toHaveLength(1);
    }
    expect(existsSync(join(dir, 'm.yaml'))).toBe(false);
  });

  it('matrix run --config: a row naming no configured action is a usage error before anything runs', async () => {
    const dir = tmp();
    const m = join(dir, 'm.yaml');
    writeFileSync(
      m,
      'matrix: x\nrows:\n  - id: r1\n    operation: update_pet\n    condition: { none: true }\n    remote_effect_known: true\n    expect: { category: succeeded, retry: never, remote_effect: applied, next_action: continue, remote: { kind: pet, count: 1 } }\n',
    );
    const t = io();
    expect(
      await main(
        [
          'matrix',
          'run',
          m,
          '--config',
          'examples/candor.yaml',
          '--openapi',
          'examples/openapi/petstore.yaml',
        ],
        t.io,
      ),
    ).toBe(2);
    expect(t.err.join('')).toContain(
      `${m}: rows.0.operation: "update_pet" is no action of examples/candor.yaml`,
    );
  });

  it('--help for init, proxy, fake and matrix names the new forms', async () => {
    const help = async (cmd: string): Promise<string> => {
      const t = io();
      expect(await main([cmd, '--help'], t.io)).toBe(0);
      return t.out.join('');
    };
    expect(await help('init')).toContain('candor init --openapi SPEC');
    expect(await help('proxy')).toContain('candor proxy --upstream URL');
    expect(await help('fake')).toContain('fake serve --openapi SPEC');
    expect(await help('matrix')).toContain('--config candor.yaml');
  });
});
