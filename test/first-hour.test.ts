// Issue #31, "the first hour": the packed tarball installed as a user would, then `candor init`,
// `candor client-config` and a real MCP client started exactly as the snippet says, from a folder
// of the client's choosing.
//
// The install: `npm pack` (dist/ as built by test/global-setup.ts; `prepack` builds it for a real
// pack) is unpacked into a temporary global prefix the way `npm i -g --prefix P` lays it out
// (P/lib/node_modules/candor, P/bin/candor -> its bin), its dependencies taken from this checkout.
// A real `npm i -g` compiles better-sqlite3 when no prebuilt binary can be downloaded (20+ minutes
// on a loaded 2-core machine), so it runs only with CANDOR_TEST_NPM_INSTALL=1.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
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

function install(): string {
  const packed = spawnSync(
    'npm',
    ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp],
    { cwd: ROOT, encoding: 'utf8' },
  );
  if (packed.status !== 0) throw new Error(`npm pack failed: ${packed.stderr}`);
  const tgz = join(tmp, (JSON.parse(packed.stdout) as Array<{ filename: string }>)[0]!.filename);
  if (process.env.CANDOR_TEST_NPM_INSTALL === '1') {
    const r = spawnSync('npm', ['i', '-g', '--prefix', prefix, '--prefer-offline', tgz], {
      encoding: 'utf8',
      stdio: 'inherit',
    });
    if (r.status !== 0) throw new Error('npm i -g failed');
    return tgz;
  }
  const lib = join(prefix, 'lib', 'node_modules');
  mkdirSync(lib, { recursive: true });
  mkdirSync(binDir, { recursive: true });
  const untar = spawnSync('tar', ['-xzf', tgz, '-C', lib], { encoding: 'utf8' });
  if (untar.status !== 0) throw new Error(`tar failed: ${untar.stderr}`);
  renameSync(join(lib, 'package'), join(lib, 'candor'));
  symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(lib, 'candor', 'node_modules'));
  chmodSync(join(lib, 'candor', 'bin', 'candor.js'), 0o755);
  symlinkSync('../lib/node_modules/candor/bin/candor.js', join(binDir, 'candor'));
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

const envelope = (r: unknown): Record<string, unknown> =>
  (r as { structuredContent: Record<string, unknown> }).structuredContent;

beforeAll(async () => {
  mkdirSync(app, { recursive: true });
  mkdirSync(elsewhere, { recursive: true });
  install();
  await startFake();
}, 180_000);

afterAll(() => {
  fake?.kill('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
});

describe('from the tarball to an MCP client', () => {
  it('the tarball ships dist/ and no sources, and candor on the PATH answers --version', () => {
    const pkg = join(prefix, 'lib', 'node_modules', 'candor');
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
    // Before the value is stored, serve refuses at start, naming the entry and its place.
    const refused = candor(['serve', '--config', 'candor.yaml'], app);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(
      /candor\.yaml:\d+:\d+: credentials\.records-token\.ref: the vault holds no credential named "records-token"/,
    );

    const set = candor(
      ['vault', 'set', 'records-token', '--config', 'candor.yaml', '--value-env', 'TOKEN'],
      app,
      {
        TOKEN: 'first-hour-token-123',
      },
    );
    expect(set.err).toBe('');
    expect(set).toMatchObject({
      code: 0,
      out: 'stored records-token (bearer) for http://127.0.0.1:8787/v1/records\n',
    });
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
});
