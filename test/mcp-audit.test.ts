// The gateway's `audit:` section: diagnostics sealed to the auditor key, checkpoints signed with the
// log key; a bad key stops the gateway at start instead of running unsealed.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { verifyStore } from '../src/ledger/chain/export.js';
import { generateKey } from '../src/ledger/chain/note.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { encodeSealPublicKey, generateSealKeyPair, isSealedPayload } from '../src/ledger/seal.js';
import { composeGateway } from '../src/mcp/start.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';

let fake: FakeService;
let dir: string;
beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 'test', token: TEST_TOKEN }] });
  dir = mkdtempSync(join(tmpdir(), 'candor-mcp-audit-'));
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('gateway audit section', () => {
  it('seals diagnostics and signs checkpoints', async () => {
    const auditor = generateSealKeyPair();
    const log = generateKey('gateway.test/log');
    const keyFile = join(dir, 'log.key');
    writeFileSync(keyFile, `${log.signerKey}\n`);
    const yaml = `${testConfigYaml({ origin: fake.url })}audit:\n  seal_to: ${encodeSealPublicKey(auditor.publicKey)}\n  log_key_file: ${keyFile}\n  checkpoint_every: 3\n`;
    const loaded = parseConfig(yaml, 'candor.yaml');
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
    const ledger = openMemoryLedger();
    const { gateway, runtime } = composeGateway({
      loaded: loaded.value,
      ledger,
      env: { [TEST_TOKEN_VAR]: TEST_TOKEN },
    });
    fake.arm({
      match: { method: 'DELETE' },
      phase: 'status',
      status: 403,
      body: { error: 'forbidden by policy 42' },
    });
    const r = await gateway.callTool('delete_record', { id: 'rec_missing' });
    expect(r.isError).toBe(true);
    await gateway.callTool('create_record', { title: 'audited' });
    await runtime.endSession('done');
    const events = await ledger.read();
    expect(JSON.stringify(events)).not.toContain('forbidden by policy 42');
    const diags = events
      .filter((e) => e.kind === 'attempt_finished')
      .map((e) => (e.data as { diagnostics: unknown }).diagnostics);
    expect(diags.length).toBeGreaterThanOrEqual(2);
    expect(diags.every((d) => isSealedPayload(d))).toBe(true);
    expect(events.some((e) => e.kind === 'checkpoint')).toBe(true);
    expect(await verifyStore(ledger, { logKeys: [log.verifierKey] })).toMatchObject({
      code: 'INTACT',
      signatures_checked: true,
    });
  });

  it('refuses to start with a log key file that is not a key', () => {
    const bad = join(dir, 'bad.key');
    writeFileSync(bad, 'not a key\n');
    const loaded = parseConfig(
      `${testConfigYaml({ origin: fake.url })}audit:\n  log_key_file: ${bad}\n`,
      'candor.yaml',
    );
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.failure));
    expect(() =>
      composeGateway({ loaded: loaded.value, ledger: openMemoryLedger(), env: {} }),
    ).toThrow(/audit.log_key_file/);
  });
});
