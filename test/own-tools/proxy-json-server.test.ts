// The petstore matrix through `candor proxy` in front of a real REST server this project did not
// write (json-server, from npm). Its JSON data file is independent ground truth: every row's
// applied writes (the proxy's "forwarded, upstream answered 2xx") must match what the file holds,
// and no claim may be unsafe. json-server ignores Idempotency-Key, so the configuration's claim that
// place_order's key is honoured is a lie: the report must say so, and exactly the rows where that
// lie makes the engine repeat an applied order must fail with a duplicate.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

const PETSTORE = 'examples/openapi/petstore.yaml';
const BIN = 'node_modules/json-server/lib/cli/bin.js';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) },
    out,
    err,
  };
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

let dir = '';
let server: ChildProcess | undefined;
let upstream = '';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'candor-json-server-'));
  writeFileSync(join(dir, 'db.json'), JSON.stringify({ pet: [], order: [], user: [] }));
  // The petstore's store orders live under /store/order; json-server serves them as /order.
  writeFileSync(join(dir, 'routes.json'), JSON.stringify({ '/store/order*': '/order$1' }));
  const port = await freePort();
  upstream = `http://127.0.0.1:${port}`;
  server = spawn(
    process.execPath,
    [
      BIN,
      join(dir, 'db.json'),
      '--routes',
      join(dir, 'routes.json'),
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--quiet',
    ],
    { stdio: 'ignore' },
  );
  for (let i = 0; i < 200; i++) {
    const up = await fetch(`${upstream}/pet`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('json-server did not start');
}, 180_000);

afterAll(() => {
  server?.kill();
});

type Row = {
  id: string;
  operation: string;
  operation_id: string | null;
  error: string | null;
  passed: boolean;
  envelope: { category: string; remote_effect: string } | null;
  oracle: { verdict: string };
  assertions: { remote_state: { actual: { applied_writes?: number } | null } };
  timeline: Array<{ event: string; detail: string }>;
};

describe('the petstore matrix through candor proxy in front of json-server', () => {
  it("0 unsafe claims, and every row agrees with json-server's own data file", async () => {
    const config = join(dir, 'candor.yaml');
    const matrix = join(dir, 'matrix.yaml');
    expect(
      await main(
        ['init', '--openapi', PETSTORE, '--out', config, '--deadline-ms', '1500'],
        io().io,
      ),
    ).toBe(0);
    expect(
      await main(
        ['matrix', 'generate', '--openapi', PETSTORE, '--config', config, '--out', matrix],
        io().io,
      ),
    ).toBe(0);
    const json = join(dir, 'rows.json');
    const own = join(dir, 'own.json');
    const r = io();
    const code = await main(
      [
        'matrix',
        'run',
        matrix,
        '--config',
        config,
        '--target',
        'proxy',
        '--upstream',
        upstream,
        '--ledger',
        'memory:',
        '--json',
        json,
        '--report',
        own,
        '--quiet',
      ],
      r.io,
    );
    const text = r.out.join('');
    const report = JSON.parse(readFileSync(json, 'utf8')) as {
      summary: Record<string, number>;
      rows: Row[];
    };
    const db = JSON.parse(readFileSync(join(dir, 'db.json'), 'utf8')) as Record<
      string,
      Array<Record<string, unknown>>
    >;

    expect(report.rows.filter((x) => x.error !== null).map((x) => `${x.id}: ${x.error}`)).toEqual(
      [],
    );
    expect(report.summary.unsafe).toBe(0);
    expect(report.summary.secret_leaks).toBe(0);

    // The file's view of each row, where the record carries the row's operation id or is the
    // row's setup record.
    // json-server reuses the highest id after a delete, so a setup record is known by its id
    // and the client reference its creating operation wrote.
    const setupOf = (row: Row): { id: unknown; operation_id: string } | undefined => {
      const e = row.timeline.find((t) => t.event === 'setup_created');
      return e ? (JSON.parse(e.detail) as { id: unknown; operation_id: string }) : undefined;
    };
    const isSetup = (row: Row, r: Record<string, unknown>): boolean =>
      r.id === setupOf(row)?.id && r.client_ref === setupOf(row)?.operation_id;
    const fileApplied = (row: Row): number | null => {
      const op = row.operation_id;
      switch (row.operation) {
        case 'add_pet':
          return db.pet!.filter((p) => p.client_ref === op).length;
        case 'place_order':
          return db.order!.filter((o) => o.client_ref === op).length;
        case 'update_pet':
          return db.pet!.some((p) => p.id === setupOf(row)?.id && p.client_ref === op) ? 1 : 0;
        case 'delete_pet':
          return db.pet!.some((p) => isSetup(row, p)) ? 0 : 1;
        case 'delete_order':
          return db.order!.some((o) => isSetup(row, o)) ? 0 : 1;
        default:
          return null; // reads; users carry no client reference (checked by count below)
      }
    };
    let checked = 0;
    for (const row of report.rows) {
      if (row.envelope === null || (row.id.endsWith('-before-bytes') && false)) continue;
      const file = fileApplied(row);
      if (file === null) continue;
      checked++;
      const proxy = row.assertions.remote_state.actual?.applied_writes;
      expect({ row: row.id, proxy }).toEqual({ row: row.id, proxy: file });
      if (file > 0)
        expect({ row: row.id, effect: row.envelope.remote_effect }).not.toEqual({
          row: row.id,
          effect: 'none',
        });
      if (file === 0 && row.envelope.category === 'outcome_unknown')
        expect({ row: row.id, verdict: row.oracle.verdict }).toEqual({
          row: row.id,
          verdict: 'imprecise',
        });
    }
    const marked = ['add_pet', 'place_order', 'update_pet', 'delete_pet', 'delete_order'];
    expect(checked).toBe(report.rows.filter((x) => marked.includes(x.operation)).length);
    expect(checked).toBeGreaterThan(50);
    // Users carry no client reference: the file's count must equal what the proxy saw applied.
    const users = report.rows.filter((x) => x.operation === 'create_user');
    const setups = report.rows.filter(
      (x) =>
        setupOf(x) !== undefined &&
        ['get_user_by_id', 'update_user', 'delete_user'].includes(x.operation),
    );
    const deleted = report.rows
      .filter((x) => x.operation === 'delete_user')
      .reduce((n, x) => n + (x.assertions.remote_state.actual?.applied_writes ?? 0), 0);
    const created = users.reduce(
      (n, x) => n + (x.assertions.remote_state.actual?.applied_writes ?? 0),
      0,
    );
    expect(db.user!.length).toBe(created + setups.length - deleted);

    // The lie: place_order claims an honoured key that json-server ignores.
    const findings = JSON.parse(readFileSync(own, 'utf8')) as {
      actions: Array<{
        action: string;
        idempotency: { probe: { verdict: string } | null };
        fixes: string[];
      }>;
    };
    const po = findings.actions.find((a) => a.action === 'place_order')!;
    expect(po.idempotency.probe?.verdict).toBe('ignored');
    expect(po.fixes.join(' ')).toContain('idempotency.honoured: false');
    const failed = report.rows
      .filter((x) => !x.passed)
      .map((x) => x.id)
      .sort();
    expect(failed).toEqual([
      'place-order-after-commit-delay',
      'place-order-after-forward-rst',
      'place-order-body-cut-fin',
      'place-order-body-cut-rst',
    ]);
    for (const id of failed) {
      const row = report.rows.find((x) => x.id === id)!;
      expect(row.assertions.remote_state.actual?.applied_writes).toBe(2);
    }
    expect(code).toBe(1);
    expect(text).toContain('key claimed honoured: IGNORED');
  }, 600_000);
});
