// DESIGN.md §4 interruption tests over the same SSH path the tool uses, against a real OpenSSH
// server: the local transport is killed after the remote start marker, then the remote log is
// checked — once when the remote process completes, once when the remote side kills it. Both
// attempts must come out as outcome_unknown / reconcile_first, and reconciliation must tell them
// apart. Under CI=true these tests never skip (sshdSkipReason throws instead).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classify } from '../src/core/classify.js';
import { reconcileSsh, sshContract } from '../src/ssh/transport.js';
import { sshScenario } from './support/ssh-scenarios.js';
import { sshdSkipReason, startSshd, type SshdFixture } from './support/sshd.js';

const skip = sshdSkipReason();
if (skip !== undefined) console.warn(`skipping the sshd interruption suite: ${skip}`);

// Each SSH session costs a login shell on the server: generous limits for loaded machines.
describe.skipIf(skip !== undefined)(
  'SSH interruption after the start marker',
  { timeout: 120_000 },
  () => {
    let sshd: SshdFixture;
    beforeAll(async () => {
      sshd = await startSshd();
    });
    afterAll(async () => {
      await sshd?.stop();
    });

    const reconcile = async (operationId: string) => {
      const r = await reconcileSsh({
        host: sshd.entry(),
        resolveKey: sshd.resolveKey,
        operationId,
      });
      if (!r.ok) throw new Error(`lookup failed: ${JSON.stringify(r.failure)}`);
      return r.value;
    };

    it('(a) local transport killed, remote process completes: unknown, then reconciled as completed', async () => {
      const sc = sshScenario('cut_after_start', sshd);
      const result = await sc.run();
      expect(result.evidence).toMatchObject({
        phase: 'request_sent',
        local_error: 'cancelled',
        exit_status: null,
      });
      expect(result.phases.exec_sent).toBeDefined();
      expect(result.phases.exit_received).toBeUndefined();
      expect(sc.classify(result)).toMatchObject({
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
        dispatch_state: 'sent_no_response',
      });

      // At the cut the marker says "started" and the process is alive.
      const during = await reconcile(sc.operationId);
      expect(during.marker).toMatchObject({ state: 'started', process: 'alive' });
      expect(classify(during.evidence, sc.contract).category).toBe('outcome_unknown');

      const truth = await sc.groundTruth();
      expect(truth).toMatchObject({ log: ['start', 'done'], executions: 1, committed: true });
      expect(truth.marker).toMatchObject({ state: 'completed', exit_status: 0 });

      const after = await reconcile(sc.operationId);
      expect(classify(after.evidence, sc.contract)).toMatchObject({
        category: 'succeeded',
        remote_effect: 'applied',
      });

      // Re-running the operation id returns the recorded result and never executes again.
      const again = await sc.rerun();
      expect(again.wrapper).toBe('existing');
      expect(again.evidence).toMatchObject({
        phase: 'response_complete',
        exit_status: 0,
        idempotent_replay: true,
      });
      expect((await sc.groundTruth()).executions).toBe(1);
    });

    it('(b) local transport killed, remote side kills the process: unknown, reconciled as started-never-completed', async () => {
      const sc = sshScenario('remote_killed_after_start', sshd);
      const result = await sc.run();
      expect(result.evidence).toMatchObject({ phase: 'request_sent', exit_status: null });
      expect(sc.classify(result)).toMatchObject({
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
      });

      const truth = await sc.groundTruth();
      expect(truth).toMatchObject({ log: ['start'], executions: 1, committed: false });
      expect(truth.marker).toMatchObject({ state: 'started', process: 'gone' });

      const found = await reconcile(sc.operationId);
      expect(found.marker).toMatchObject({ state: 'started', process: 'gone' });
      // Started and never completed: still unknown (partial effects possible), never "failed".
      expect(classify(found.evidence, sc.contract)).toMatchObject({
        category: 'outcome_unknown',
        retry: 'reconcile_first',
      });

      // A retry under the same operation id does not run the command again.
      const again = await sc.rerun();
      expect(again.wrapper).toBe('existing');
      expect(again.marker).toMatchObject({ state: 'started', process: 'gone' });
      expect(again.evidence.phase).toBe('request_sent');
      expect((await sc.groundTruth()).executions).toBe(1);
    });

    it('a real transport loss (relay cut) after the start marker is unknown too, and the command completes', async () => {
      const sc = sshScenario('transport_lost_after_start', sshd);
      const result = await sc.run();
      expect(result.evidence.phase).toBe('request_sent');
      expect(['connection_closed', 'connection_reset']).toContain(result.evidence.local_error);
      expect(sc.classify(result)).toMatchObject(sc.expect);
      const truth = await sc.groundTruth();
      expect(truth).toMatchObject({ log: ['start', 'done'], executions: 1 });
      expect(truth.marker).toMatchObject({ state: 'completed', exit_status: 0 });
    });

    it('a cut after the command completed but before the exit status reconciles as completed', async () => {
      const sc = sshScenario('cut_after_completion', sshd);
      const result = await sc.run();
      expect(result.evidence).toMatchObject({ phase: 'request_sent', exit_status: null });
      expect(sc.classify(result)).toMatchObject(sc.expect);
      const truth = await sc.groundTruth();
      expect(truth).toMatchObject({ log: ['start', 'done'], committed: true, executions: 1 });
      expect(truth.marker).toMatchObject({ state: 'completed', exit_status: 0 });
    });

    it('a cut before the exec request leaves nothing behind: not sent, marker absent', async () => {
      const sc = sshScenario('cut_before_exec', sshd);
      const result = await sc.run();
      expect(result.evidence).toMatchObject({ phase: 'not_sent', local_error: 'cancelled' });
      expect(sc.classify(result)).toMatchObject(sc.expect);
      const found = await reconcile(sc.operationId);
      expect(found.marker).toEqual({ state: 'absent' });
      // An absent marker alone is not proof that nothing ran (it may have been removed, or looked
      // for elsewhere): only the ledger's record of the attempt can prove "never reached".
      expect(classify(found.evidence, sshContract('execute')).remote_effect).toBe('unknown');
    });
  },
);
