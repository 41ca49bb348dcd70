// Issue 12, item 3: every path that sends bytes passes the gate. Reconciliation lookups and
// recovery honour the lock (lock file / approvals lock and the vault lock) and send nothing.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyLock, lockFile, vaultLock } from '../../src/approvals/index.js';
import type { CredentialProvider, Gate } from '../../src/engine/ports.js';
import { startFakeService, type FakeService } from '../../src/fakes/index.js';
import { REFERENCE_AUTHORITY } from '../../src/matrix/reference-actions.js';
import { received, setup, TOKEN } from './support.js';

let fake: FakeService;
let dir: string;
beforeAll(async () => {
  fake = await startFakeService({ seed: 3 });
  dir = mkdtempSync(join(tmpdir(), 'candor-gate-paths-'));
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A create that is committed and then reset before any reply: outcome unknown. */
async function unknownCreate(s: ReturnType<typeof setup>, cor: string): Promise<string> {
  fake.arm({ call_id: cor, phase: 'after_commit', action: 'rst' });
  const env = await s.run('create_deployment', { service: 'api', version: '1' }, { cor });
  expect(env).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
  return env.operation_id!;
}

/** A gate that approves every check, whose lock answer fails once `fail()` is called. */
function unreadableLockGate(): { gate: () => Gate; fail: () => void } {
  let failing = false;
  return {
    gate: () => ({
      check: () => Promise.resolve({ decision: 'approved' }),
      locked: () =>
        failing ? Promise.reject(new Error('lock state unreadable')) : Promise.resolve(false),
    }),
    fail: () => {
      failing = true;
    },
  };
}

describe('lookups and recovery pass the gate', () => {
  it('locked gate: reconcile answers gate_locked and sends no lookup; recover sends nothing', async () => {
    const s = setup(fake, ['approved']);
    const opId = await unknownCreate(s, 'gp-1');
    s.lock.locked = true;
    const env = await s.runtime.reconcile(opId);
    expect(env).toMatchObject({
      ok: false,
      category: 'gate_locked',
      remote_effect: 'unknown',
      retry: 'escalate',
    });
    const items = await s.runtime.recover();
    expect(items).toMatchObject([
      { operation_id: opId, outcome: 'needs_person', unresolved: true },
    ]);
    expect(items[0]!.detail).toMatch(/gate is locked/);
    expect(received(fake, 'gp-1.lookup')).toBe(0);
    expect(received(fake, 'gp-1', 'POST')).toBe(1);
    const v = await s.view(opId);
    expect(v.observations).toHaveLength(0);
    expect(v.state).toBe('unknown');

    // Unlocked, the same lookup settles it.
    s.lock.locked = false;
    expect(await s.runtime.reconcile(opId)).toMatchObject({ ok: true, category: 'succeeded' });
    expect(received(fake, 'gp-1.lookup')).toBe(1);
  });

  it('vault locked: the lookup is not sent and reconcile answers gate_locked', async () => {
    let vaultLocked = false;
    const credentials: CredentialProvider = {
      resolve: (ref) =>
        Promise.resolve(
          vaultLocked
            ? { ok: false, failure: { code: 'locked' } }
            : ref === REFERENCE_AUTHORITY
              ? { ok: true, headers: { authorization: `Bearer ${TOKEN}` }, secrets: [TOKEN] }
              : { ok: false, failure: { code: 'unknown_ref' } },
        ),
    };
    const s = setup(fake, ['approved'], { credentials });
    const opId = await unknownCreate(s, 'gp-2');
    vaultLocked = true;
    expect(await s.runtime.reconcile(opId)).toMatchObject({
      category: 'gate_locked',
      remote_effect: 'unknown',
    });
    const items = await s.runtime.recover();
    expect(items[0]).toMatchObject({ outcome: 'needs_person', unresolved: true });
    expect(received(fake, 'gp-2.lookup')).toBe(0);
  });

  it('with a vault configured, the lock file still locks (both locks hold)', async () => {
    const file = lockFile(join(dir, 'approvals'));
    const vault = { checkGate: () => Promise.resolve({ ok: true } as const) };
    const lock = anyLock(vaultLock(vault), file);
    expect(await lock.isLocked()).toBe(false);
    await file.lock('alice', 1);
    expect(await lock.isLocked()).toBe(true);
    expect(lock.name).toBe('lock_file');
    expect(await lock.holder!()).toMatchObject({ by: 'alice' });
    await file.unlock();
    const lockedVault = {
      checkGate: () => Promise.resolve({ ok: false, failure: { code: 'locked' } } as const),
    };
    expect(await anyLock(vaultLock(lockedVault), file).isLocked()).toBe(true);
  });

  // A lock whose state cannot be read counts as locked (fail closed) wherever bytes could leave:
  // for the gate without approvals, for the approval gate, and for a gate whose own lock answer
  // fails. Reconcile answers gate_locked and recover hands the operation to a person, and no lookup
  // is sent.
  it.each([
    ['the lock gate (no approvals)', 'lock', 'gp-3'],
    ['the approval gate', 'approval', 'gp-4'],
  ] as const)('%s whose lock cannot be read sends no lookup', async (_, gate, cor) => {
    const s = setup(fake, ['approved'], { gate });
    const opId = await unknownCreate(s, cor);
    s.lock.unreadable = true;
    expect(await s.runtime.reconcile(opId)).toMatchObject({
      ok: false,
      category: 'gate_locked',
      remote_effect: 'unknown',
      retry: 'escalate',
    });
    const items = await s.runtime.recover();
    expect(items).toMatchObject([
      { operation_id: opId, outcome: 'needs_person', unresolved: true },
    ]);
    expect(items[0]!.detail).toMatch(/gate is locked/);
    expect(received(fake, `${cor}.lookup`)).toBe(0);
    expect(received(fake, cor, 'POST')).toBe(1);
    const v = await s.view(opId);
    expect(v.observations).toHaveLength(0);
    expect(v.state).toBe('unknown');
    // The unreadable lock is on record as a lock the gate observed.
    const changes = (await s.ledger.read()).filter((e) => e.kind === 'gate_changed');
    expect(changes.map((e) => e.data.locked)).toEqual([true]);
  });

  it('a gate whose lock answer itself fails counts as locked: no lookup', async () => {
    const lock = unreadableLockGate();
    const s = setup(fake, [], { gate: lock.gate });
    const opId = await unknownCreate(s, 'gp-5');
    lock.fail();
    expect(await s.runtime.reconcile(opId)).toMatchObject({
      category: 'gate_locked',
      remote_effect: 'unknown',
    });
    const items = await s.runtime.recover();
    expect(items).toMatchObject([{ operation_id: opId, outcome: 'needs_person' }]);
    expect(received(fake, 'gp-5.lookup')).toBe(0);
    expect((await s.view(opId)).observations).toHaveLength(0);
  });

  it('recover asks the lock itself before a retry that is not a lookup: an unreadable lock sends nothing', async () => {
    // A gate whose check would approve: only recovery's own look at the lock stops the retry.
    const lock = unreadableLockGate();
    const s = setup(fake, [], { gate: lock.gate });
    // A read (no lookup; recovery would retry it as a read), made once by a worker, whose
    // connection is reset after the request: its outcome stays unknown.
    fake.arm({ call_id: 'gp-6', phase: 'after_request_headers', action: 'rst' });
    const first = await s.runtime.run(
      s.action('read_issue'),
      { id: 'iss_gp6' },
      { correlationId: 'gp-6', worker: 'w1' },
    );
    expect(first).toMatchObject({ category: 'outcome_unknown' });
    const opId = first.operation_id!;
    lock.fail();
    const items = await s.runtime.recover();
    // No second request reached the service, and none is on record.
    expect(received(fake, 'gp-6')).toBe(1);
    const v = await s.view(opId);
    expect(v.attempts).toHaveLength(1);
    expect(v.resolution).toBeNull();
    expect(items).toMatchObject([
      { operation_id: opId, outcome: 'needs_person', unresolved: true },
    ]);
    expect(items[0]!.detail).toMatch(/gate is locked/);
  });
});
