// Issue 22 on a real OpenSSH server: reconciliation with the real input (never the redacted copy),
// no second run on missing evidence, safe marker directories, secrets off command lines, bounded
// output, unforgeable status lines, recovery through markers, one shell for the check, wrapper
// preconditions. Items that need another local account create one and remove it; outside CI they
// skip with a printed reason when that is impossible (not root). Under CI=true nothing skips.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { classify } from '../../src/core/classify.js';
import { defineSshAction } from '../../src/engine/ssh-action.js';
import {
  createLocalUser,
  localUserSkipReason,
  sshdSkipReason,
  startSshd,
  type LocalUser,
  type SshdFixture,
} from '../../src/fakes/sshd.js';
import { openMemoryLedger } from '../../src/ledger/memory/store.js';
import { projectOperation } from '../../src/ledger/projection.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/store.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { reconcileSsh, runSsh, sshContract } from '../../src/ssh/transport.js';
import { shQuote } from '../../src/ssh/wrapper.js';
import {
  HOST,
  executions,
  isDone,
  jobCommand,
  jobDir,
  jobInput,
  runCut,
  runtimeOn,
  sshOptions,
  until,
} from './ssh-support.js';

const skip = sshdSkipReason();
if (skip !== undefined) console.warn(`skipping the adversarial SSH suite: ${skip}`);
const noSecondUser = skip ?? localUserSkipReason();
if (skip === undefined && noSecondUser !== undefined)
  console.warn(`skipping the second-user SSH tests: ${noSecondUser}`);

const TOKEN = `ghp_${'A1b2C3d4E5'.repeat(3)}xYz123`;

