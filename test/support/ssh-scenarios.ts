// Matrix-ready SSH rows against the real sshd fixture: each scenario injects one condition on the
// same SSH path the tool uses and can report the remote ground truth afterwards. The remote
// command appends `start` / `done` to a log and one line per execution to a counter; sshd runs on
// loopback, so the test reads those files through the local file system.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { classify, type Classification } from '../../src/core/classify.js';
import type { Contract } from '../../src/core/evidence.js';
import type { ActionClass, Category, RemoteEffect, Retry } from '../../src/core/vocabulary.js';
import { reconcileSsh, runSsh, sshContract, type SshRunResult } from '../../src/ssh/transport.js';
import type { MarkerState } from '../../src/ssh/wrapper.js';
import { shQuote } from '../../src/ssh/wrapper.js';
import { closedPort, startCutProxy, type SshdFixture } from './sshd.js';

export const SSH_SCENARIOS = [
  'success',
  'connect_refused',
  'auth_rejected',
  'host_key_mismatch',
  'cut_before_exec',
  'cut_after_start',
  'remote_killed_after_start',
  'transport_lost_after_start',
  'cut_after_completion',
  'nonzero_exit',
  'exit_255',
] as const;
export type SshScenarioName = (typeof SSH_SCENARIOS)[number];

export interface SshGroundTruth {
  /** Lines the remote command wrote, in order (`start`, `done`). */
  log: string[];
  /** How many times the command body ran. */
  executions: number;
  /** The command's effect happened (its `done` line), the analogue of `mutation_committed`. */
  committed: boolean;
  /** What the marker says once the remote side settled; null if the lookup failed. */
  marker: MarkerState | null;
}

export interface SshScenario {
  name: SshScenarioName;
  operationId: string;
  family: ActionClass;
  contract: Contract;
  /** What classify() must say about run()'s evidence, and whether the effect is known. */
  expect: { category: Category; retry: Retry; remote_effect: RemoteEffect };
  /** One attempt under the injected condition. */
  run(): Promise<SshRunResult>;
  /** The same operation id again, with no fault: must never execute the command a second time. */
  rerun(): Promise<SshRunResult>;
  /** Lets the remote side settle (completes or stays dead), then reads the truth. */
  groundTruth(): Promise<SshGroundTruth>;
  classify(result: SshRunResult): Classification;
}

let counter = 0;
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(cond: () => boolean | Promise<boolean>, what: string, ms = 60_000) {
  const until = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await tick(20);
  }
}

const unknownOutcome = {
  category: 'outcome_unknown',
  retry: 'reconcile_first',
  remote_effect: 'unknown',
} as const;

const EXPECT: Record<SshScenarioName, SshScenario['expect']> = {
  success: { category: 'succeeded', retry: 'never', remote_effect: 'applied' },
  connect_refused: { category: 'local_failure', retry: 'allowed', remote_effect: 'none' },
  auth_rejected: { category: 'authentication_failed', retry: 'never', remote_effect: 'none' },
  host_key_mismatch: { category: 'local_failure', retry: 'never', remote_effect: 'none' },
  cut_before_exec: { category: 'local_failure', retry: 'allowed', remote_effect: 'none' },
  cut_after_start: unknownOutcome,
  remote_killed_after_start: unknownOutcome,
  transport_lost_after_start: unknownOutcome,
  cut_after_completion: unknownOutcome,
  nonzero_exit: {
    category: 'confirmed_failure',
    retry: 'reconcile_first',
    remote_effect: 'unknown',
  },
  exit_255: { category: 'confirmed_failure', retry: 'reconcile_first', remote_effect: 'unknown' },
};

/**
 * Sets up one scenario on `sshd` (a fresh operation id and work directory each call).
 * `family` defaults to `execute` (arbitrary remote command); the expectations assume it.
 */
