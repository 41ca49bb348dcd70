// The MCP Inspector CLI (`@modelcontextprotocol/inspector --cli`, 2.12: both protocol eras through
// `--protocol-era`, schema portability checks through `--strict`), run as its users run it: one
// process per request, `--format json`, under the Node 22 it needs (node22.ts).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Node22 } from './node22.js';
import type { Target } from './clients.js';

export type InspectorEra = 'legacy' | 'modern';

export interface InspectorRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout as JSON (`{ result }`, `{ error }`, with `schemaFindings` under --strict), or null. */
  json: Record<string, unknown> | null;
}

/** Runs `inspector --cli --format json --protocol-era ERA ARGS… TARGET` and collects its output. */
export function inspect(
  n22: Node22,
  target: Target,
  era: InspectorEra,
  args: readonly string[],
  home: string,
): Promise<InspectorRun> {
  const launcher = join(
    n22.modules,
    '@modelcontextprotocol',
    'inspector',
    'clients',
    'launcher',
    'build',
    'index.js',
  );
  const targetArgs =
    target.kind === 'http'
      ? ['--transport', 'http', '--server-url', target.url]
      : [
          ...Object.entries(target.env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
          '--cwd',
          target.cwd,
          '--',
          target.command,
          ...target.args,
        ];
  const child = spawn(
    n22.node,
    [launcher, '--cli', '--format', 'json', '--protocol-era', era, ...args, ...targetArgs],
    // Its catalog and credential files go to a throwaway HOME.
    { env: { PATH: process.env['PATH'] ?? '', HOME: home } },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  return new Promise((resolve) => {
    child.once('close', (code) => {
      let json: Record<string, unknown> | null = null;
      try {
        json = JSON.parse(stdout) as Record<string, unknown>;
      } catch {
        json = null;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}
