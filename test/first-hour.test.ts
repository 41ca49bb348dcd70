// Issue #31, "the first hour": the packed tarball installed as a user would, then `candor init`,
// `candor client-config` and a real MCP client started exactly as the snippet says, from a folder
// of the client's choosing.
//
// The install is real: `npm pack` (dist/ as built by test/global-setup.ts; `prepack` builds it for a
// real pack), then `npm i -g --prefix P ./candor-*.tgz` into a temporary prefix. npm resolves the
// dependencies from its cache (`--prefer-offline`, filled by this checkout's `npm ci`). The one
// native module Candor needs, better-sqlite3, fetches a prebuilt binary from GitHub at install and
// compiles SQLite from source when it cannot (10+ minutes on a loaded 2-core machine); here it is
// given the binary this checkout already has, through prebuild-install's documented
// `better_sqlite3_local_prebuilds` setting (docs/install.md says how a user does the same).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

// Real processes (the gateway, its upstream, the fake) on a machine shared with other work.
vi.setConfig({ testTimeout: 120_000 });

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const tmp = realpathSync(
  spawnSync('mktemp', ['-d', join(tmpdir(), 'candor-first-hour-XXXXXX')], {
    encoding: 'utf8',
  }).stdout.trim(),
);
const prefix = join(tmp, 'prefix');
const app = join(tmp, 'app');
const elsewhere = join(tmp, 'elsewhere');
const binDir = join(prefix, 'bin');
const env = (extra: Record<string, string> = {}): Record<string, string> => ({
  PATH: `${binDir}:${process.env.PATH ?? ''}`,
  HOME: tmp,
  ...extra,
});

