// Issue 12, item 9: `candor recover` opens the vault as `serve` does and tells the truth. Each line
// says what was really done; an operation that never sent anything is never looked up or turned
// `unknown`; actions the configuration does not define are listed for a person; the exit code is
// 1 while anything stays unresolved; a second run adds no duplicate observation.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { main } from '../../src/cli/main.js';
import { loadConfig } from '../../src/config/load.js';
import { defineAction } from '../../src/engine/action.js';
import { startFakeService, type FakeService } from '../../src/fakes/index.js';
import { openLedger } from '../../src/ledger/open.js';
import { projectOperations } from '../../src/ledger/projection.js';
import { composeGateway } from '../../src/mcp/start.js';
import { createKeyFile, initVault, openVault } from '../../src/vault/index.js';
import { received, setup, TOKEN } from './support.js';

const SECRET = 'recover-vault-token-51aa0c';
let fake: FakeService;
let dir: string;
beforeAll(async () => {
  fake = await startFakeService({
    tokens: [
      { name: 'vaulted', token: SECRET },
      { name: 'engine', token: TOKEN },
    ],
  });
  dir = mkdtempSync(join(tmpdir(), 'candor-recover-truth-'));
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}

describe('candor recover tells the truth', () => {
  it('vault credentials, first attempts, unconfigured actions, exit 1, no duplicates', async () => {
    const keyFile = join(dir, 'vault.key');
    const vaultPath = join(dir, 'vault.json');
    expect((await createKeyFile(keyFile)).ok).toBe(true);
    const created = await initVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
    if (!created.ok) throw new Error(created.failure.message);
    const set = await created.value.set({
      name: 'records-api',
      type: 'bearer',
      secret: SECRET,
      bindings: [{ kind: 'http', origin: fake.url, path_prefix: '/v1/records' }],
    });
    expect(set.ok).toBe(true);
    const ledgerPath = join(dir, 'ledger.db');
    const configFile = join(dir, 'candor.yaml');
    writeFileSync(
      configFile,
      `
ledger: sqlite:${ledgerPath}
vault: { key_file: ${keyFile}, path: ${vaultPath} }
approvals: { dir: ${join(dir, 'approvals')}, classes: { create: auto } }
credentials:
  records-api: { ref: vault:records-api }
destinations:
  records: { origin: ${fake.url}, credential: records-api, route_prefix: /v1/records }
actions:
  - name: create_record
    class: create
    subject: the record
    description: Create a record.
    destination: records
    request: { method: POST, path: /v1/records, body: { title: '{{input.title}}', client_ref: '{{operation_id}}' } }
    input: { type: object, properties: { title: { type: string } }, required: [title] }
    response: { type: object, properties: { id: { type: string } }, required: [id] }
    remote_ref: id
    reconcile: { method: GET, path: '/v1/records?client_ref={{operation_id}}', items: items, ref: id }
`,
    );
    const loaded = await loadConfig(configFile);
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));

    // The gateway's life before the crash: one committed create whose reply was lost, one
    // operation opened and never attempted, and one operation of an action configured no more.
    {
      const opened = await openLedger(`sqlite:${ledgerPath}`);
      if (!opened.ok) throw new Error(opened.failure.message);
      const vault = await openVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
      if (!vault.ok) throw new Error(vault.failure.message);
      const { runtime } = composeGateway({
        loaded: loaded.value,
        ledger: opened.value,
        vault: vault.value,
        env: {},
      });
      const def = loaded.value.actions[0]!.definition;
      fake.arm({ call_id: 'rt-lost', phase: 'after_commit', action: 'rst' });
      const lost = await runtime.run(def, { title: 'lost reply' }, { correlationId: 'rt-lost' });
      expect(lost).toMatchObject({ category: 'outcome_unknown' });
      await runtime.open(def, { title: 'never sent' }, { correlationId: 'rt-open' });
      const ghost = defineAction({
        name: 'retired_action',
        class: 'create',
        subject: 'the ghost',
        input: z.object({}),
        request: () => ({ method: 'POST', path: '/v1/records' }),
        response: z.unknown(),
        destination: { origin: fake.url, authority_ref: 'vault:records-api' },
      });
      await runtime.open(ghost, {}, { correlationId: 'rt-ghost' });
      await runtime.endSession('crashed');
      await opened.value.close();
    }
    const postsBefore = received(fake, 'rt-open', 'POST');
    expect(postsBefore).toBe(0);

    const run1 = await cli(['recover', '--config', configFile]);
    expect(run1.err).toBe('');
    expect(run1.code).toBe(1); // the retired action stays unresolved
    const lines = run1.out.trim().split('\n');
    expect(
      lines.find((l) => l.includes('create_record') && l.includes('found by lookup')),
    ).toBeDefined();
    expect(lines.find((l) => l.includes('first attempt made'))).toBeDefined();
    // Each line says what was done once ("found by lookup: found by lookup: …" before).
    for (const said of ['found by lookup', 'first attempt made'])
      expect(lines.filter((l) => l.split(said).length > 2)).toEqual([]);
    expect(lines.find((l) => l.includes('retired_action'))).toMatch(
      /needs a person: .*nothing was sent/,
    );
    expect(lines.at(-1)).toMatch(/2 settled, 1 need a person/);
    expect(run1.out).not.toContain(SECRET);

    const opened = await openLedger(`sqlite:${ledgerPath}`);
    if (!opened.ok) throw new Error(opened.failure.message);
    const views = projectOperations(await opened.value.read());
    const byCor = new Map(views.map((v) => [v.correlation_id, v]));
    expect(byCor.get('rt-lost')).toMatchObject({ state: 'succeeded' });
    expect(byCor.get('rt-lost')!.observations).toHaveLength(1);
    // Never looked up, never `unknown`: its first attempt was made and it succeeded.
    expect(byCor.get('rt-open')!.observations).toHaveLength(0);
    expect(byCor.get('rt-open')).toMatchObject({ state: 'succeeded' });
    expect(byCor.get('rt-ghost')).toMatchObject({ state: 'open', attempts: [] });
    const observations = (await opened.value.read()).filter(
      (e) => e.kind === 'observation_recorded',
    );
    await opened.value.close();
    expect(fake.resources.list('records', {}).filter((r) => r.title === 'lost reply')).toHaveLength(
      1,
    );
    expect(fake.resources.list('records', {}).filter((r) => r.title === 'never sent')).toHaveLength(
      1,
    );

    const run2 = await cli(['recover', '--config', configFile]);
    expect(run2.code).toBe(1);
    expect(run2.out).toMatch(/retired_action {2}needs a person/);
    expect(run2.out.trim().split('\n')).toHaveLength(2);
    const again = await openLedger(`sqlite:${ledgerPath}`);
    if (!again.ok) throw new Error(again.failure.message);
    expect(
      (await again.value.read()).filter((e) => e.kind === 'observation_recorded'),
    ).toHaveLength(observations.length);
    await again.value.close();

    // A configuration naming a vault entry that does not exist stops recover at start, with the
    // place in the file, before any operation is touched (as serve does).
    const typo = join(dir, 'candor-typo.yaml');
    writeFileSync(
      typo,
      readFileSync(configFile, 'utf8').replace('ref: vault:records-api', 'ref: vault:record-api'),
    );
    const eventsBefore = await ledgerEvents(ledgerPath);
    const run3 = await cli(['recover', '--config', typo]);
    expect(run3.code).toBe(2);
    expect(run3.out).toBe('');
    expect(run3.err).toMatch(
      new RegExp(
        `^${typo.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+: credentials\\.records-api\\.ref: .*record-api`,
      ),
    );
    expect(await ledgerEvents(ledgerPath)).toBe(eventsBefore);
  });
});