export function sshScenario(
  name: SshScenarioName,
  sshd: SshdFixture,
  opts: { family?: ActionClass } = {},
): SshScenario {
  const n = ++counter;
  const operationId = `op_ssh_${name}_${process.pid}_${n}`;
  const family = opts.family ?? 'execute';
  const work = join(sshd.dir, 'work', `${name}-${n}`);
  mkdirSync(work, { recursive: true });
  const file = (f: string) => join(work, f);
  const q = (f: string) => shQuote(file(f));
  // Bounded (about 30 s) so that a failed test never leaves a remote loop behind.
  const waitGo = `i=0; while [ ! -f ${q('go')} ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done`;
  const exitCode = name === 'nonzero_exit' ? 3 : name === 'exit_255' ? 255 : 0;
  const gated = name.includes('after_start') || name === 'cut_after_completion';
  const command =
    name === 'cut_after_completion'
      ? `echo start >> ${q('log')}; echo run >> ${q('count')}; echo done >> ${q('log')}; ${waitGo}; exit 0`
      : `echo start >> ${q('log')}; echo run >> ${q('count')}; ${gated ? `${waitGo}; ` : ''}echo done >> ${q('log')}; exit ${exitCode}`;
  const read = (f: string) => (existsSync(file(f)) ? readFileSync(file(f), 'utf8') : '');
  const logLines = () => read('log').split('\n').filter(Boolean);
  const base = { host: sshd.entry(), resolveKey: sshd.resolveKey, command, operationId, family };

  const lookup = async (): Promise<MarkerState | null> => {
    const r = await reconcileSsh({ host: sshd.entry(), resolveKey: sshd.resolveKey, operationId });
    return r.ok ? r.value.marker : null;
  };

  /** Remote side kills the wrapper and the command (SIGKILL) over a second SSH connection. */
  const killRemote = async () => {
    let pids: number[] = [];
    await waitFor(async () => {
      const m = await lookup();
      if (m?.state !== 'started' || m.pid === null || m.child_pid === null) return false;
      // The command counts its run on the line after `start`: kill only once it has.
      if (read('count').trim() === '') return false;
      pids = [m.pid, m.child_pid];
      return true;
    }, 'the start marker with both pids');
    const killed = await runSsh({
      ...base,
      family: 'read',
      command: `kill -9 ${pids.join(' ')}`,
    });
    if (killed.evidence.exit_status !== 0) throw new Error(`remote kill failed: ${killed.stderr}`);
    // A process killed with SIGKILL stays visible until its parent reaps it: the remote side has
    // killed it once the marker's own check no longer finds it (seen in CI on Node 24: read at
    // once, the marker still said `alive`).
    await waitFor(async () => {
      const m = await lookup();
      return m?.state === 'started' && m.process === 'gone';
    }, 'the killed process to be gone');
  };

  const run = async (): Promise<SshRunResult> => {
    switch (name) {
      case 'connect_refused':
        return runSsh({ ...base, host: sshd.entry({ port: await closedPort() }) });
      case 'auth_rejected': {
        const other = join(work, 'stranger_key');
        // A key the server has never seen (ssh2 reads OpenSSH-format keys).
        const { generateKeyPairSync } = (await import('ssh2')).utils;
        writeFileSync(other, generateKeyPairSync('ed25519').private, { mode: 0o600 });
        return runSsh({ ...base, host: sshd.entry({ key_ref: `file:${other}` }) });
      }
      case 'host_key_mismatch':
        return runSsh({
          ...base,
          host: sshd.entry({
            host_key: { policy: 'pinned', fingerprint: `SHA256:${'A'.repeat(43)}` },
          }),
        });
      case 'cut_before_exec': {
        const ac = new AbortController();
        // Local abort the instant authentication completes, before the exec request.
        return runSsh({
          ...base,
          signal: ac.signal,
          onPhase: (p) => (p === 'authenticated' ? ac.abort() : undefined),
        });
      }
      case 'transport_lost_after_start': {
        const proxy = await startCutProxy(sshd.port);
        try {
          const pending = runSsh({ ...base, host: sshd.entry({ port: proxy.port }) });
          await waitFor(() => logLines().includes('start'), 'the start line');
          proxy.cutAll();
          return await pending;
        } finally {
          await proxy.close();
        }
      }
      case 'cut_after_start':
      case 'remote_killed_after_start':
      case 'cut_after_completion': {
        const ac = new AbortController();
        const pending = runSsh({ ...base, signal: ac.signal });
        const mark = name === 'cut_after_completion' ? 'done' : 'start';
        await waitFor(() => logLines().includes(mark), `the ${mark} line`);
        ac.abort(); // destroys the ssh2 connection: the local transport is gone
        const result = await pending;
        if (name === 'remote_killed_after_start') await killRemote();
        return result;
      }
      default:
        return runSsh(base);
    }
  };

  const groundTruth = async (): Promise<SshGroundTruth> => {
    if (gated) {
      writeFileSync(file('go'), '');
      await waitFor(async () => {
        const m = await lookup();
        return m?.state === 'completed' || (m?.state === 'started' && m.process === 'gone');
      }, 'the remote side to settle');
    }
    const log = logLines();
    return {
      log,
      executions: read('count').split('\n').filter(Boolean).length,
      committed: log.includes('done'),
      marker: await lookup(),
    };
  };

  const contract = sshContract(family);
  return {
    name,
    operationId,
    family,
    contract,
    expect: EXPECT[name],
    run,
    rerun: () => runSsh(base),
    groundTruth,
    classify: (r) => classify(r.evidence, contract),
  };
}
