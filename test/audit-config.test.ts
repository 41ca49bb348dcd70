// The `audit:` section's witness fields: a witness is configured with its key as well as its URL,
// bad combinations are refused with FILE:LINE:COL, and witness_required reaches the engine through
// the gateway (a destructive tool call is held as gate_locked when the witness is down).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { generateKey, SigType } from '../src/ledger/chain/note.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { composeGateway } from '../src/mcp/start.js';
import { TEST_TOKEN, TEST_TOKEN_VAR, testConfigYaml } from './fixtures/mcp/config.js';

let fake: FakeService;
let dir: string;
let keyFile: string;
const log = generateKey('gateway.test/log');
const wit = generateKey('witness.test/gw', SigType.cosignature_v1);
beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 'test', token: TEST_TOKEN }] });
  dir = mkdtempSync(join(tmpdir(), 'candor-audit-config-'));
  keyFile = join(dir, 'log.key');
  writeFileSync(keyFile, `${log.signerKey}\n`);
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

const yamlWith = (audit: string): string =>
  `${testConfigYaml({ origin: fake.url })}audit:\n${audit}`;

describe('audit config: the witness is trusted through its key', () => {
  it('refuses witness_url without witness_key, and witness_required without a witness', () => {
    const r = parseConfig(
      yamlWith(`  log_key_file: ${keyFile}\n  witness_url: http://127.0.0.1:9\n`),
      'candor.yaml',
    );
    expect(r.ok).toBe(false);
    expect(r.failure?.message).toMatch(
      /^candor\.yaml:\d+:\d+: .*witness_url needs witness_key: a witness is trusted only through its key/m,
    );
    const req = parseConfig(
      yamlWith(`  log_key_file: ${keyFile}\n  witness_required: true\n`),
      'candor.yaml',
    );
    expect(req.failure?.message).toMatch(/witness_required needs witness_url and witness_key/);
  });

  it('refuses a witness_key that is not a witness (cosignature) key at start', () => {
    const loaded = parseConfig(
      yamlWith(
        `  log_key_file: ${keyFile}\n  witness_url: http://127.0.0.1:9\n  witness_key: ${log.verifierKey}\n`,
      ),
      'candor.yaml',
    );
    if (!loaded.ok) throw new Error(loaded.failure.message);
    expect(() =>
      composeGateway({ loaded: loaded.value, ledger: openMemoryLedger(), env: {} }),
    ).toThrow(/audit\.witness_key: not a witness/);
  });

  it('witness_required holds a destructive tool call when the witness is down: nothing sent', async () => {
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
    await new Promise<void>((r) => s.close(() => r()));
    const loaded = parseConfig(
      yamlWith(
        `  log_key_file: ${keyFile}\n  witness_url: ${url}\n  witness_key: ${wit.verifierKey}\n  witness_required: true\n  witness_wait_ms: 300\n`,
      ),
      'candor.yaml',
    );
    if (!loaded.ok) throw new Error(loaded.failure.message);
    const logged: string[] = [];
    const ledger = openMemoryLedger();
    const { gateway } = composeGateway({
      loaded: loaded.value,
      ledger,
      env: { [TEST_TOKEN_VAR]: TEST_TOKEN },
      log: (l) => logged.push(l),
    });
    const before = fake.groundTruth().length;
    const r = await gateway.callTool('delete_record', { id: 'rec_keep' });
    const env = r.structuredContent as { category: string; message: string };
    expect(env.category).toBe('gate_locked');
    expect(env.message).toContain(`The audit witness witness.test/gw (${url})`);
    expect(fake.groundTruth()).toHaveLength(before);
    expect((await ledger.read()).some((e) => e.kind === 'attempt_started')).toBe(false);
    expect(logged.join('\n')).toMatch(/stored unwitnessed: witness did not answer/);
  });
});
