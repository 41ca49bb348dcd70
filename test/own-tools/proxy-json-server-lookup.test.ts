// Lookups users write, on a REST server this project did not write (json-server, from npm), behind
// `candor proxy`: parcels have client-chosen ids, and the service already holds older parcels with
// the ids the rows use. A create that never reached the server (cut before it was forwarded, or
// refused before any byte) and one whose reply was lost (json-server refused the duplicate id) must
// never be reported as done: the older parcel is someone else's (lookup_ambiguous, unknown). A
// parcel this operation did make (it carries the operation id) is found, by a query or by id; a
// get-by-id 404 is a negative observation. The teeth: a lookup whose declared identifying field is
// not identifying (every parcel of the recipient) takes an older parcel as this create's effect,
// and the matrix must print the unsafe claim and exit 1.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

const BIN = 'node_modules/json-server/lib/cli/bin.js';
const OLD = '2020-01-01T00:00:00Z';

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

const parcelAction = (name: string, reconcile: string): string => `
  - name: ${name}
    class: create
    subject: the parcel
    description: Register a parcel under an id the caller chooses.
    destination: parcels
    request:
      method: POST
      path: /parcels
      body: { id: '{{input.id}}', recipient: '{{input.recipient}}', client_ref: '{{operation_id}}' }
    input:
      type: object
      properties: { id: { type: string }, recipient: { type: string } }
      required: [id, recipient]
      additionalProperties: false
    response: { type: object, properties: { id: { type: string } }, required: [id] }
    remote_ref: id
    reconcile: ${reconcile}
    timeouts: { total_ms: 1500 }
`;

const CONFIG = `version: 1
ledger: 'memory:'
destinations:
  parcels:
    origin: http://127.0.0.1:9
actions:
${parcelAction(
  'create_parcel',
  `{ path: '/parcels?id={{input.id}}', items: '.', ref: id, identify: { id: '{{input.id}}', recipient: '{{input.recipient}}' }, created_at: created_at }`,
)}
${parcelAction('create_parcel_by_id', `{ shape: one, path: '/parcels/{{input.id}}', ref: id }`)}
${parcelAction(
  'create_parcel_lying',
  `{ path: '/parcels', items: '.', ref: id, identify: { recipient: '{{input.recipient}}' } }`,
)}
`;

type Expect = {
  category: string;
  retry: string;
  remote_effect: string;
  next_action: string;
  final?: { category: string; retry?: string };
  count: number;
  unknown_reason?: string;
};

const unknownThenAmbiguous = (count: number): Expect => ({
  category: 'outcome_unknown',
  retry: 'reconcile_first',
  remote_effect: 'unknown',
  next_action: 'reconcile',
  final: { category: 'outcome_unknown', retry: 'escalate' },
  count,
  unknown_reason: 'the lookup found only an older parcel of the same id: possibly another create',
});

function row(id: string, operation: string, input: object, condition: object, e: Expect): object {
  const { count, ...expect } = e;
  return {
    id,
    operation,
    input,
    condition,
    remote_effect_known: e.remote_effect === 'none' || e.category === 'succeeded',
    expect: { ...expect, remote: { kind: 'parcels', count }, secret_in_result: false },
  };
}

const NOT_FORWARDED = { phase: 'after_request_headers', action: 'rst' };
const REPLY_LOST = { phase: 'after_forward', action: 'rst' };

