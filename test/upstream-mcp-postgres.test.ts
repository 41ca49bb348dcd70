// A write-capable database MCP server from npm (enhanced-postgres-mcp-server, on the 2024-11-05
// protocol revision: the older era) behind Candor, against a throwaway PostgreSQL this test
// starts. The table is the ground truth: an INSERT whose upstream died after it committed is
// outcome_unknown, the mapped `query` lookup settles it, and the probe's verdict matches the rows.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelopeSchema, type Envelope } from '../src/core/envelope.js';
import {
  connectStdio,
  ROOT,
  tempDir,
  writeConfig,
  type StdioGateway,
} from './fixtures/mcp/stdio.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from './support/postgres.js';

const skip = postgresSkipReason();
const KILL = join(ROOT, 'test', 'fixtures', 'upstream', 'kill-on-call.mjs');
const PG_SERVER = join(ROOT, 'node_modules', 'enhanced-postgres-mcp-server', 'dist', 'index.js');
const NODE = process.execPath;
const q = (s: string): string => JSON.stringify(s);

let server: ThrowawayPostgres | undefined;
let db: pg.Client;
beforeAll(async () => {
  if (skip !== undefined) return;
  server = await startPostgres();
  db = new pg.Client({ connectionString: server.url });
  await db.connect();
  await db.query('CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL)');
}, 180_000);
afterAll(async () => {
  await db?.end();
  await server?.stop();
});

const rows = async (name: string): Promise<number> =>
  (await db.query('SELECT count(*)::int AS n FROM items WHERE name = $1', [name])).rows[0]
    .n as number;

function config(dir: string, env: Record<string, string>): string {
  const envYaml = Object.entries(env)
    .map(([k, v]) => `      ${k}: ${q(v)}`)
    .join('\n');
  return writeConfig(
    dir,
    `upstreams:
  db:
    command: ${q(NODE)}
    args: [${q(KILL)}, ${q(NODE)}, ${q(PG_SERVER)}, ${q(server!.url)}]
    env:${envYaml ? `\n${envYaml}` : ' {}'}
    tools:
      query: { class: read }
      insert:
        class: create
        lookup:
          tool: query
          arguments: { sql: "SELECT id FROM items WHERE name = '{{input.data.name}}'" }
          match: { kind: count, array: $ }
        probe:
          arguments: { table: items, data: { name: probe-row } }
`,
  );
}

async function call(
  gw: StdioGateway,
  name: string,
  args: Record<string, unknown>,
): Promise<Envelope> {
  const r = await gw.client.callTool({ name, arguments: args });
  return envelopeSchema.parse(r.structuredContent);
}

describe.skipIf(skip !== undefined)('enhanced-postgres-mcp-server behind Candor', () => {
  it('an INSERT whose upstream dies after committing is outcome_unknown; the query lookup finds the row and settles it', async () => {
    const dir = tempDir('candor-up-pg-');
    const file = config(dir, {
      CANDOR_KILL_TOOL: 'insert',
      CANDOR_KILL_ONCE: join(dir, 'killed'),
      CANDOR_KILL_MODE: 'after',
    });
    const gw = await connectStdio(
      ['--config', file, '--ledger', `sqlite:${join(dir, 'ledger.db')}`],
      {},
      dir,
    );
    try {
      const e = await call(gw, 'db_insert', { table: 'items', data: { name: 'widget' } });
      expect(e).toMatchObject({
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
      });
      expect(await rows('widget')).toBe(1);
      const again = await call(gw, 'db_insert', { table: 'items', data: { name: 'widget' } });
      expect(again).toMatchObject({ retry: 'reconcile_first', operation_id: e.operation_id });
      expect(await rows('widget')).toBe(1);
      const r = await call(gw, 'reconcile_operation', { operation_id: e.operation_id });
      expect(r).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
      // A failing INSERT (no such table): the handler threw, a JSON-RPC internal error — the
      // tool failed somewhere, so its effect is unknown (never confirmed_failure), with its words.
      const bad = await call(gw, 'db_insert', { table: 'no_such_table', data: { name: 'x' } });
      expect(bad).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
      expect((bad.data as { upstream_error?: string }).upstream_error).toEqual(expect.any(String));
    } finally {
      await gw.close();
    }
  });

  it('candor probe mcp reports insert as duplicating on retry, as the table shows', async () => {
    const dir = tempDir('candor-up-pg-probe-');
    const file = config(dir, {});
    const json = join(dir, 'probe.json');
    const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
      execFile(
        NODE,
        [
          join(ROOT, 'bin', 'candor.js'),
          'probe',
          'mcp',
          '--config',
          file,
          '--tool',
          'insert',
          '--json',
          json,
        ],
        { cwd: dir, encoding: 'utf8' },
        (error, stdout, stderr) =>
          done({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr }),
      );
    });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toContain('| db | insert (db_insert) | create | duplicates on retry |');
    expect(await rows('probe-row')).toBe(2);
  });
});
