// The transport contract (test/transport.case.ts) over the SSH adapter, against the real OpenSSH
// server the SSH suites use: a marker left by a real run, a marker that is not there, convergence
// checks that pass or hold, and a host whose port nobody listens on.
import type { SshLookupPrepared, SshPrepared } from '../src/core/transport.js';
import { sshTransport } from '../src/ssh/adapter.js';
import { closedPort, sshdSkipReason, startSshd } from './support/sshd.js';
import { transportContract } from './transport.case.js';

const skip = sshdSkipReason();
if (skip !== undefined) console.warn(`skipping the SSH transport contract: ${skip}`);

const run = (id: string, command: string, host_ref = 'web'): SshPrepared => ({
  kind: 'ssh',
  op: 'run',
  id,
  host_ref,
  command,
  family: 'create',
  operation_id: id,
  deadline_ms: 60_000,
});

transportContract(
  'SSH (real OpenSSH)',
  async () => {
    const sshd = await startSshd();
    const transport = sshTransport({
      inventory: { web: sshd.entry(), gone: sshd.entry({ port: await closedPort() }) },
      resolveKey: sshd.resolveKey,
    });
    // The found marker is one a real run left behind.
    const ran = await transport.dispatch(run('op_contract_ran', 'echo ran'), {});
    if (ran.evidence.exit_status !== 0) throw new Error('the setup run did not complete');
    const marker = (operation_id: string, host_ref = 'web'): SshLookupPrepared => ({
      kind: 'ssh',
      op: 'marker',
      id: operation_id,
      host_ref,
      operation_id,
    });
    return {
      transport,
      answered: run('op_contract_answered', 'echo hi'),
      failing: run('op_contract_failing', 'echo hi', 'gone'),
      held: run('op_contract_held', 'sleep 60'),
      lookups: {
        found: marker('op_contract_ran'),
        absent: marker('op_contract_never'),
        failed: marker('op_contract_ran', 'gone'),
        held: {
          kind: 'ssh',
          op: 'check',
          id: '',
          host_ref: 'web',
          check: 'sleep 60',
          deadline_ms: 60_000,
        },
      },
      close: () => sshd.stop(),
    };
  },
  { skip },
);
