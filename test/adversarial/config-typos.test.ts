// Issue 12, item 14: a typo never weakens a contract. Approval overrides that name no action or
// class, or that would let a sensitive class run without a person, and `vault:` references the
// vault does not hold are refused at start with FILE:LINE:COL; a credential that cannot be
// resolved is reported as such (local_failure, retry escalate), never as a connection problem.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { startFakeService, type FakeService } from '../../src/fakes/index.js';
import { runCli, STACK_OR_CLASS } from './cli.js';
import { received, setup } from './support.js';

const BASE = `ledger: 'memory:'
destinations:
  api: { origin: 'http://127.0.0.1:9' }
actions:
  - name: create_payment
    class: financial
    subject: the payment
    description: Pay.
    destination: api
    request: { method: POST, path: /payments }
  - name: add_note
    class: append
    subject: the note
    description: Note.
    destination: api
    request: { method: POST, path: /notes }
`;

function problems(approvals: string): string {
  const r = parseConfig(`${BASE}approvals:\n${approvals}`, 'candor.yaml');
  expect(r.ok).toBe(false);
  return r.failure!.message;
}

describe('approval overrides', () => {
  it('an action name that is not configured is an error at its key', () => {
    // Line 17 is `approvals:`; the typo is on line 19, column 5.
    expect(problems('  actions:\n    create_paymnt: auto\n')).toBe(
      'candor.yaml:19:5: approvals.actions.create_paymnt: no action named "create_paymnt" under actions',
    );
  });

  it('a sensitive action set to auto is an error at its value', () => {
    expect(problems('  actions:\n    create_payment: auto\n')).toMatch(
      /^candor\.yaml:19:21: approvals\.actions\.create_payment: action create_payment is of sensitive class financial and cannot be approved automatically$/,
    );
  });

  it('an unknown class and a sensitive class set to auto are errors, both reported', () => {
    const message = problems('  classes:\n    finacial: session\n    destructive: auto\n');
    expect(message.split('\n')).toEqual([
      expect.stringMatching(
        /^candor\.yaml:19:5: approvals\.classes\.finacial: unknown action class "finacial"/,
      ),
      'candor.yaml:20:18: approvals.classes.destructive: class destructive is sensitive and cannot be approved automatically (session or per_call)',
    ]);
  });

  it('valid overrides still load', () => {
    const r = parseConfig(
      `${BASE}approvals:\n  classes: { append: auto }\n  actions: { create_payment: session }\n`,
      'candor.yaml',
    );
    expect(r.ok).toBe(true);
  });
});

describe('vault references', () => {
  const dir = mkdtempSync(join(tmpdir(), 'candor-typo-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const vault = join(dir, 'vault.json');
  const key = join(dir, 'vault.key');
  const env = { ...process.env, TOKEN_VALUE: 'typo-canary-7d21' };

  it('serve --strict refuses a vault: reference the vault does not hold, with FILE:LINE:COL (exit 2)', async () => {
    expect(
      (await runCli(['vault', 'init', '--vault', vault, '--key-file', key], { env })).code,
    ).toBe(0);
    const set = await runCli(
      [
        'vault',
        'set',
        'api_token',
        '--vault',
        vault,
        '--key-file',
        key,
        '--type',
        'bearer',
        '--bind',
        'http://127.0.0.1:9/',
        '--value-env',
        'TOKEN_VALUE',
      ],
      { env },
    );
    expect(set.code).toBe(0);
    const config = join(dir, 'candor.yaml');
    writeFileSync(
      config,
      `ledger: 'memory:'
vault: { path: '${vault}', key_file: '${key}' }
credentials:
  api: { ref: 'vault:api_tokn' }
destinations:
  api: { origin: 'http://127.0.0.1:9', credential: api }
actions:
  - name: read_item
    class: read
    subject: the item
    description: Read.
    destination: api
    request: { method: GET, path: /items }
`,
    );
    // --strict: a missing entry is fatal at start (without it, serve names it and starts).
    const r = await runCli(['serve', '--config', config, '--strict'], { env });
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      `${config}:4:15: credentials.api.ref: the vault holds no credential named "api_tokn" (candor vault list shows what it holds)\n`,
    );
    expect(r.err).not.toMatch(STACK_OR_CLASS);
  });
});

describe('a credential that cannot be resolved', () => {
  let fake: FakeService;
  beforeAll(async () => {
    fake = await startFakeService({ seed: 14 });
  });
  afterAll(() => fake.close());

  it('says credential unavailable, escalates, and sends nothing', async () => {
    const s = setup(fake, [], {
      credentials: {
        resolve: () => Promise.resolve({ ok: false, failure: { code: 'unknown_ref' } }),
      },
    });
    const env = await s.run('read_issue', { id: 'iss_14' }, { cor: 'cor-cred-14' });
    expect(env).toMatchObject({
      ok: false,
      category: 'local_failure',
      retry: 'escalate',
      remote_effect: 'none',
    });
    expect(env.message).toMatch(/credential is unavailable/);
    expect(env.message).not.toMatch(/connection could not be made/);
    expect(received(fake, 'cor-cred-14')).toBe(0);
    const view = await s.view(env.operation_id!);
    expect(view.attempts.at(-1)?.finish?.category).toBe('local_failure');
    await s.ledger.close();
  });
});
