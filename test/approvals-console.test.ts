// The `candor approve` console against a gate that waits on the approval queue, and the lock-file
// gate flipped from the console.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  consoleApprover,
  createApprovalGate,
  lockFile,
  type ApprovalContext,
} from '../src/approvals/index.js';
import { run } from '../src/cli/commands/approve.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { projectOperation } from '../src/ledger/projection.js';

const root = mkdtempSync(join(tmpdir(), 'candor-approve-cli-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: { out: (s: string) => void out.push(s), err: (s: string) => void err.push(s) },
    out,
    err,
  };
}

const ctx = (over: Partial<ApprovalContext> = {}): ApprovalContext => ({
  session_id: 'ses_1',
  operation_id: 'op_cli_1',
  action: 'delete_release',
  action_class: 'destructive',
  request_fingerprint: 'sha256:abc',
  prior_dispatch_state: null,
  intent: { kind: 'delete_release', subject_ref: 'release:rel_0001', params_digest: 'sha256:p' },
  ...over,
});

async function until<T>(fn: () => Promise<T | null>): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const v = await fn();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('timed out waiting');
}

describe('candor approve', () => {
  it('list shows the pending card; yes by id prefix approves it for the waiting gate', async () => {
    const dir = join(root, 'a');
    const ledger = openMemoryLedger();
    const gate = createApprovalGate({ ledger, approver: consoleApprover({ dir, poll_ms: 10 }) });
    const decision = gate.check(ctx());
    const listed = await until(async () => {
      const t = io();
      expect(await run(['list', '--dir', dir, '--json'], t.io)).toBe(0);
      const cards = JSON.parse(t.out.join('')) as Array<{ approval_id: string }>;
      return cards[0] ?? null;
    });
    const human = io();
    expect(await run(['list', '--dir', dir], human.io)).toBe(0);
    expect(human.out.join('')).toContain(
      'Allow this one delete_release (destructive) call on release:rel_0001',
    );
    const yes = io();
    expect(
      await run(['yes', listed.approval_id.slice(0, 14), '--dir', dir, '--by', 'alice'], yes.io),
    ).toBe(0);
    expect(yes.out.join('')).toContain(`approved ${listed.approval_id}`);
    expect(await decision).toEqual({ decision: 'approved' });
    const view = projectOperation(await ledger.query({ operation_id: 'op_cli_1' }))!;
    expect(view.approvals).toMatchObject([
      { approval_id: listed.approval_id, decision: 'approved', approver: 'alice' },
    ]);
    const empty = io();
    await run(['list', '--dir', dir], empty.io);
    expect(empty.out.join('')).toBe('no pending approval requests\n');
  });

  it('records the local OS user (or --by) as the approver, with the reason and the request', async () => {
    const dir = join(root, 'who');
    const ledger = openMemoryLedger();
    const gate = createApprovalGate({ ledger, approver: consoleApprover({ dir, poll_ms: 10 }) });
    const decision = gate.check(ctx({ operation_id: 'op_cli_who' }));
    const id = await until(async () => {
      const t = io();
      await run(['list', '--dir', dir, '--json'], t.io);
      return (JSON.parse(t.out.join('')) as Array<{ approval_id: string }>)[0]?.approval_id ?? null;
    });
    expect(await run(['yes', id, '--dir', dir, '--reason', 'release is obsolete'], io().io)).toBe(
      0,
    );
    expect(await decision).toEqual({ decision: 'approved' });
    const decided = (await ledger.read()).find((e) => e.kind === 'approval_decided')!;
    const me = userInfo().username;
    expect(decided.data).toMatchObject({
      approver: `console:${me}`,
      decided_by: { kind: 'local', subject: me, issuer: null },
      reason: 'release is obsolete',
      request_fingerprint: 'sha256:abc',
      requested_via: 'agent',
    });
  });

  it('no denies; answering twice or an unknown id exits 1; usage errors exit 2', async () => {
    const dir = join(root, 'b');
    const ledger = openMemoryLedger();
    const gate = createApprovalGate({ ledger, approver: consoleApprover({ dir, poll_ms: 10 }) });
    const decision = gate.check(ctx({ operation_id: 'op_cli_2' }));
    const id = await until(async () => {
      const t = io();
      await run(['list', '--dir', dir, '--json'], t.io);
      return (JSON.parse(t.out.join('')) as Array<{ approval_id: string }>)[0]?.approval_id ?? null;
    });
    expect(await run(['no', id, '--dir', dir], io().io)).toBe(0);
    const twice = io();
    // Either the request is already gone or the answer is already recorded: never a second answer.
    expect(await run(['yes', id, '--dir', dir], twice.io)).toBe(1);
    expect(await decision).toEqual({ decision: 'denied' });
    expect(await run(['yes', 'apr_nope_nope', '--dir', dir], io().io)).toBe(1);
    expect(await run(['yes', '--dir', dir], io().io)).toBe(2);
    expect(await run(['frobnicate'], io().io)).toBe(2);
    expect(await run(['list', '--bogus'], io().io)).toBe(2);
  });

  it('lock and unlock flip the lock file; the gate records both transitions', async () => {
    const dir = join(root, 'c');
    const ledger = openMemoryLedger();
    const gate = createApprovalGate({
      ledger,
      approver: consoleApprover({ dir, poll_ms: 10 }),
      lock: lockFile(dir),
    });
    const read = ctx({ action: 'read_issue', action_class: 'read' });
    expect(await run(['lock', '--dir', dir, '--by', 'ops:bob'], io().io)).toBe(0);
    expect(await gate.check(read)).toEqual({ decision: 'gate_locked' });
    const again = io();
    await run(['lock', '--dir', dir], again.io);
    expect(again.out.join('')).toBe('gate was already locked\n');
    const un = io();
    expect(await run(['unlock', '--dir', dir], un.io)).toBe(0);
    expect(un.out.join('')).toContain('was locked by ops:bob');
    expect(await gate.check(read)).toEqual({ decision: 'approved' });
    const changes = (await ledger.read()).flatMap((e) =>
      e.kind === 'gate_changed' ? [e.data] : [],
    );
    expect(changes).toEqual([
      { locked: true, by: 'lock_file:ops:bob' },
      { locked: false, by: 'observed:lock_file' },
    ]);
  });
});
