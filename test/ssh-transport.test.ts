// The SSH transport against a real OpenSSH server on loopback: what reaches the evidence for each
// way an attempt can end before, during or after the exec request, and what classify() makes of it.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classify } from '../src/core/classify.js';
import { reconcileSsh, runSsh, sshContract } from '../src/ssh/transport.js';
import { sshScenario, type SshScenarioName } from './support/ssh-scenarios.js';
import { sshdSkipReason, startSshd, type SshdFixture } from './support/sshd.js';

const skip = sshdSkipReason();
if (skip !== undefined) console.warn(`skipping the sshd transport suite: ${skip}`);

// Each SSH session costs a login shell on the server: generous limits for loaded machines.
describe.skipIf(skip !== undefined)(
  'SSH transport against a real sshd',
  { timeout: 120_000 },
  () => {
    let sshd: SshdFixture;
    beforeAll(async () => {
      sshd = await startSshd();
    });
    afterAll(async () => {
      await sshd?.stop();
    });

    it('pins the host key by the fingerprint ssh-keygen prints', () => {
      const r = spawnSync('ssh-keygen', ['-lf', join(sshd.dir, 'host_ed25519.pub')], {
        encoding: 'utf8',
      });
      expect(r.stdout.split(' ')[1]).toBe(sshd.hostKeyFingerprint);
    });

    const rows: Array<[SshScenarioName, string, Record<string, unknown>]> = [
      [
        'connect_refused',
        'not_sent',
        { local_error: 'connect_refused', error_code: 'ECONNREFUSED' },
      ],
      ['auth_rejected', 'not_sent', { local_error: 'ssh_auth_rejected' }],
      ['host_key_mismatch', 'not_sent', { local_error: 'host_key_mismatch' }],
      ['cut_before_exec', 'not_sent', { local_error: 'cancelled' }],
      ['success', 'response_complete', { exit_status: 0, contract_check: 'valid' }],
      ['nonzero_exit', 'response_complete', { exit_status: 3 }],
      // 255 is what the OpenSSH client returns on transport loss; over ssh2 it is a plain status.
      ['exit_255', 'response_complete', { exit_status: 255 }],
    ];
    it.each(rows)('%s -> phase %s', async (name, phase, fields) => {
      const sc = sshScenario(name, sshd);
      const result = await sc.run();
      expect(result.evidence).toMatchObject({ phase, ...fields });
      const c = sc.classify(result);
      expect({ category: c.category, retry: c.retry, remote_effect: c.remote_effect }).toEqual(
        sc.expect,
      );
      if (name === 'host_key_mismatch') expect(c.category).not.toBe('succeeded');
      const truth = await sc.groundTruth();
      if (phase === 'not_sent') {
        // Nothing ran and no marker was claimed: the "none" remote effect is the truth.
        expect(truth).toMatchObject({ executions: 0, log: [], marker: { state: 'absent' } });
        expect(result.phases.exec_sent).toBeUndefined();
      } else {
        expect(truth).toMatchObject({ executions: 1, log: ['start', 'done'], committed: true });
        expect(truth.marker).toMatchObject({ state: 'completed', exit_status: fields.exit_status });
      }
    });

    it('never puts key material into the result', async () => {
      const sc = sshScenario('success', sshd);
      const result = await sc.run();
      const serialized = JSON.stringify(result);
      const keyBody = sshd.privateKey.toString('utf8').split('\n')[1] ?? 'unreachable';
      expect(serialized).not.toContain(keyBody);
      expect(serialized).not.toContain('PRIVATE KEY');
    });

    it('a key that cannot be fetched stops before any connection', async () => {
      const r = await runSsh({
        host: sshd.entry({ key_ref: 'vault:missing' }),
        resolveKey: sshd.resolveKey,
        command: 'true',
        operationId: 'op_nokey',
        family: 'execute',
      });
      expect(r.evidence).toEqual({ phase: 'not_sent', local_error: 'credential_unavailable' });
      expect(r.phases.key_resolved).toBeUndefined();
    });

    it('a deadline after the exec request leaves the outcome unknown', async () => {
      const r = await runSsh({
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        command: 'sleep 3',
        operationId: 'op_deadline',
        family: 'execute',
        deadlineMs: 1500,
      });
      expect(r.evidence).toMatchObject({
        phase: 'request_sent',
        local_error: 'deadline',
        exit_status: null,
      });
      expect(classify(r.evidence, sshContract('execute'))).toMatchObject({
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        dispatch_state: 'sent_no_response',
      });
    });

    it('a deadline that expires before the exec request means nothing was sent', async () => {
      const r = await runSsh({
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        command: `touch ${join(sshd.dir, 'deadline-must-not-exist')}`,
        operationId: 'op_deadline_early',
        family: 'execute',
        deadlineMs: 1,
      });
      expect(r.evidence).toEqual({ phase: 'not_sent', local_error: 'deadline' });
      expect(existsSync(join(sshd.dir, 'deadline-must-not-exist'))).toBe(false);
    });

    it('a remote process killed by a signal is a cut response, not a failure', async () => {
      const r = await runSsh({
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        // The wrapper itself (the session's process) is killed: no exit status reaches the client.
        command: 'kill -KILL $PPID',
        operationId: 'op_signal',
        family: 'read',
      });
      expect(r.evidence).toEqual({
        phase: 'response_cut',
        exit_status: null,
        error_code: 'exit_signal_KILL',
      });
      expect(classify(r.evidence, sshContract('execute')).category).toBe('outcome_unknown');
    });

    it('read runs the command without a marker; retry after unknown is allowed', async () => {
      const r = await runSsh({
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        command: 'printf "%s" "$((40 + 2))"; exit 4',
        operationId: 'op_read',
        family: 'read',
      });
      expect(r.evidence).toEqual({
        phase: 'response_complete',
        exit_status: 4,
        contract_check: 'unchecked',
      });
      expect(r.stdout).toBe('42');
      expect(r.stderr).toBe('');
      const marker = await reconcileSsh({
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        operationId: 'op_read',
      });
      expect(marker.ok && marker.value.marker).toEqual({ state: 'absent' });
      expect(classify({ phase: 'request_sent' }, sshContract('read')).retry).toBe('allowed');
    });

    it('set_state runs only when the check fails and reports the check after', async () => {
      const flag = join(sshd.dir, 'state-flag');
      const opts = {
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        command: `echo applied >> ${flag}`,
        check: `test -f ${flag}`,
        operationId: 'op_state',
        family: 'set_state',
      } as const;
      const first = await runSsh(opts);
      expect(first).toMatchObject({ wrapper: 'ran', check_status: 0 });
      expect(first.evidence).toMatchObject({ exit_status: 0, contract_check: 'valid' });
      const second = await runSsh(opts);
      expect(second.wrapper).toBe('converged_before');
      expect(second.evidence).toMatchObject({ exit_status: 0, idempotent_replay: true });
      expect(readFileSync(flag, 'utf8')).toBe('applied\n');
      const never = await runSsh({ ...opts, command: 'true', check: 'false' });
      expect(never.evidence).toMatchObject({ exit_status: 0, contract_check: 'violated' });
    });

    it('a marker directory it cannot create refuses before running (documented not-started)', async () => {
      const r = await runSsh({
        host: sshd.entry({ marker_dir: '/proc/candor-no-such/ops' }),
        resolveKey: sshd.resolveKey,
        command: `touch ${join(sshd.dir, 'must-not-exist')}`,
        operationId: 'op_refused',
        family: 'append',
      });
      expect(r.wrapper).toBe('refused');
      expect(r.evidence).toMatchObject({
        phase: 'response_complete',
        exit_status: 70,
        contract_check: 'documented_failure',
        error_code: 'wrapper_marker_unavailable',
      });
      expect(classify(r.evidence, sshContract('append'))).toMatchObject({
        category: 'confirmed_failure',
        remote_effect: 'none',
        retry: 'allowed',
      });
    });
  },
);
