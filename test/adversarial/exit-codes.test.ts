// Issue 12, item 12: the same mistake has the same exit code in every command, and readers open a
// read-only ledger read-only. Each case runs the real CLI.
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/store.js';
import { runCli, STACK_OR_CLASS } from './cli.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-exit-'));
chmodSync(dir, 0o755); // the read-only case below may run as an unprivileged user
afterAll(() => {
  chmodSync(dir, 0o755);
  rmSync(dir, { recursive: true, force: true });
});
const MATRIX = new URL('../../examples/matrix/reference.yaml', import.meta.url).pathname;
const CONFIG = join(dir, 'candor.yaml');
writeFileSync(
  CONFIG,
  `ledger: 'memory:'
destinations:
  api: { origin: 'http://127.0.0.1:9' }
actions:
  - name: read_item
    class: read
    subject: the item
    description: Read an item.
    destination: api
    request: { method: GET, path: /items }
`,
);

const COMMANDS: [string, string[]][] = [
  ['ops list', ['ops', 'list']],
  ['ops show', ['ops', 'show', 'op_1']],
  ['recover', ['recover', '--config', CONFIG]],
  ['matrix run', ['matrix', 'run', MATRIX]],
  ['demo', ['demo']],
  ['audit export', ['audit', 'export', '--out', join(dir, 'b.jsonl')]],
  ['serve', ['serve', '--config', CONFIG]],
];

describe('a bad ledger URL is a usage error (2) in every command', () => {
  for (const bad of ['sqlite:', 'sqlite://', 'mysql://db/x']) {
    it.each(COMMANDS)(`%s --ledger ${bad}`, async (_name, args) => {
      const r = await runCli([...args, '--ledger', bad]);
      expect(r.code).toBe(2);
      expect(r.out).toBe('');
      expect(r.err.trim().split('\n')).toHaveLength(1);
      expect(r.err).toMatch(/ledger/i);
      expect(r.err).not.toMatch(STACK_OR_CLASS);
    });
  }

  it('audit verify sqlite: (no path) is a usage error too', async () => {
    const r = await runCli(['audit', 'verify', 'sqlite:']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('names no file');
  });

  it('a bad ledger URL in candor.yaml is a usage error with FILE:LINE:COL', async () => {
    const file = join(dir, 'bad-ledger.yaml');
    writeFileSync(file, `ledger: 'sqlite:'\n${readConfigTail()}`);
    const r = await runCli(['serve', '--config', file]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/bad-ledger\.yaml:1:9: ledger: ledger URL "sqlite:" names no file/);
  });
});

function readConfigTail(): string {
  return `destinations:
  api: { origin: 'http://127.0.0.1:9' }
actions:
  - name: read_item
    class: read
    subject: the item
    description: Read an item.
    destination: api
    request: { method: GET, path: /items }
`;
}

describe('readers open a read-only ledger read-only', () => {
  it('ops list, ops show and audit verify work on a read-only ledger file', async () => {
    const ro = join(dir, 'ro');
    mkdirSync(ro);
    const file = join(ro, 'ledger.db');
    const store = openSqliteLedger(file);
    const [opened] = await store.append([
      {
        kind: 'session_started',
        at: 1,
        session_id: 'ses_1',
        operation_id: null,
        correlation_id: null,
        data: { owner: 'test', instance_id: 'i1', pid: 1, agent: null },
      },
    ]);
    await store.close();
    expect(opened).toBeDefined();
    chmodSync(file, 0o444);
    // The directory stays writable for the reader: SQLite reads a WAL ledger through a -shm index.
    chmodSync(ro, 0o777);
    const before = statSync(file).mtimeMs;
    // root ignores file modes: run the readers as an unprivileged user when we are root.
    const asUser =
      process.getuid?.() === 0 ? { uid: 65534, gid: 65534, cwd: tmpdir() } : { cwd: tmpdir() };
    const list = await runCli(['ops', 'list', '--ledger', `sqlite:${file}`], asUser);
    expect(list.err).toBe('');
    expect(list.code).toBe(0);
    const show = await runCli(['ops', 'show', 'op_missing', '--ledger', `sqlite:${file}`], asUser);
    expect(show.err).not.toMatch(/cannot open|readonly|read-only/i);
    const verify = await runCli(['audit', 'verify', `sqlite:${file}`], asUser);
    expect(verify.err).toBe('');
    expect(verify.code).toBe(0);
    // No checkpoint: the records agree, but nothing anchors them (never shown as INTACT).
    expect(verify.out).toMatch(/^UNANCHORED: the hash chain of 1 record\(s\) is consistent/);
    expect(statSync(file).mtimeMs).toBe(before);
  });

  /** A ledger with `n` sessions, its files copied into a fresh directory then made read-only. */
  async function readOnlyDirectory(name: string, keepWal: boolean): Promise<string> {
    const src = join(dir, `${name}-src`);
    mkdirSync(src);
    const store = openSqliteLedger(join(src, 'ledger.db'));
    for (let i = 1; i <= 3; i++) {
      await store.append([
        {
          kind: 'session_started',
          at: i,
          session_id: `ses_${i}`,
          operation_id: null,
          correlation_id: null,
          data: { owner: 'test', instance_id: 'i1', pid: 1, agent: null },
        },
      ]);
    }
    const ro = join(dir, name);
    mkdirSync(ro);
    // Copied while the writer is open, the -wal file still holds the events (keepWal); after
    // close, every event is in the main file and no -wal is left.
    if (!keepWal) await store.close();
    for (const f of readdirSync(src).filter((f) => f !== 'ledger.db-shm')) {
      copyFileSync(join(src, f), join(ro, f));
      chmodSync(join(ro, f), 0o444);
    }
    if (keepWal) await store.close();
    expect(existsSync(join(ro, 'ledger.db-wal'))).toBe(keepWal);
    chmodSync(ro, 0o555);
    return join(ro, 'ledger.db');
  }

  const asReader = (): { uid?: number; gid?: number; cwd: string } =>
    process.getuid?.() === 0 ? { uid: 65534, gid: 65534, cwd: tmpdir() } : { cwd: tmpdir() };

  it('a ledger in a read-only directory (read-only media) is read, nothing created there', async () => {
    const file = await readOnlyDirectory('ro-dir', false);
    const list = await runCli(['ops', 'list', '--ledger', `sqlite:${file}`], asReader());
    expect(list.err).toBe('');
    expect(list.code).toBe(0);
    const verify = await runCli(['audit', 'verify', `sqlite:${file}`], asReader());
    expect(verify.err).toBe('');
    expect(verify.code).toBe(0);
    expect(verify.out).toMatch(/^UNANCHORED: the hash chain of 3 record\(s\) is consistent/);
    expect(readdirSync(join(dir, 'ro-dir')).sort()).toEqual(['ledger.db']);
  });

  it('a read-only directory whose -wal holds events: one clear line, exit 3, never a partial read', async () => {
    const file = await readOnlyDirectory('ro-wal', true);
    const verify = await runCli(['audit', 'verify', `sqlite:${file}`], asReader());
    expect(verify.code).toBe(3);
    expect(verify.out).toBe('');
    expect(verify.err).toMatch(
      /its directory is read-only and ledger\.db-wal holds events not yet in the main file/,
    );
    expect(verify.err.trim().split('\n')).toHaveLength(1);
    expect(verify.err).not.toMatch(STACK_OR_CLASS);
  });
});
