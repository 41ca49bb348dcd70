// The gateway with a real encrypted vault: the credential is resolved inside the runtime from a
// vault:NAME reference; locking the vault ends every action with gate_locked and no connection.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.js';
import { envelopeSchema } from '../src/core/envelope.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { composeGateway } from '../src/mcp/start.js';
import { createKeyFile, initVault, openVault } from '../src/vault/index.js';

const SECRET = 'vault-held-token-3b9d51c0e2';
let fake: FakeService;
let dir: string;
beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 'vaulted', token: SECRET }] });
  dir = mkdtempSync(join(tmpdir(), 'candor-mcp-vault-'));
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

const config = (keyFile: string, vaultPath: string): string => `
ledger: 'memory:'
vault: { key_file: ${keyFile}, path: ${vaultPath} }
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
`;

describe('gateway with a vault', () => {
  it('resolves vault:NAME inside the runtime; a locked vault gives gate_locked and sends nothing', async () => {
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

    const loaded = parseConfig(config(keyFile, vaultPath), 'candor.yaml');
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
    const vault = await openVault({ kind: 'key_file', path: keyFile }, { path: vaultPath });
    if (!vault.ok) throw new Error(vault.failure.message);
    const ledger = openMemoryLedger();
    const { gateway } = composeGateway({
      loaded: loaded.value,
      ledger,
      vault: vault.value,
      env: {},
    });

    const ok = envelopeSchema.parse(
      (await gateway.callTool('create_record', { title: 'from the vault' })).structuredContent,
    );
    expect(ok).toMatchObject({ ok: true, category: 'succeeded' });
    expect(
      fake.resources.list('records', {}).filter((r) => r.title === 'from the vault'),
    ).toHaveLength(1);

    expect((await vault.value.lock('test-operator')).ok).toBe(true);
    const locked = envelopeSchema.parse(
      (await gateway.callTool('create_record', { title: 'while locked' })).structuredContent,
    );
    expect(locked).toMatchObject({
      ok: false,
      category: 'gate_locked',
      retry: 'never',
      remote_effect: 'none',
    });
    expect(fake.groundTruth(locked.correlation_id!)).toEqual([]);
    expect(
      fake.resources.list('records', {}).filter((r) => r.title === 'while locked'),
    ).toHaveLength(0);

    // The lock is on record (its source: the vault).
    const changes = (await ledger.read()).filter((e) => e.kind === 'gate_changed');
    expect(changes.map((e) => e.data)).toEqual([{ locked: true, by: 'vault' }]);
    const events = JSON.stringify(await ledger.read());
    for (const form of [SECRET, Buffer.from(SECRET).toString('base64')]) {
      expect(events).not.toContain(form);
      expect(JSON.stringify([ok, locked])).not.toContain(form);
    }
  });
});