function candor(args: string[], cwd: string, extra: Record<string, string> = {}) {
  const r = spawnSync('candor', args, { cwd, env: env(extra), encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** better-sqlite3's binary of this checkout, named as prebuild-install looks for it. */
function localPrebuild(): string {
  const pkg = join(ROOT, 'node_modules', 'better-sqlite3');
  const { version } = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as {
    version: string;
  };
  const dir = join(tmp, 'prebuilds');
  mkdirSync(dir, { recursive: true });
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const r = spawnSync('tar', [
    '-czf',
    join(dir, name),
    '-C',
    pkg,
    'build/Release/better_sqlite3.node',
  ]);
  if (r.status !== 0) throw new Error(`tar failed: ${String(r.stderr)}`);
  return dir;
}

function install(): string {
  const packed = spawnSync(
    'npm',
    ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp],
    { cwd: ROOT, encoding: 'utf8' },
  );
  if (packed.status !== 0) throw new Error(`npm pack failed: ${packed.stderr}`);
  const tgz = join(tmp, (JSON.parse(packed.stdout) as Array<{ filename: string }>)[0]!.filename);
  const r = spawnSync(
    'npm',
    ['i', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tgz],
    {
      cwd: tmp,
      encoding: 'utf8',
      env: {
        ...process.env,
        npm_config_better_sqlite3_local_prebuilds: localPrebuild(),
        // scripts/test-node.sh builds native modules from source for Node 22/24 (no GitHub here);
        // this install takes the binary that build left in the checkout instead.
        npm_config_build_from_source: 'false',
      },
      timeout: 600_000,
    },
  );
  if (r.status !== 0) throw new Error(`npm i -g failed (${r.status}): ${r.stderr}`);
  return tgz;
}

let fake: ChildProcess | null = null;
async function startFake(): Promise<void> {
  // The starter's destination is the fake's documented port.
  for (let attempt = 0; attempt < 20; attempt++) {
    const child = spawn('candor', ['fake', 'serve', '--port', '8787'], {
      cwd: app,
      env: env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const url = await new Promise<string | null>((resolve) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) resolve(out.trim());
      });
      child.on('exit', () => resolve(null));
    });
    if (url !== null) {
      fake = child;
      return;
    }
    // Another test on this machine holds the port for now.
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error('port 8787 stayed busy');
}

async function connect(command: string, args: string[], cwd: string, extra = {}) {
  const transport = new StdioClientTransport({
    command,
    args,
    cwd,
    env: env(extra),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => void (stderr += d.toString()));
  const client = new Client({ name: 'first-hour-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, stderr: () => stderr, close: () => client.close() };
}

/** How many events the fake service has recorded (requests received, effects committed). */
async function fakeEvents(): Promise<number> {
  const r = await fetch('http://127.0.0.1:8787/_candor/truth');
  return (await r.text()).split('\n').filter((l) => l.trim() !== '').length;
}

const envelope = (r: unknown): Record<string, unknown> =>
  (r as { structuredContent: Record<string, unknown> }).structuredContent;

beforeAll(async () => {
  mkdirSync(app, { recursive: true });
  mkdirSync(elsewhere, { recursive: true });
  install();
  await startFake();
}, 600_000);

afterAll(() => {
  fake?.kill('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
});

describe('from the tarball to an MCP client', () => {
  it('the tarball ships dist/ and no sources, and candor on the PATH answers --version', () => {
    const pkg = join(prefix, 'lib', 'node_modules', 'candor');
    expect(realpathSync(join(binDir, 'candor'))).toBe(join(pkg, 'bin', 'candor.js'));
    // The given prebuilt binary was used: nothing was compiled.
    const sqlite = join(pkg, 'node_modules', 'better-sqlite3', 'build');
    expect(existsSync(join(sqlite, 'Release', 'better_sqlite3.node'))).toBe(true);
    expect(existsSync(join(sqlite, 'Release', 'obj.target'))).toBe(false);
    expect(existsSync(join(pkg, 'dist', 'cli', 'main.js'))).toBe(true);
    expect(existsSync(join(pkg, 'src'))).toBe(false);
    const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as {
      version: string;
      scripts: Record<string, string>;
    };
    // Nothing may need to run at install time for candor itself.
    expect(Object.keys(manifest.scripts)).not.toContain('prepare');
    expect(Object.keys(manifest.scripts)).not.toContain('install');
    expect(Object.keys(manifest.scripts)).not.toContain('postinstall');
    const r = candor(['--version'], elsewhere);
    expect(r).toMatchObject({ code: 0, out: `${manifest.version}\n` });
  });

  it('candor init writes a starter whose hints name the installed command', () => {
    const r = candor(['init'], app);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain('  candor fake serve --port 8787');
    expect(r.out).toContain('  candor serve --config candor.yaml');
    expect(readdirSync(app).sort()).toEqual(['.candor', 'candor-notes.mjs', 'candor.yaml']);
    expect(readdirSync(join(app, '.candor')).sort()).toEqual(['vault.json', 'vault.key']);
    // A second init does not overwrite.
    expect(candor(['init'], app).code).toBe(2);
  });

  it('the client-config snippet starts the gateway from any folder; a call succeeds and the ledger lands beside candor.yaml', async () => {
    const r = candor(['client-config', '--client', 'claude-desktop'], app);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/claude_desktop_config\.json/);
    const snippet = JSON.parse(r.out) as {
      mcpServers: { candor: { command: string; args: string[] } };
    };
    const server = snippet.mcpServers.candor;
    expect(server.command).toBe(process.execPath);
    expect(server.args).toEqual([
      realpathSync(join(prefix, 'lib', 'node_modules', 'candor', 'bin', 'candor.js')),
      'serve',
      '--config',
      join(app, 'candor.yaml'),
    ]);

    // A client starts servers in a folder of its own, with a PATH of its own.
    const gw = await connect(server.command, server.args, elsewhere, { PATH: '/usr/bin:/bin' });
    try {
      const { tools } = await gw.client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([
        'create_record',
        'get_record',
        'list_unresolved_operations',
        'notes_add_note',
        'notes_list_notes',
        'operation_status',
        'reconcile_operation',
      ]);
      const created = envelope(
        await gw.client.callTool({ name: 'create_record', arguments: { title: 'first hour' } }),
      );
      expect(created).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
      const id = (created.data as { id: string }).id;
      // The service holds it: read back through the gateway.
      const read = envelope(await gw.client.callTool({ name: 'get_record', arguments: { id } }));
      expect(read).toMatchObject({ ok: true, data: { id, title: 'first hour' } });
      const note = envelope(
        await gw.client.callTool({ name: 'notes_add_note', arguments: { text: 'hello' } }),
      );
      expect(note).toMatchObject({ ok: true, category: 'succeeded' });
    } finally {
      await gw.close();
    }
    // Everything beside the configuration, nothing where the client started it.
    expect(existsSync(join(app, '.candor', 'ledger.db'))).toBe(true);
    expect(JSON.parse(readFileSync(join(app, '.candor', 'notes.json'), 'utf8'))).toEqual([
      { id: 'note-1', text: 'hello' },
    ]);
    expect(readdirSync(elsewhere)).toEqual([]);
    const ops = candor(['ops', 'list', '--config', join(app, 'candor.yaml'), '--json'], elsewhere);
    expect(ops.code).toBe(0);
    const listed = (JSON.parse(ops.out) as Array<{ action: string; state: string }>).map(
      (o) => `${o.action}:${o.state}`,
    );
    expect(listed.sort()).toEqual([
      'create_record:succeeded',
      'get_record:succeeded',
      'notes_add_note:succeeded',
    ]);
  });

  it('candor vault set with only --config stores what candor.yaml references', async () => {
    const file = join(app, 'candor.yaml');
    const yaml = readFileSync(file, 'utf8');
    // The edit the starter's comment describes: uncomment the credential and its use.
    writeFileSync(
      file,
      yaml
        .replace('# credentials:\n#   records-token:', 'credentials:\n  records-token:')
        .replace('    # credential: records-token', '    credential: records-token'),
    );
    // Before the value is stored: --strict refuses at start, naming the entry and its place.
    const refused = candor(['serve', '--config', 'candor.yaml', '--strict'], app);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(
      /candor\.yaml:\d+:\d+: credentials\.records-token\.ref: the vault holds no credential named "records-token"/,
    );
    // Without --strict it serves after naming it, with the command that stores it; the call that
    // needs it is not sent and says why.
    const before = await fakeEvents();
    const named = await connect('candor', ['serve', '--config', file], elsewhere);
    let hint: string;
    try {
      const created = envelope(
        await named.client.callTool({ name: 'create_record', arguments: { title: 'no token' } }),
      );
      expect(created).toMatchObject({
        ok: false,
        category: 'local_failure',
        remote_effect: 'none',
        data: {
          refusal: {
            code: 'credential_unavailable',
            detail: 'No credential named "records-token".',
          },
        },
      });
      const line = named
        .stderr()
        .split('\n')
        .find((l) => l.includes('records-token'));
      expect(line).toMatch(
        /^.*candor\.yaml:\d+:\d+: credentials\.records-token\.ref: the vault holds no credential named "records-token": calls that need it fail as local_failure until it is stored \(candor vault set records-token --config .*candor\.yaml\)$/,
      );
      hint = /\((candor vault set [^)]*)\)$/.exec(line!)![1]!;
    } finally {
      await named.close();
    }
    expect(await fakeEvents()).toBe(before);
    // The printed command, as printed (its value from the environment instead of the prompt).
    const stored = spawnSync('sh', ['-c', `${hint} --value-env TOKEN`], {
      cwd: elsewhere,
      env: env({ TOKEN: 'first-hour-token-123' }),
      encoding: 'utf8',
    });
    expect(stored.stderr).toBe('');
    expect(stored.stdout).toBe(
      'stored records-token (bearer) for http://127.0.0.1:8787/v1/records\n',
    );
    const listed = candor(['vault', 'list', '--config', 'candor.yaml', '--json'], app);
    expect(listed.code).toBe(0);
    expect(JSON.stringify(JSON.parse(listed.out))).not.toContain('first-hour-token-123');

    const gw = await connect('candor', ['serve', '--config', file], elsewhere);
    try {
      const created = envelope(
        await gw.client.callTool({ name: 'create_record', arguments: { title: 'with a token' } }),
      );
      expect(created).toMatchObject({ ok: true, category: 'succeeded' });
    } finally {
      await gw.close();
    }
  });
});

describe('serve names what is missing at start', () => {
  const yaml = `ledger: 'memory:'
credentials:
  api: { ref: env:FIRST_HOUR_TOKEN, scheme: Bearer }
destinations:
  api: { origin: 'http://127.0.0.1:9', credential: api }
actions:
  - name: read_item
    class: read
    subject: the item
    description: Read.
    destination: api
    request: { method: GET, path: /items }
`;

  it('an unset credential variable is one line at its place; --strict makes it fatal (exit 3)', async () => {
    const file = join(tmp, 'env.yaml');
    writeFileSync(file, yaml);
    const strict = candor(['serve', '--config', file, '--strict'], elsewhere);
    expect(strict.code).toBe(3);
    expect(strict.err.split('\n')).toEqual([
      `${file}:3:15: credentials.api.ref: environment variable FIRST_HOUR_TOKEN is not set: calls that need this credential fail as local_failure until it is`,
      'candor serve: --strict: 1 credential(s) unavailable; not starting',
      '',
    ]);
    // Without --strict it serves, after saying so.
    const gw = await connect('candor', ['serve', '--config', file], elsewhere);
    try {
      expect(gw.stderr()).toContain(
        `${file}:3:15: credentials.api.ref: environment variable FIRST_HOUR_TOKEN is not set`,
      );
      expect((await gw.client.listTools()).tools.map((t) => t.name)).toContain('read_item');
    } finally {
      await gw.close();
    }
    // Set, nothing is said.
    const set = await connect('candor', ['serve', '--config', file], elsewhere, {
      FIRST_HOUR_TOKEN: 'some-token-value',
    });
    try {
      await set.client.listTools();
      expect(set.stderr()).not.toContain('FIRST_HOUR_TOKEN');
    } finally {
      await set.close();
    }
  });

  it('a credential value too short to redact is refused at call time saying why; nothing is sent', async () => {
    let received = 0;
    const server = createServer((_req, res) => {
      received++;
      res.end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const file = join(tmp, 'short.yaml');
    writeFileSync(file, yaml.replace('http://127.0.0.1:9', `http://127.0.0.1:${port}`));
    const gw = await connect('candor', ['serve', '--config', file], elsewhere, {
      FIRST_HOUR_TOKEN: 'abc',
    });
    try {
      const r = envelope(await gw.client.callTool({ name: 'read_item', arguments: {} }));
      expect(r).toMatchObject({
        ok: false,
        category: 'local_failure',
        remote_effect: 'none',
        data: {
          refusal: {
            code: 'credential_unavailable',
            detail:
              'FIRST_HOUR_TOKEN is set but does not hold a usable bearer value: The value must have at least 4 characters (shorter ones cannot be redacted).',
          },
        },
      });
      expect(JSON.stringify(r)).not.toContain('bound to this destination');
    } finally {
      await gw.close();
      server.close();
    }
    expect(received).toBe(0);
  });
});

describe("the demo's hints run as printed", () => {
  const sh = (line: string, cwd: string) => {
    const r = spawnSync('sh', ['-c', line], {
      cwd,
      env: env(),
      encoding: 'utf8',
      timeout: 120_000,
    });
    return { code: r.status, out: r.stdout, err: r.stderr };
  };
  const unescape = (s: string): string =>
    s
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&amp;/g, '&');

  it('every command the demo and the web view print runs, with the installed candor', async () => {
    const dir = join(tmp, 'demo');
    mkdirSync(dir);
    const demo = candor(['demo', '--quiet'], dir);
    expect(demo.err).toBe('');
    expect(demo.code, demo.out).toBe(0); // a failed row is named in the table on stdout
    expect(readdirSync(join(dir, '.candor')).filter((f) => !f.includes('-'))).toEqual([
      'demo.db',
      'demo.yaml',
    ]);
    const printed = demo.out
      .split('\n')
      .filter((l) => l.startsWith('  candor '))
      .map((l) => l.trim());
    expect(printed.map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual([
      'candor ops',
      'candor ops',
      'candor ui',
    ]);
    const unresolved = /ops show (op_\w+)/.exec(printed[1]!)![1]!;
    for (const line of printed.slice(0, 2)) {
      const r = sh(line, dir);
      expect({ line, err: r.err, code: r.code }).toEqual({ line, err: '', code: 0 });
    }
    expect(sh(printed[0]!, dir).out).toContain(unresolved);

    // The web view started as printed; the commands its operation page prints run too.
    const ui = spawn('sh', ['-c', `exec ${printed[2]!}`], {
      cwd: dir,
      env: env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        ui.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /open (http:\/\/\S+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        ui.on('exit', (code) => reject(new Error(`ui exited ${code}: ${out}`)));
      });
      const base = new URL(url);
      const entry = await fetch(`${base.origin}/op/${unresolved}${base.search}`, {
        redirect: 'manual',
      });
      const cookie = entry.headers.get('set-cookie')!.split(';')[0]!;
      const page = await (
        await fetch(`${base.origin}/op/${unresolved}`, { headers: { cookie } })
      ).text();
      const commands = [...page.matchAll(/<pre class="cmd" data-command>([^<]*)<\/pre>/g)].map(
        (m) => unescape(m[1]!),
      );
      expect(commands).toEqual([
        'candor recover --config .candor/demo.yaml',
        `candor ops show ${unresolved} --config .candor/demo.yaml`,
      ]);
      const audit = await (await fetch(`${base.origin}/audit`, { headers: { cookie } })).text();
      const verify = /<pre class="cmd">(candor audit verify [^<]*)<\/pre>/.exec(audit);
      if (verify) commands.push(unescape(verify[1]!));
      for (const line of commands.slice(1)) {
        const r = sh(line, dir);
        expect({ line, err: r.err, code: r.code }).toEqual({ line, err: '', code: 0 });
      }
      // recover works through every unresolved operation and, with nothing it can reach (the
      // demo's fake service is gone), leaves each to a person, saying why: exit 1, no usage error.
      const recovered = sh(commands[0]!, dir);
      expect(recovered.err).toBe('');
      expect(recovered.code).toBe(1);
      expect(recovered.out).toContain(unresolved);
      expect(recovered.out).toMatch(
        /unresolved operation\(s\) worked through: 0 settled, \d+ need a person/,
      );
    } finally {
      ui.kill('SIGINT');
    }
  });
});
