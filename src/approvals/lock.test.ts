import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openMemoryLedger } from '../ledger/memory/store.js';
import { scriptedApprover } from './approvers/scripted.js';
import { createApprovalGate } from './gate.js';
import { lockFile, RACY_MS, vaultLock } from './lock.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('lock sources', () => {
  it('lock file: lock, holder, unlock; a gate records who locked it', async () => {
    const lf = lockFile(join(dir, 'a'));
    expect(await lf.isLocked()).toBe(false);
    expect(await lf.lock('console:alice', 1)).toEqual({ changed: true });
    expect(await lf.lock('console:bob', 2)).toEqual({ changed: false });
    expect(await lf.holder()).toEqual({ by: 'console:alice', at: 1 });
    const ledger = openMemoryLedger();
    const gate = createApprovalGate({ ledger, approver: scriptedApprover(), lock: lf });
    const ctx = {
      session_id: 's',
      operation_id: 'op_1',
      action: 'read_issue',
      action_class: 'read' as const,
      request_fingerprint: 'f',
      prior_dispatch_state: null,
      intent: {},
    };
    expect(await gate.check(ctx)).toEqual({ decision: 'gate_locked' });
    expect(await lf.unlock()).toEqual({ changed: true, by: 'console:alice' });
    expect(await gate.check(ctx)).toEqual({ decision: 'approved' });
    const changes = (await ledger.read()).map((e) => e.kind === 'gate_changed' && e.data);
    expect(changes).toEqual([
      { locked: true, by: 'lock_file:console:alice' },
      { locked: false, by: 'observed:lock_file' },
    ]);
  });

  it('lock file: an unreadable lock file still locks', async () => {
    const lf = lockFile(join(dir, 'b'));
    await lf.lock('x', 1);
    writeFileSync(lf.path, 'not json');
    expect(await lf.isLocked()).toBe(true);
  });

  it('lock file: watched through its folder, not read on every check; changes seen at once', async () => {
    const folder = join(dir, 'c');
    mkdirSync(folder);
    let reads = 0;
    const lf = lockFile(folder, (p) => {
      reads++;
      return readFile(p, 'utf8');
    });
    // Another process (its own lock file object) locks and unlocks.
    const other = lockFile(folder);
    const settle = () => {
      const past = (Date.now() - RACY_MS * 2) / 1000;
      utimesSync(folder, past, past);
    };
    settle();
    expect(await lf.isLocked()).toBe(false);
    const first = reads;
    for (let i = 0; i < 5; i++) expect(await lf.isLocked()).toBe(false);
    expect(reads).toBe(first); // a settled, unchanged folder is not read again
    await other.lock('console:carol', 3);
    expect(await lf.isLocked()).toBe(true); // within the racy window: read, not cached
    settle();
    expect(await lf.isLocked()).toBe(true);
    const locked = reads;
    expect(await lf.isLocked()).toBe(true);
    expect(reads).toBe(locked);
    await other.unlock();
    expect(await lf.isLocked()).toBe(false);
    // No folder at all: unlocked, nothing read.
    const none = lockFile(join(dir, 'absent'), () => Promise.reject(new Error('read')));
    expect(await none.isLocked()).toBe(false);
  });

  it('lock file: a folder that cannot be examined fails closed', async () => {
    // The "folder" is a file: stat of a path below it fails with ENOTDIR, not "absent".
    const file = join(dir, 'not-a-folder');
    writeFileSync(file, 'x');
    const lf = lockFile(join(file, 'approvals'));
    await expect(lf.isLocked()).rejects.toThrow();
    const gate = createApprovalGate({
      ledger: openMemoryLedger(),
      approver: scriptedApprover(['approved']),
      lock: lf,
    });
    expect(
      await gate.check({
        session_id: 's',
        operation_id: 'op_2',
        action: 'read_issue',
        action_class: 'read',
        request_fingerprint: 'f',
        prior_dispatch_state: null,
        intent: {},
      }),
    ).toEqual({ decision: 'gate_locked' });
  });

  it('vault: only the vault saying "locked" counts as locked', async () => {
    const answer = (code: string | null) =>
      vaultLock({
        checkGate: () =>
          Promise.resolve(
            code === null ? { ok: true as const } : { ok: false as const, failure: { code } },
          ),
      });
    expect(await answer('locked').isLocked()).toBe(true);
    expect(await answer(null).isLocked()).toBe(false);
    expect(await answer('vault_unavailable').isLocked()).toBe(false);
  });
});