const HONEST = {
  matrix: 'parcels-lookups',
  rows: [
    row(
      'query-older-refused',
      'create_parcel',
      { id: 'p-old-1', recipient: 'ada' },
      { before_bytes: 'refused' },
      {
        category: 'local_failure',
        retry: 'allowed',
        remote_effect: 'none',
        next_action: 'retry_same_operation',
        final: { category: 'local_failure' },
        count: 0,
      },
    ),
    row(
      'query-older-never-forwarded',
      'create_parcel',
      { id: 'p-old-1', recipient: 'ada' },
      NOT_FORWARDED,
      unknownThenAmbiguous(0),
    ),
    row(
      'query-older-reply-lost',
      'create_parcel',
      { id: 'p-old-1', recipient: 'ada' },
      REPLY_LOST,
      unknownThenAmbiguous(0),
    ),
    row(
      'by-id-older-never-forwarded',
      'create_parcel_by_id',
      { id: 'p-old-2', recipient: 'bob' },
      NOT_FORWARDED,
      unknownThenAmbiguous(0),
    ),
    row(
      'by-id-older-reply-lost',
      'create_parcel_by_id',
      { id: 'p-old-2', recipient: 'bob' },
      REPLY_LOST,
      unknownThenAmbiguous(0),
    ),
    row(
      'by-id-fresh-never-forwarded',
      'create_parcel_by_id',
      { id: 'p-new-a-{{correlation_id}}', recipient: 'cyd' },
      NOT_FORWARDED,
      {
        ...unknownThenAmbiguous(0),
        unknown_reason:
          'the get-by-id found nothing (404), and without an honoured key a person decides',
      },
    ),
    row(
      'by-id-fresh-reply-lost',
      'create_parcel_by_id',
      { id: 'p-new-b-{{correlation_id}}', recipient: 'cyd' },
      REPLY_LOST,
      { ...unknownThenAmbiguous(1), final: { category: 'succeeded' } },
    ),
    row(
      'query-fresh-reply-lost',
      'create_parcel',
      { id: 'p-new-c-{{correlation_id}}', recipient: 'dee' },
      REPLY_LOST,
      { ...unknownThenAmbiguous(1), final: { category: 'succeeded' } },
    ),
  ],
};

const LYING = {
  matrix: 'parcels-lying-lookup',
  rows: [
    row(
      'lying-lookup-never-forwarded',
      'create_parcel_lying',
      { id: 'p-new-d-{{correlation_id}}', recipient: 'ada' },
      NOT_FORWARDED,
      unknownThenAmbiguous(0),
    ),
  ],
};