async function ledgerEvents(path: string): Promise<number> {
  const opened = await openLedger(`sqlite:${path}`);
  if (!opened.ok) throw new Error(opened.failure.message);
  const n = (await opened.value.read()).length;
  await opened.value.close();
  return n;
}

describe('recover in the engine', () => {
  it('a lookup that finds nothing without an honoured key: needs a person, once', async () => {
    const s = setup(fake, ['approved']);
    fake.arm({ call_id: 'rt-none', phase: 'after_request_body', action: 'rst' });
    const env = await s.run('create_issue', { title: 'nothing' }, { cor: 'rt-none' });
    expect(env).toMatchObject({ category: 'outcome_unknown' });
    const a = await s.runtime.recover();
    const b = await s.runtime.recover();
    for (const r of [a, b]) {
      expect(r).toMatchObject([{ outcome: 'needs_person', unresolved: true }]);
      expect(r[0]!.detail).toMatch(/found no record/);
    }
    const v = await s.view(env.operation_id!);
    expect(v.observations).toHaveLength(1);
    expect(v.state).toBe('unknown');
    expect(received(fake, 'rt-none', 'POST')).toBe(1);
  });

  it('a never-sent operation under a locked gate: needs a person, nothing sent, still open', async () => {
    const s = setup(fake, ['approved']);
    const opId = await s.runtime.open(
      s.action('create_issue'),
      { title: 'x' },
      {
        correlationId: 'rt-locked',
      },
    );
    s.lock.locked = true;
    const items = await s.runtime.recover();
    expect(items).toMatchObject([
      { operation_id: opId, outcome: 'needs_person', unresolved: true },
    ]);
    expect(items[0]!.detail).toMatch(/nothing was sent/);
    expect(items[0]!.envelope).toMatchObject({ remote_effect: 'none' });
    expect(received(fake, 'rt-locked')).toBe(0);
    expect(await s.view(opId)).toMatchObject({ state: 'open', attempts: [], observations: [] });
  });
});
