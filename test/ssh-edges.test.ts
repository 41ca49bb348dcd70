// Issue 30 (SSH) on a real OpenSSH server: a continuation is the same request only with the same
// secret inputs (a keyed digest, never the value or the placeholder); declared secrets are never
// stored in clear, however short; a command that leaves a background writer settles; a wrapper
// refusal names itself; cut output says so. Each test fails on the code before issue 30.
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineSshAction } from '../src/engine/ssh-action.js';
import { projectOperation } from '../src/ledger/projection.js';
import { openSqliteLedger } from '../src/ledger/sqlite/store.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { shQuote } from '../src/ssh/wrapper.js';
import { createKeyFile, initVault, openVault } from '../src/vault/index.js';
import {
  HOST,
  executions,
  isDone,
  jobCommand,
  jobDir,
  runCut,
  runtimeOn,
  sshOptions,
  until,
} from './adversarial/ssh-support.js';
import { sshdSkipReason, startSshd, type SshdFixture } from './support/sshd.js';

const skip = sshdSkipReason();
if (skip !== undefined) console.warn(`skipping the issue-30 SSH suite: ${skip}`);

describe('the continuation key', () => {
  it('is the same for every opening of one vault and differs between vaults', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'candor-ssh30-vault-'));
    try {
      const key = (n: string) => ({ kind: 'key_file' as const, path: join(dir, `${n}.key`) });
      const keys: string[] = [];
      for (const n of ['a', 'b']) {
        expect((await createKeyFile(key(n).path)).ok).toBe(true);
        const made = await initVault(key(n), { path: join(dir, `${n}.json`) });
        if (!made.ok) throw new Error(made.failure.message);
        keys.push(Buffer.from(made.value.continuationKey()).toString('hex'));
        made.value.close();
      }
      const again = await openVault(key('a'), { path: join(dir, 'a.json') });
      if (!again.ok) throw new Error(again.failure.message);
      expect(Buffer.from(again.value.continuationKey()).toString('hex')).toBe(keys[0]);
      expect(keys[0]).not.toBe(keys[1]);
      expect(keys[0]).toMatch(/^[0-9a-f]{64}$/);
      again.value.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const lines = (f: string): number =>
  existsSync(f) ? readFileSync(f, 'utf8').split('\n').filter(Boolean).length : 0;

describe.skipIf(skip !== undefined)('SSH: issue 30 on a real sshd', { timeout: 240_000 }, () => {
  let sshd: SshdFixture;
  let root: string;
  beforeAll(async () => {
    sshd = await startSshd();
    root = mkdtempSync(join(tmpdir(), 'candor-ssh30-'));
    chmodSync(root, 0o755);
  });
  afterAll(async () => {
    await sshd?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const view = async (ledger: LedgerStore, id: string) =>
    projectOperation(await ledger.query({ operation_id: id }))!;

  it('a continuation with another secret, or with "[REDACTED]", is another request: nothing is sent', async () => {
    const d = jobDir(root, 'revoke', true);
    const A = 'tok-A-7c1e93f0d2';
    const B = 'tok-B-51aa0c6e8f';
    writeFileSync(join(d, 'tokens'), `${A}\n`);
    const checks = join(d, 'checks');
    const revoke = defineSshAction({
      name: 'revoke_token',
      class: 'set_state',
      subject: 'the token',
      input: z.object({ job: z.string(), token: z.string() }),
      host_ref: HOST,
      command: (i) =>
        jobCommand(root, i.job, 'grep -vF -- "$TOKEN" "$d/tokens" >"$d/t"; mv "$d/t" "$d/tokens"'),
      // Every run of the check is counted on the host: the ground truth of what was sent.
      check: (i) =>
        `echo c >>${shQuote(checks)}; ! grep -qF -- "$TOKEN" ${shQuote(join(root, i.job, 'tokens'))}`,
      secret_env: (i) => ({ TOKEN: i.token }),
      deadline_ms: 120_000,
    });
    const ledger = openMemoryLedger();
    const rt = runtimeOn(ledger, sshOptions(sshd), [revoke]);
    const cut = await runCut(rt, revoke, { job: 'revoke', token: A }, join(d, 'started'));
    expect(cut.envelope).toMatchObject({ category: 'outcome_unknown', remote_effect: 'unknown' });
    const checksBefore = lines(checks);
    expect(checksBefore).toBe(1);

    for (const [token, reason] of [
      [B, 'other_secret'],
      ['[REDACTED]', 'secret_placeholder'],
    ] as const) {
      const again = await rt.run(revoke, { job: 'revoke', token }, { operationId: cut.id });
      // The refusal states the operation (its cut attempt may have applied) and its own code.
      expect(again).toMatchObject({
        ok: false,
        category: 'outcome_unknown',
        remote_effect: 'unknown',
        operation_id: cut.id,
        data: { refused_operation_id: cut.id, reason, refusal: { code: 'request_changed' } },
      });
      // Refused before anything was sent: no check ran, the command ran once, nothing settled.
      expect(lines(checks)).toBe(checksBefore);
      expect(executions(root, 'revoke')).toBe(1);
      expect((await view(ledger, cut.id)).state).toBe('unknown');
    }
    expect(readFileSync(join(d, 'tokens'), 'utf8')).toContain(A);

    // The same secret is the same request: once the job ends, it settles as succeeded.
    writeFileSync(join(d, 'go'), '');
    await until(() => isDone(root, 'revoke'), 'the revoke job to finish');
    const same = await rt.reconcile(cut.id);
    expect(same).toMatchObject({ ok: true, category: 'succeeded' });
    expect(readFileSync(join(d, 'tokens'), 'utf8')).not.toContain(A);
    expect(executions(root, 'revoke')).toBe(1);
  });

  it('a two-character secret (and one inside "[REDACTED]") appears in no ledger byte', async () => {
    const PIN = '鍵秘';
    const CODE = 'DACT';
    const d = jobDir(root, 'pin');
    const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
    const unlock = defineSshAction({
      name: 'unlock_box',
      class: 'execute',
      subject: 'the box',
      input: z.object({ job: z.string(), pin: z.string(), code: z.string() }),
      host_ref: HOST,
      // The command proves both secrets arrived without naming them.
      command: (i) =>
        jobCommand(
          root,
          i.job,
          `[ "$(printf %s "$PIN" | sha256sum | cut -c1-64)" = ${digest(PIN)} ] && [ "$(printf %s "$CODE" | sha256sum | cut -c1-64)" = ${digest(CODE)} ] && echo ok >"$d/verified"`,
          false,
        ),
      secret_env: (i) => ({ PIN: i.pin, CODE: i.code }),
      deadline_ms: 120_000,
    });
    const file = join(root, 'ledger.db');
    const ledger = openSqliteLedger(file);
    const rt = runtimeOn(ledger, sshOptions(sshd), [unlock]);
    const env = await rt.run(unlock, { job: 'pin', pin: PIN, code: CODE });
    expect(env).toMatchObject({ ok: true, category: 'succeeded' });
    expect(readFileSync(join(d, 'verified'), 'utf8')).toBe('ok\n');
    const events = await ledger.read(1);
    const opened = events.find((e) => e.kind === 'operation_opened');
    expect(opened?.kind === 'operation_opened' && opened.data.params).toEqual({
      job: 'pin',
      pin: '[REDACTED]',
      code: '[REDACTED]',
    });
    expect(opened?.kind === 'operation_opened' && opened.data.intent.secrets_digest).toMatch(
      /^hmac-sha256:[0-9a-f]{64}$/,
    );
    const all = JSON.stringify(events);
    expect(all).not.toContain(PIN);
    expect(all).not.toContain(JSON.stringify(PIN).slice(1, -1));
    expect(all).not.toMatch(/\\u9375/i);
    await rt.endSession();
    await ledger.close();
    // Every byte SQLite wrote: the database and any write-ahead log left beside it.
    const forms = [Buffer.from(PIN, 'utf8'), Buffer.from('\\u9375\\u79d8'), Buffer.from('\\u9375')];
    for (const f of [file, `${file}-wal`, `${file}-journal`]) {
      if (!existsSync(f)) continue;
      const bytes = readFileSync(f);
      for (const form of forms)
        expect(bytes.includes(form), `${f} holds ${form.toString()}`).toBe(false);
    }
  });

  it('a command that leaves a background writer settles, with a bounded stdout', async () => {
    const d = jobDir(root, 'bg');
    const spawnBg = defineSshAction({
      name: 'spawn_worker',
      class: 'execute',
      subject: 'the worker',
      input: z.object({ job: z.string() }),
      host_ref: HOST,
      // The background loop keeps writing to the command's stdout after the command's shell exits
      // (bounded: it ends by itself within seconds, then records that it ended).
      command: (i) =>
        jobCommand(
          root,
          i.job,
          `( n=0; while [ $n -lt 150000 ]; do echo "bg-$n"; n=$((n + 1)); done; touch "$d/bg-ended" ) & echo started`,
          false,
        ),
      deadline_ms: 120_000,
    });
    const ledger = openMemoryLedger();
    const rt = runtimeOn(ledger, sshOptions(sshd), [spawnBg]);
    const env = await rt.run(spawnBg, { job: 'bg' });
    expect(env).toMatchObject({ ok: true, category: 'succeeded', remote_effect: 'applied' });
    expect((await view(ledger, env.operation_id!)).state).toBe('succeeded');
    const data = env.data as { stdout: string; stdout_truncated?: { kept_bytes: number } };
    expect(Buffer.byteLength(data.stdout)).toBeLessThanOrEqual(16 * 1024);
    expect(data.stdout).toContain('started');
    expect(executions(root, 'bg')).toBe(1);
    // A later reconciliation reads the same bounded record, though the file grew on.
    await until(() => existsSync(join(d, 'bg-ended')), 'the background writer to end');
    const again = await rt.reconcile(env.operation_id!);
    expect(again).toMatchObject({ ok: true, category: 'succeeded' });
  });

  it('a wrapper refusal names the refusal in its text and in data', async () => {
    const open = mkdtempSync(join(tmpdir(), 'candor-ssh30-open-'));
    try {
      // World-writable without the sticky bit: the wrapper refuses with marker_unsafe.
      chmodSync(open, 0o777);
      const entry = sshd.entry({ marker_dir: join(open, 'ops') });
      // A sensitive class stops at once; another is retried within its budget, then stops.
      for (const cls of ['financial', 'append'] as const) {
        const job = `unsafe-${cls}`;
        const d = jobDir(root, job);
        const act = defineSshAction({
          name: `pay_${cls}`,
          class: cls,
          subject: 'the payment',
          input: z.object({ job: z.string() }),
          host_ref: HOST,
          command: (i) => jobCommand(root, i.job, '', false),
          deadline_ms: 120_000,
        });
        const rt = runtimeOn(openMemoryLedger(), sshOptions(sshd, entry), [act]);
        const env = await rt.run(act, { job });
        expect(env).toMatchObject({
          ok: false,
          category: 'confirmed_failure',
          remote_effect: 'none',
          data: { refusal: { code: 'marker_unsafe' } },
        });
        expect(env.message).toContain('marker_unsafe');
        expect(env.message).not.toMatch(/reported that the payment failed/);
        expect(executions(root, job)).toBe(0);
        expect(existsSync(join(d, 'started'))).toBe(false);
      }
    } finally {
      rmSync(open, { recursive: true, force: true });
    }
  });

  it('stdout cut for the envelope says how many bytes were kept and dropped', async () => {
    const act = defineSshAction({
      name: 'big_report',
      class: 'read',
      subject: 'the report',
      input: z.object({}),
      host_ref: HOST,
      command: () => "head -c 40000 /dev/zero | tr '\\000' a",
      deadline_ms: 120_000,
    });
    const rt = runtimeOn(openMemoryLedger(), sshOptions(sshd), [act]);
    const env = await rt.run(act, {});
    expect(env).toMatchObject({
      ok: true,
      data: {
        exit_status: 0,
        stdout: 'a'.repeat(16 * 1024),
        stdout_truncated: { kept_bytes: 16 * 1024, dropped_bytes: 40_000 - 16 * 1024 },
      },
    });
    // Past the wrapper's cap too: the bytes the cap dropped are counted as dropped.
    const capped = runtimeOn(
      openMemoryLedger(),
      sshOptions(sshd, sshd.entry(), { output_cap_bytes: 20_000 }),
      [act],
    );
    expect(await capped.run(act, {})).toMatchObject({
      data: { stdout_truncated: { kept_bytes: 16 * 1024, dropped_bytes: 40_000 - 16 * 1024 } },
    });
  });
});