let dir = '';
let server: ChildProcess | undefined;
let upstream = '';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'candor-json-server-lookup-'));
  writeFileSync(
    join(dir, 'db.json'),
    JSON.stringify({
      parcels: [
        { id: 'p-old-1', recipient: 'ada', created_at: OLD },
        { id: 'p-old-2', recipient: 'bob', created_at: OLD },
      ],
    }),
  );
  writeFileSync(join(dir, 'candor.yaml'), CONFIG);
  writeFileSync(join(dir, 'honest.json'), JSON.stringify(HONEST));
  writeFileSync(join(dir, 'lying.json'), JSON.stringify(LYING));
  const port = await freePort();
  upstream = `http://127.0.0.1:${port}`;
  server = spawn(
    process.execPath,
    [BIN, join(dir, 'db.json'), '--port', String(port), '--host', '127.0.0.1', '--quiet'],
    { stdio: 'ignore' },
  );
  for (let i = 0; i < 200; i++) {
    const up = await fetch(`${upstream}/parcels`).then(
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
  operation_id: string | null;
  error: string | null;
  passed: boolean;
  envelope: { category: string; remote_effect: string } | null;
  final: { category: string; remote_effect: string; data: unknown } | null;
  oracle: { verdict: string; detail: string };
  assertions: Record<string, { ok: boolean; expected: unknown; actual: unknown }>;
};

async function runMatrixFile(name: string, ledger: string) {
  const json = join(dir, `${name}.report.json`);
  const r = io();
  const code = await main(
    [
      'matrix',
      'run',
      join(dir, `${name}.json`),
      '--config',
      join(dir, 'candor.yaml'),
      '--target',
      'proxy',
      '--upstream',
      upstream,
      '--ledger',
      ledger,
      '--json',
      json,
    ],
    r.io,
  );
  const report = JSON.parse(readFileSync(json, 'utf8')) as {
    summary: Record<string, number>;
    rows: Row[];
  };
  return { code, text: r.out.join('') + r.err.join(''), report };
}

describe('lookups by a client-chosen id, json-server behind candor proxy', () => {
  it('an older parcel with the same id is never taken as this create: no false success', async () => {
    const ledger = `sqlite:${join(dir, 'honest.db')}`;
    const { code, text, report } = await runMatrixFile('honest', ledger);
    const broken = report.rows
      .filter((x) => !x.passed)
      .map((x) => `${x.id}: ${x.error ?? ''} ${JSON.stringify(x.assertions)} ${x.oracle.detail}`);
    expect(broken).toEqual([]);
    expect(report.summary.unsafe).toBe(0);
    expect(text).toContain('0 unsafe claims');
    expect(code).toBe(0);

    const byId = (id: string): Row => report.rows.find((x) => x.id === id)!;
    // No row claims the older parcels as its effect.
    for (const id of [
      'query-older-never-forwarded',
      'query-older-reply-lost',
      'by-id-older-never-forwarded',
      'by-id-older-reply-lost',
    ]) {
      expect({ id, final: byId(id).final }).toMatchObject({
        id,
        final: {
          category: 'outcome_unknown',
          remote_effect: 'unknown',
          data: { escalation: { code: 'lookup_ambiguous' } },
        },
      });
    }
    // The 404 of a get-by-id is absence, not ambiguity.
    expect(byId('by-id-fresh-never-forwarded').final?.data).toBeNull();
    // Found when bound: the parcel carries this operation's id.
    for (const id of ['by-id-fresh-reply-lost', 'query-fresh-reply-lost'])
      expect(byId(id).final?.data).toMatchObject({ client_ref: byId(id).operation_id });

    // json-server's own file: the older parcels are untouched, and the two fresh creates that
    // reached it are there once each.
    const db = JSON.parse(readFileSync(join(dir, 'db.json'), 'utf8')) as {
      parcels: Array<Record<string, unknown>>;
    };
    expect(db.parcels.filter((p) => p.id === 'p-old-1')).toEqual([
      { id: 'p-old-1', recipient: 'ada', created_at: OLD },
    ]);
    expect(db.parcels.filter((p) => p.id === 'p-old-2')).toEqual([
      { id: 'p-old-2', recipient: 'bob', created_at: OLD },
    ]);
    for (const id of ['by-id-fresh-reply-lost', 'query-fresh-reply-lost'])
      expect(db.parcels.filter((p) => p.client_ref === byId(id).operation_id)).toHaveLength(1);

    // Every lookup is an observation, with its template, status and verdict.
    const observations = async (rowId: string): Promise<unknown[]> => {
      const r = io();
      const opId = byId(rowId).operation_id!;
      expect(await main(['ops', 'show', opId, '--json', '--ledger', ledger], r.io)).toBe(0);
      return (JSON.parse(r.out.join('')) as { observations: unknown[] }).observations;
    };
    expect(await observations('by-id-fresh-never-forwarded')).toEqual([
      expect.objectContaining({
        source: 'lookup',
        verdict: 'absent',
        status: 404,
        request: 'GET /parcels/{{input.id}}',
        matches: 0,
      }),
    ]);
    expect(await observations('query-older-reply-lost')).toEqual([
      expect.objectContaining({
        verdict: 'ambiguous',
        status: 200,
        request: 'GET /parcels?id={{input.id}}',
        matches: 0,
        unbound: 1,
        state_after: 'unknown',
      }),
    ]);
    expect(await observations('by-id-fresh-reply-lost')).toEqual([
      expect.objectContaining({ verdict: 'found', status: 200, matches: 1 }),
    ]);
  }, 300_000);

  it('teeth: a lookup that binds any parcel of the recipient prints an unsafe claim and exits 1', async () => {
    const { code, text, report } = await runMatrixFile('lying', 'memory:');
    const r = report.rows[0]!;
    expect(r.final).toMatchObject({ category: 'succeeded', remote_effect: 'applied' });
    expect(r.oracle.verdict).toBe('unsafe');
    expect(r.passed).toBe(false);
    expect(report.summary.unsafe).toBe(1);
    expect(text).toContain('1 unsafe claims');
    expect(code).toBe(1);
  }, 300_000);
});