describe.skipIf(skip !== undefined)('SSH: issue 22 on a real sshd', { timeout: 240_000 }, () => {
  let sshd: SshdFixture;
  let root: string;
  let other: LocalUser | undefined;
  beforeAll(async () => {
    sshd = await startSshd();
    // Job directories other users may write to (the second user's runs are counted here too).
    root = mkdtempSync(join(tmpdir(), 'candor-ssh22-'));
    chmodSync(root, 0o755);
    if (noSecondUser === undefined) other = createLocalUser('/bin/sh');
  });
  afterAll(async () => {
    other?.remove();
    await sshd?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const markerOf = (id: string) => join(sshd.entry().marker_dir!, id);
  const events = async (ledger: LedgerStore, id: string) => ledger.query({ operation_id: id });
  const view = async (ledger: LedgerStore, id: string) =>
    projectOperation(await events(ledger, id))!;

  const execute = (name: string, cls: 'execute' | 'financial' = 'execute') =>
    defineSshAction({
      name,
      class: cls,
      subject: 'the job',
      input: jobInput,
      host_ref: HOST,
      command: (i) => jobCommand(root, i.job),
      deadline_ms: 120_000,
    });

  describe('1. reconciliation uses the real input', () => {
    const tokenInput = z.object({ job: z.string(), token: z.string() });
    const revoke = defineSshAction({
      name: 'revoke_token',
      class: 'set_state',
      subject: 'the token',
      input: tokenInput,
      host_ref: HOST,
      // The token sits in the command and check text on purpose: the engine must still never
      // check or run a placeholder.
      command: (i) =>
        jobCommand(
          root,
          i.job,
          `grep -vF ${shQuote(i.token)} "$d/tokens" >"$d/t"; mv "$d/t" "$d/tokens"`,
        ),
      check: (i) => `! grep -qF ${shQuote(i.token)} ${shQuote(join(root, i.job, 'tokens'))}`,
      deadline_ms: 120_000,
    });

    it('set_state: the check looks for the real token; after a restart the answer is escalate', async () => {
      const ledger = openMemoryLedger();
      const rt = runtimeOn(ledger, sshOptions(sshd), [revoke]);
      const d = jobDir(root, 'revoke', true);
      writeFileSync(join(d, 'tokens'), `${TOKEN}\n`);
      const input = { job: 'revoke', token: TOKEN };
      const cut = await runCut(rt, revoke, input, join(d, 'started'));
      expect(cut.envelope).toMatchObject({ category: 'outcome_unknown', retry: 'reconcile_first' });
      // The recorded copy is redacted: a check built from it would look for "[REDACTED]".
      expect(JSON.stringify(await events(ledger, cut.id))).not.toContain(TOKEN);

      const during = await rt.reconcile(cut.id);
      expect(during).toMatchObject({ ok: false, retry: 'escalate', remote_effect: 'unknown' });
      expect((await view(ledger, cut.id)).state).not.toBe('succeeded');
      expect(readFileSync(join(d, 'tokens'), 'utf8')).toContain(TOKEN);

      // Another process (a restart) has only the redacted copy: escalate, with the reason.
      const restarted = runtimeOn(ledger, sshOptions(sshd), [revoke]);
      const elsewhere = await restarted.reconcile(cut.id);
      expect(elsewhere).toMatchObject({
        retry: 'escalate',
        data: { escalation: { code: 'real_input_unavailable' } },
      });

      writeFileSync(join(d, 'go'), '');
      await until(() => isDone(root, 'revoke'), 'the revoke job to finish');
      const after = await rt.reconcile(cut.id);
      expect(after).toMatchObject({ ok: true, category: 'succeeded' });
      expect(readFileSync(join(d, 'tokens'), 'utf8')).not.toContain(TOKEN);
      expect(executions(root, 'revoke')).toBe(1);
    });

    it('marker: an operation that never sent anything is not looked up, and its first attempt runs the real input', async () => {
      const ledger = openMemoryLedger();
      const write = defineSshAction({
        name: 'write_token',
        class: 'execute',
        subject: 'the token file',
        input: tokenInput,
        host_ref: HOST,
        command: (i) => jobCommand(root, i.job, `printf %s ${shQuote(i.token)} >"$d/out"`),
        deadline_ms: 120_000,
      });
      const rt = runtimeOn(ledger, sshOptions(sshd), [write]);
      const d = jobDir(root, 'write-token');
      // Opened (write-ahead) and never attempted: the ledger proves nothing reached the wrapper,
      // so reconciliation has nothing to look up and says so, without touching the host.
      const id = await rt.open(write, { job: 'write-token', token: TOKEN });
      const checked = await rt.reconcile(id);
      expect(checked).toMatchObject({ ok: false, remote_effect: 'none', retry: 'allowed' });
      expect(checked.message).toMatch(/Nothing was sent/);
      expect(executions(root, 'write-token')).toBe(0);
      // Continuing the operation makes its first attempt with the real input, not the ledger's
      // redacted copy.
      const env = await rt.run(write, { job: 'write-token', token: TOKEN }, { operationId: id });
      expect(env).toMatchObject({ ok: true, category: 'succeeded' });
      expect(readFileSync(join(d, 'out'), 'utf8')).toBe(TOKEN);
      expect(executions(root, 'write-token')).toBe(1);
    });
  });

  describe('2. a missing marker is not proof that nothing ran', () => {
    it('a settled operation is never re-run, even after its marker was deleted', async () => {
      const ledger = openMemoryLedger();
      const pay = execute('pay', 'financial');
      const rt = runtimeOn(ledger, sshOptions(sshd), [pay]);
      jobDir(root, 'pay');
      const first = await rt.run(pay, { job: 'pay' });
      expect(first).toMatchObject({ ok: true, category: 'succeeded' });
      rmSync(markerOf(first.operation_id!), { recursive: true, force: true });
      const again = await rt.reconcile(first.operation_id!);
      expect(again).toMatchObject({ ok: true, category: 'succeeded' });
      expect(executions(root, 'pay')).toBe(1);
      const v = await view(ledger, first.operation_id!);
      expect(v.attempts).toHaveLength(1);
    });

    it('an unknown outcome whose marker vanished escalates instead of running again', async () => {
      const ledger = openMemoryLedger();
      const act = execute('vanish');
      const rt = runtimeOn(ledger, sshOptions(sshd), [act]);
      const d = jobDir(root, 'vanish', true);
      const cut = await runCut(rt, act, { job: 'vanish' }, join(d, 'started'));
      writeFileSync(join(d, 'go'), '');
      await until(() => isDone(root, 'vanish'), 'the job to finish');
      await until(() => existsSync(join(markerOf(cut.id), 'done')), 'the done marker');
      rmSync(markerOf(cut.id), { recursive: true, force: true });
      const env = await rt.reconcile(cut.id);
      expect(env).toMatchObject({
        retry: 'escalate',
        remote_effect: 'unknown',
        data: { escalation: { code: 'marker_absent_unproven' } },
      });
      expect(executions(root, 'vanish')).toBe(1);
      const obs = (await view(ledger, cut.id)).observations.at(-1);
      expect(obs?.conclusion).toMatch(/does not prove/);
    });

    it('a changed marker directory is a changed request: escalate, nothing runs', async () => {
      const ledger = openMemoryLedger();
      const act = execute('moved');
      const rt = runtimeOn(ledger, sshOptions(sshd), [act]);
      const d = jobDir(root, 'moved', true);
      const cut = await runCut(rt, act, { job: 'moved' }, join(d, 'started'));
      // The inventory now names another marker directory (the marker lives in the old one).
      const moved = sshd.entry({ marker_dir: join(sshd.dir, 'ops-moved') });
      const rt2 = runtimeOn(ledger, sshOptions(sshd, moved), [act]);
      const env = await rt2.reconcile(cut.id);
      expect(env).toMatchObject({ retry: 'escalate', remote_effect: 'unknown' });
      writeFileSync(join(d, 'go'), '');
      await until(() => isDone(root, 'moved'), 'the job to finish');
      expect(executions(root, 'moved')).toBe(1);
    });

    it.skipIf(noSecondUser !== undefined)(
      'a changed remote user escalates with the reason; the command does not run as that user',
      async () => {
        const ledger = openMemoryLedger();
        const act = execute('user_changed');
        const rt = runtimeOn(ledger, sshOptions(sshd), [act]);
        const d = jobDir(root, 'user-changed', true);
        chmodSync(d, 0o777);
        const cut = await runCut(rt, act, { job: 'user-changed' }, join(d, 'started'));
        writeFileSync(join(d, 'go'), '');
        await until(() => isDone(root, 'user-changed'), 'the job to finish');
        chmodSync(join(d, 'count'), 0o666);
        chmodSync(join(d, 'log'), 0o666);
        const otherDir = join(other!.home, 'ops');
        other!.run(`mkdir -m 700 ${shQuote(otherDir)}`);
        const asOther = sshd.entry({ user: other!.name, marker_dir: otherDir });
        const rt2 = runtimeOn(ledger, sshOptions(sshd, asOther), [act]);
        const env = await rt2.reconcile(cut.id);
        expect(env).toMatchObject({
          retry: 'escalate',
          remote_effect: 'unknown',
          data: { escalation: { code: 'request_changed' } },
        });
        expect(executions(root, 'user-changed')).toBe(1);
        const v = await view(ledger, cut.id);
        expect(v.attempts).toHaveLength(1);
        expect(v.state).toBe('unknown');
      },
    );
  });

  describe('3. marker directories the wrapper does not own are refused', () => {
    it('a directory others can write, a symlinked directory and a planted symlink: refused, nothing runs', async () => {
      const base = mkdtempSync(join(tmpdir(), 'candor-ssh22-md-'));
      const shared = join(base, 'shared');
      mkdirSync(shared);
      chmodSync(shared, 0o777);
      const sticky = join(base, 'sticky');
      mkdirSync(sticky);
      chmodSync(sticky, 0o1777);
      const real = join(base, 'real');
      mkdirSync(real, { mode: 0o700 });
      const link = join(base, 'link');
      symlinkSync(real, link);
      const ancestorLink = join(base, 'alink');
      symlinkSync(base, ancestorLink);
      const marker = join(base, 'ran');
      const cases = [shared, sticky, link, join(ancestorLink, 'real')];
      try {
        for (const dir of cases) {
          const r = await runSsh({
            host: sshd.entry({ marker_dir: dir }),
            resolveKey: sshd.resolveKey,
            command: `echo ran >> ${shQuote(marker)}`,
            operationId: 'op_md',
            family: 'execute',
          });
          expect({ dir, wrapper: r.wrapper, code: r.refusal?.code }).toEqual({
            dir,
            wrapper: 'refused',
            code: 'marker_unsafe',
          });
          expect(classify(r.evidence, sshContract('execute')).remote_effect).toBe('none');
        }
        expect(existsSync(marker)).toBe(false);

        // A planted symlink for the operation (pointing at a forged "done") inside a safe dir.
        const forged = join(base, 'forged');
        mkdirSync(forged, { mode: 0o700 });
        writeFileSync(join(forged, 'done'), '0 2026-01-01T00:00:00Z\n');
        symlinkSync(forged, join(real, 'op_planted'));
        const looked = await reconcileSsh({
          host: sshd.entry({ marker_dir: real }),
          resolveKey: sshd.resolveKey,
          operationId: 'op_planted',
        });
        expect(looked.ok).toBe(false);
        expect(looked.failure?.lookup_evidence.error_code).toBe('wrapper_marker_unsafe');
        const run = await runSsh({
          host: sshd.entry({ marker_dir: real }),
          resolveKey: sshd.resolveKey,
          command: `echo ran >> ${shQuote(marker)}`,
          operationId: 'op_planted',
          family: 'execute',
        });
        expect(run.refusal?.code).toBe('marker_unsafe');
        expect(existsSync(marker)).toBe(false);
      } finally {
        rmSync(base, { recursive: true, force: true });
      }
    });

    it.skipIf(noSecondUser !== undefined)(
      "another user's forged done file is refused, never reported as success",
      async () => {
        const dir = join(other!.home, 'shared-ops');
        other!.run(
          `mkdir -m 755 ${shQuote(dir)} && mkdir -m 755 ${shQuote(join(dir, 'op_forged'))} && echo '0 2026-01-01T00:00:00Z' > ${shQuote(join(dir, 'op_forged', 'done'))}`,
        );
        expect(existsSync(join(dir, 'op_forged', 'done'))).toBe(true);
        const looked = await reconcileSsh({
          host: sshd.entry({ marker_dir: dir }),
          resolveKey: sshd.resolveKey,
          operationId: 'op_forged',
        });
        expect(looked.ok).toBe(false);
        expect(looked.failure?.lookup_evidence.error_code).toBe('wrapper_marker_unsafe');
      },
    );
  });

  describe('4. secrets never on a command line', () => {
    it('secret inputs reach the command through its environment, are redacted, and the ledger file is 0600', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'candor-ssh22-ledger-'));
      const path = join(dir, 'ledger.db');
      const ledger = openSqliteLedger(path);
      const secret = 'hunter2-correct-horse-battery';
      const action = defineSshAction({
        name: 'use_secret',
        class: 'execute',
        subject: 'the job',
        input: z.object({ job: z.string(), db_pass: z.string() }),
        host_ref: HOST,
        command: (i) =>
          jobCommand(root, i.job, 'printf %s "$DB_PASS" >"$d/got"; echo "leaked: $DB_PASS" >&2'),
        secret_env: (i) => ({ DB_PASS: i.db_pass }),
        deadline_ms: 120_000,
      });
      try {
        const rt = runtimeOn(ledger, sshOptions(sshd), [action]);
        const d = jobDir(root, 'secret', true);
        const pending = rt.run(action, { job: 'secret', db_pass: secret });
        await until(() => existsSync(join(d, 'started')), 'the job to start');
        // While the command runs, no process on this machine carries the secret in its argv.
        const leaks = readdirSync('/proc')
          .filter((p) => /^\d+$/.test(p))
          .filter((p) => {
            try {
              return readFileSync(`/proc/${p}/cmdline`).includes(secret);
            } catch {
              return false;
            }
          });
        expect(leaks).toEqual([]);
        writeFileSync(join(d, 'go'), '');
        const env = await pending;
        expect(env).toMatchObject({ ok: true, category: 'succeeded' });
        expect(readFileSync(join(d, 'got'), 'utf8')).toBe(secret);
        const all = JSON.stringify(await ledger.query({ operation_id: env.operation_id! }));
        expect(all).toContain('leaked: [REDACTED]');
        expect(all).not.toContain(secret);
        for (const f of [path, `${path}-wal`].filter((p) => existsSync(p)))
          expect(readFileSync(f).includes(secret)).toBe(false);
        expect(statSync(path).mode & 0o777).toBe(0o600);
        if (existsSync(`${path}-wal`)) expect(statSync(`${path}-wal`).mode & 0o777).toBe(0o600);
      } finally {
        await ledger.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('5. bounded output', () => {
    it('keeps stdout up to the cap, counts the rest, and the marker holds no more', async () => {
      const ledger = openMemoryLedger();
      const cap = 64 * 1024;
      const big = defineSshAction({
        name: 'big_output',
        class: 'execute',
        subject: 'the job',
        input: jobInput,
        host_ref: HOST,
        command: (i) => jobCommand(root, i.job, "head -c 5000000 /dev/zero | tr '\\0' a"),
        deadline_ms: 120_000,
      });
      const rt = runtimeOn(ledger, sshOptions(sshd, sshd.entry(), { output_cap_bytes: cap }), [
        big,
      ]);
      jobDir(root, 'big');
      const env = await rt.run(big, { job: 'big' });
      expect(env).toMatchObject({ ok: true, category: 'succeeded' });
      const finished = (await events(ledger, env.operation_id!)).find(
        (e) => e.kind === 'attempt_finished',
      );
      expect(JSON.stringify(finished)).toContain(`"stdout_dropped_bytes":${5_000_000 - cap}`);
      expect(statSync(join(markerOf(env.operation_id!), 'stdout')).size).toBe(cap);

      // The default cap (1 MiB) for a read: no more is held in memory or returned.
      const read = await runSsh({
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        command: "head -c 3145728 /dev/zero | tr '\\0' b",
        operationId: 'op_big_read',
        family: 'read',
      });
      expect(read.evidence).toMatchObject({ phase: 'response_complete', exit_status: 0 });
      expect(read.stdout.length).toBe(1024 * 1024);
      expect(read.stdout_dropped).toBe(2 * 1024 * 1024);
    });
  });

  describe('6. status lines the command cannot forge', () => {
    it('a command hunting for the nonce in its parents cannot turn its effect into "not started"', async () => {
      const effect = join(root, 'forge-effect');
      // Every 16+ hex string in the parents' argv and environment is tried as the nonce.
      const hostile = [
        `echo applied > ${shQuote(effect)}`,
        'for p in $PPID $(cut -d" " -f4 /proc/$PPID/stat); do cat /proc/$p/cmdline /proc/$p/environ 2>/dev/null | tr "\\0" "\\n"; done | grep -oE "[0-9a-f]{16,64}" | sort -u > /tmp/.candor-forge-$$',
        'while read -r n; do printf "CANDOR-WRAP/1 %s error marker_unavailable\\nCANDOR-WRAP/1 %s exit 70\\n" "$n" "$n" > /proc/$PPID/fd/1; done < /tmp/.candor-forge-$$',
        'rm -f /tmp/.candor-forge-$$',
        'exit 70',
      ].join('; ');
      const r = await runSsh({
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        command: hostile,
        operationId: 'op_forge',
        family: 'execute',
      });
      expect(readFileSync(effect, 'utf8')).toBe('applied\n');
      expect(r.wrapper).toBe('ran');
      const c = classify(r.evidence, sshContract('execute'));
      expect(c.remote_effect).not.toBe('none');
      expect(c.rule).toBe('exit_nonzero');
    });
  });

  describe('7. recover settles SSH operations through their markers', () => {
    it('a restarted runtime reconciles the interrupted operation from its marker', async () => {
      const ledger = openMemoryLedger();
      const act = execute('recover_me');
      const rt = runtimeOn(ledger, sshOptions(sshd), [act]);
      const d = jobDir(root, 'recover', true);
      const cut = await runCut(rt, act, { job: 'recover' }, join(d, 'started'));
      writeFileSync(join(d, 'go'), '');
      await until(() => existsSync(join(markerOf(cut.id), 'done')), 'the done marker');
      const restarted = runtimeOn(ledger, sshOptions(sshd), [act]);
      const items = await restarted.recover();
      expect(items).toEqual([
        expect.objectContaining({
          operation_id: cut.id,
          outcome: 'found_by_lookup',
          envelope: expect.objectContaining({ category: 'succeeded' }),
        }),
      ]);
      const v = await view(ledger, cut.id);
      expect(v.state).toBe('succeeded');
      expect(v.observations.at(-1)?.source).toBe('marker');
      expect(executions(root, 'recover')).toBe(1);
    });
  });

  describe('8. the check runs under sh -c in run and in reconcile', () => {
    it('a check that only holds under sh holds in reconciliation too (login shell is bash)', async () => {
      const shell = spawnSync('sh', ['-c', `getent passwd ${sshd.user} | cut -d: -f7`], {
        encoding: 'utf8',
      }).stdout.trim();
      expect(shell).toMatch(/bash$/);
      const ledger = openMemoryLedger();
      const stateFile = join(root, 'sh-only', 'state');
      const shOnly = defineSshAction({
        name: 'sh_only',
        class: 'set_state',
        subject: 'the state',
        input: jobInput,
        host_ref: HOST,
        command: (i) => jobCommand(root, i.job, 'touch "$d/state"'),
        // Holds only under sh, and only once the job has converged the state.
        check: () => `[ -z "$BASH_VERSION" ] && test -f ${shQuote(stateFile)}`,
        deadline_ms: 120_000,
      });
      const rt = runtimeOn(ledger, sshOptions(sshd), [shOnly]);
      const d = jobDir(root, 'sh-only', true);
      const cut = await runCut(rt, shOnly, { job: 'sh-only' }, join(d, 'started'));
      expect(cut.envelope).toMatchObject({ category: 'outcome_unknown' });
      writeFileSync(join(d, 'go'), '');
      await until(() => isDone(root, 'sh-only'), 'the job to finish');
      const env = await rt.reconcile(cut.id);
      expect(env).toMatchObject({ ok: true, category: 'succeeded' });
      expect(executions(root, 'sh-only')).toBe(1);
    });
  });

  describe('9. wrapper preconditions', () => {
    it('a command text starting with - or + is the command, not an option', async () => {
      for (const [i, lead] of ['-e', '+x'].entries()) {
        const f = join(root, `dash-${i}`);
        const r = await runSsh({
          host: sshd.entry(),
          resolveKey: sshd.resolveKey,
          command: `${lead} 2>/dev/null; echo ran > ${shQuote(f)}`,
          operationId: `op_dash_${i}`,
          family: 'execute',
        });
        expect(r.evidence).toMatchObject({ phase: 'response_complete', exit_status: 0 });
        expect(readFileSync(f, 'utf8')).toBe('ran\n');
      }
    });

    it("a read action's stdin is closed: `cat` ends at once instead of waiting for input", async () => {
      const ledger = openMemoryLedger();
      const read = defineSshAction({
        name: 'read_stdin',
        class: 'read',
        subject: 'the listing',
        input: z.object({}),
        host_ref: HOST,
        command: () => 'cat; echo end',
        deadline_ms: 30_000,
      });
      const rt = runtimeOn(ledger, sshOptions(sshd), [read]);
      const env = await rt.run(read, {});
      expect(env).toMatchObject({ ok: true, data: { exit_status: 0, stdout: 'end\n' } });
    });

    it('completion means the shell exited: a background child is not waited for', async () => {
      const d = jobDir(root, 'bg');
      const r = await runSsh({
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        command: `d=${shQuote(d)}; (${'i=0; while [ ! -f "$d/go" ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done'}; echo late >> "$d/late") & echo now`,
        operationId: 'op_bg',
        family: 'execute',
      });
      expect(r).toMatchObject({ wrapper: 'ran', stdout: 'now\n' });
      expect(existsSync(join(d, 'late'))).toBe(false);
      writeFileSync(join(d, 'go'), '');
      await until(() => existsSync(join(d, 'late')), 'the background child');
    });

    it('missing tools are refused up front, naming them, before anything runs', async () => {
      const bin = mkdtempSync(join(tmpdir(), 'candor-ssh22-bin-'));
      chmodSync(bin, 0o755);
      for (const t of ['sh', 'cat', 'date', 'tr', 'mkdir', 'mv', 'rm', 'rmdir', 'ls', 'id', 'sed'])
        symlinkSync(
          spawnSync('sh', ['-c', `command -v ${t}`], { encoding: 'utf8' }).stdout.trim(),
          join(bin, t),
        );
      const bare = await startSshd({ extraConfig: [`SetEnv PATH=${bin}`] });
      const f = join(root, 'tools-ran');
      try {
        const r = await runSsh({
          host: bare.entry(),
          resolveKey: bare.resolveKey,
          command: `/usr/bin/touch ${shQuote(f)}`,
          operationId: 'op_tools',
          family: 'execute',
        });
        expect(r.wrapper).toBe('refused');
        expect(r.refusal?.code).toBe('missing_tools');
        expect(r.refusal?.detail?.split(',').sort()).toEqual(['dd', 'wc']);
        expect(classify(r.evidence, sshContract('execute')).remote_effect).toBe('none');
        expect(existsSync(f)).toBe(false);
      } finally {
        await bare.stop();
        rmSync(bin, { recursive: true, force: true });
      }
    });
  });
});
