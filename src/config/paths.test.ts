import { mkdtempSync, mkdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from './load.js';

// A configuration in one folder, loaded from a process whose working directory is another one (as
// an MCP client starts the gateway): every relative path must land beside the file.
describe('relative paths in candor.yaml', () => {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'candor-paths-')));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const confDir = join(root, 'project', 'conf');
  const elsewhere = join(root, 'elsewhere');
  mkdirSync(confDir, { recursive: true });
  mkdirSync(elsewhere, { recursive: true });

  async function loadFromElsewhere(
    text: string,
    upstream = 'upstreams: { n: { command: node } }\n',
  ) {
    const file = join(confDir, 'candor.yaml');
    writeFileSync(file, text + upstream);
    const cwd = process.cwd();
    process.chdir(elsewhere);
    try {
      // A relative --config path is taken against the working directory, its contents against
      // the file's folder.
      const loaded = await loadConfig(join('..', 'project', 'conf', 'candor.yaml'));
      if (!loaded.ok) throw new Error(loaded.failure.message);
      return loaded.value;
    } finally {
      process.chdir(cwd);
    }
  }

  it('resolves the ledger, vault, key files, approvals queue and upstream folder against the file', async () => {
    const loaded = await loadFromElsewhere(
      `ledger: sqlite:./.candor/ledger.db
vault: { key_file: keys/vault.key }
audit: { log_key_file: ../log.key }
approvals: { approver: console }
upstreams:
  notes: { command: node, args: [./notes.mjs] }
  pinned: { command: node, cwd: /srv/mcp }
`,
      '',
    );
    expect(loaded.dir).toBe(confDir);
    const c = loaded.config;
    expect(c.ledger).toBe(`sqlite:${join(confDir, '.candor', 'ledger.db')}`);
    expect(c.vault).toEqual({
      path: join(confDir, '.candor', 'vault.json'),
      key_file: join(confDir, 'keys', 'vault.key'),
    });
    expect(c.audit?.log_key_file).toBe(join(root, 'project', 'log.key'));
    expect(c.approvals?.dir).toBe(join(confDir, '.candor', 'approvals'));
    expect(c.upstreams?.notes?.cwd).toBe(confDir);
    expect(c.upstreams?.pinned?.cwd).toBe('/srv/mcp');
  });

  it('resolves the default ledger and an explicit vault path too, and leaves other ledgers alone', async () => {
    const a = await loadFromElsewhere(`vault: { path: v.json, key_file: /abs/vault.key }\n`);
    expect(a.config.ledger).toBe(`sqlite:${join(confDir, '.candor', 'ledger.db')}`);
    expect(a.config.vault).toEqual({ path: join(confDir, 'v.json'), key_file: '/abs/vault.key' });
    const b = await loadFromElsewhere(`ledger: 'memory:'\n`);
    expect(b.config.ledger).toBe('memory:');
    const c = await loadFromElsewhere(`ledger: postgres://u@db.example/candor\n`);
    expect(c.config.ledger).toBe('postgres://u@db.example/candor');
  });
});
