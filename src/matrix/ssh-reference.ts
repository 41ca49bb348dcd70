// SSH reference actions and the SSH side of the matrix: one real OpenSSH server on loopback for all
// SSH rows, and per row the injected condition (an inventory variant, an AbortSignal fired at a
// precise remote step, a cut relay, a remote kill, an exit status) plus the remote ground truth.
//
// The remote job plays the fake service's role: it appends `start` and `done` to a log and one line
// per execution to a counter, in a work directory of its own per row. `done` is the analogue of
// `mutation_committed`. The runner arms a row by writing files into that directory (hold before or
// after `done` until `go` appears, the exit status) — like arming a fault per request id. sshd runs
// on this machine, so the runner reads the log and the operation marker from the local disk.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Envelope } from '../core/envelope.js';
import type { EngineAction } from '../engine/action.js';
import { defineSshAction } from '../engine/ssh-action.js';
import type { SshRuntimeOptions } from '../ssh/adapter.js';
import {
  closedPort,
  startCutProxy,
  startSshd,
  type CutProxy,
  type SshdFixture,
} from '../fakes/sshd.js';
import type { Inventory } from '../ssh/inventory.js';
import { shQuote } from '../ssh/wrapper.js';
import {
  combineVerdicts,
  fillVars,
  type MatrixRow,
  type RowTarget,
  type SshCondition,
  type Verdict,
} from './spec.js';

/** Inventory names: the real host, and one variant per connection-level condition. */
export const SSH_HOSTS = {
  direct: 'ref-host',
  closed: 'ref-host-closed',
  stranger: 'ref-host-stranger',
  wrong_pin: 'ref-host-wrong-pin',
  relay: 'ref-host-relay',
} as const;

const service = z.object({ service: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,100}$/) });
type ServiceInput = z.output<typeof service>;

// Bounded (about 30 s) so that a failed run never leaves a remote loop behind.
const WAIT_GO = 'i=0; while [ ! -f "$d/go" ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done';

/** The remote job: start, count, optional hold, optional effect, done, optional hold, exit. */
function jobCommand(root: string, input: ServiceInput, effect = ''): string {
  return [
    `d=${shQuote(join(root, input.service))}`,
    'echo start >>"$d/log"',
    'echo run >>"$d/count"',
    'echo $$ >"$d/pid"',
    `if [ -f "$d/hold_before_done" ]; then ${WAIT_GO}; fi`,
    ...(effect ? [effect] : []),
    'echo done >>"$d/log"',
    `if [ -f "$d/hold_after_done" ]; then ${WAIT_GO}; fi`,
    'st=0; if [ -f "$d/exit_status" ]; then read -r st <"$d/exit_status"; fi',
    'exit "$st"',
  ].join('; ');
}

/**
 * SSH reference actions on `hostRef`, their jobs under `root`. `restart_service` and `rotate_logs`
 * run under the operation marker (`execute`); `enable_service` converges (`set_state`, with a
 * check that exits 0 once the service is enabled).
 */
export function sshReferenceActions(hostRef: string, root: string): EngineAction[] {
  const deadline_ms = 20_000;
  return [
    defineSshAction({
      name: 'restart_service',
      class: 'execute',
      subject: 'the service restart',
      input: service,
      host_ref: hostRef,
      command: (i) => jobCommand(root, i),
      deadline_ms,
    }),
    defineSshAction({
      name: 'rotate_logs',
      class: 'execute',
      subject: 'the log rotation',
      input: service,
      host_ref: hostRef,
      command: (i) => jobCommand(root, i),
      deadline_ms,
    }),
    defineSshAction({
      name: 'enable_service',
      class: 'set_state',
      subject: 'enabling the service',
      input: service,
      host_ref: hostRef,
      command: (i) => jobCommand(root, i, 'touch "$d/enabled"'),
      check: (i) => `test -f ${shQuote(join(root, i.service, 'enabled'))}`,
      deadline_ms,
    }),
  ];
}

/** One sshd, one relay and one inventory for every SSH row of a run. */
export interface SshMatrixEnv {
  runtime: SshRuntimeOptions;
  /** The SSH reference actions on the real host (registered with the runtime). */
  actions: EngineAction[];
  sshd: SshdFixture;
  proxy: CutProxy;
  root: string;
  markerDir: string;
  /** Forms of the user's private key that must appear in no result, transcript or trail. */
  secrets: string[];
  close(): Promise<void>;
}

/**
 * The private key as text and its base64 body (joined, and line by line past the first line, which
 * every unencrypted OpenSSH key shares).
 */
function keySecrets(privateKey: Buffer): string[] {
  const body = privateKey
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('-----'));
  return [privateKey.toString('utf8').trim(), body.join(''), ...body.slice(1)].filter(
    (x) => x.length >= 16,
  );
}

export async function startSshMatrixEnv(): Promise<SshMatrixEnv> {
  // The fixture keeps the user's ~/.bashrc out of the sessions (SshdOptions.userShellInit).
  const sshd = await startSshd();
  try {
    // The SSH client loads on first use; loading it now keeps that pause out of every row's time.
    await import('../ssh/transport.js');
    const proxy = await startCutProxy(sshd.port);
    const root = join(sshd.dir, 'jobs');
    const markerDir = join(sshd.dir, 'ops');
    mkdirSync(root, { recursive: true });
    const inventory: Inventory = {
      [SSH_HOSTS.direct]: sshd.entry({ marker_dir: markerDir }),
      [SSH_HOSTS.closed]: sshd.entry({ marker_dir: markerDir, port: await closedPort() }),
      [SSH_HOSTS.stranger]: sshd.entry({
        marker_dir: markerDir,
        key_ref: sshd.strangerKeyRef('matrix'),
      }),
      [SSH_HOSTS.wrong_pin]: sshd.entry({
        marker_dir: markerDir,
        host_key: { policy: 'pinned', fingerprint: `SHA256:${'A'.repeat(43)}` },
      }),
      [SSH_HOSTS.relay]: sshd.entry({ marker_dir: markerDir, port: proxy.port }),
    };
    return {
      runtime: { inventory, resolveKey: sshd.resolveKey },
      actions: sshReferenceActions(SSH_HOSTS.direct, root),
      sshd,
      proxy,
      root,
      markerDir,
      secrets: keySecrets(sshd.privateKey),
      close: async () => {
        await proxy.close();
        await sshd.stop();
      },
    };
  } catch (e) {
    await sshd.stop();
    throw e;
  }
}

export type MarkerSummary = 'absent' | 'claimed' | 'started' | 'completed';

export interface SshTruth {
  log: string[];
  executions: number;
  marker: MarkerSummary;
}

interface SshTruthEvent {
  at: number;
  event: string;
  detail: string;
}

/** One row's injected condition and its ground truth. */
interface SshRowRig {
  action: EngineAction;
  signal?: AbortSignal;
  /** Snapshot of the remote truth now. */
  truth(operationId: string | null): SshTruth;
  /**
   * Between the first claim and the agent's follow-up: the remote side completes (hold released)
   * or is killed, and the rig waits until the marker shows it settled.
   */
  settle(operationId: string | null): Promise<void>;
  events(): SshTruthEvent[];
  dispose(): Promise<void>;
}

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(cond: () => boolean, what: string, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await tick(15);
  }
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

const lines = (text: string): string[] => text.split('\n').filter(Boolean);

/** The marker's recorded pids (`start`: `<ts> <wrapper pid> <boot id>` then `child <pid>`). */
function markerPids(dir: string): number[] {
  const [first = '', second = ''] = lines(readText(join(dir, 'start')));
  return [first.split(' ')[1], second.split(' ')[1]]
    .map((p) => Number(p))
    .filter((p) => Number.isInteger(p) && p > 0);
}

/** A process that no longer exists or is a zombie. */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  return /^\d+ \(.*\) Z/.test(readText(`/proc/${pid}/stat`));
}

/** Conditions injected by pointing the action at another inventory entry. */
const HOST_FOR: Partial<Record<SshCondition, string>> = {
  connect_refused: SSH_HOSTS.closed,
  auth_rejected: SSH_HOSTS.stranger,
  host_key_mismatch: SSH_HOSTS.wrong_pin,
  cut_before_exec: SSH_HOSTS.relay,
  transport_lost_after_start: SSH_HOSTS.relay,
};

/** The condition runs the action against another inventory entry than the registered one. */
export const usesOtherHost = (condition: SshCondition): boolean =>
  HOST_FOR[condition] !== undefined;

/** Sets up `condition` for one row whose job directory is `<root>/<serviceName>`. */
function prepareSshRow(
  env: SshMatrixEnv,
  operation: string,
  condition: SshCondition,
  serviceName: string,
): SshRowRig {
  const dir = join(env.root, serviceName);
  mkdirSync(dir, { recursive: true });
  const file = (f: string) => join(dir, f);
  const seen: SshTruthEvent[] = [];
  const note = (event: string, detail = '') => seen.push({ at: Date.now(), event, detail });
  const logLines = () => lines(readText(file('log')));

  const hostRef = HOST_FOR[condition] ?? SSH_HOSTS.direct;
  const action = sshReferenceActions(hostRef, env.root).find((a) => a.name === operation);
  if (!action) throw new Error(`no SSH reference action "${operation}"`);

  if (condition === 'nonzero_exit') writeFileSync(file('exit_status'), '3\n');
  if (condition === 'exit_255') writeFileSync(file('exit_status'), '255\n');
  if (condition === 'already_converged') writeFileSync(file('enabled'), '');
  const holdBefore =
    condition === 'cut_after_start' ||
    condition === 'transport_lost_after_start' ||
    condition === 'remote_killed_after_start';
  const holdAfter = condition === 'cut_after_completion';
  if (holdBefore) writeFileSync(file('hold_before_done'), '');
  if (holdAfter) writeFileSync(file('hold_after_done'), '');

  const ac = new AbortController();
  let signal: AbortSignal | undefined;
  if (condition === 'cut_before_exec') {
    signal = ac.signal;
    void env.proxy.holdNext().then(() => {
      note('handshake_held', 'the relay holds the server banner');
      ac.abort();
    });
  }
  // Watch the remote log: note each line when first seen, and cut at the armed step.
  const cutAt = holdBefore ? 'start' : holdAfter ? 'done' : null;
  if (cutAt !== null && condition !== 'transport_lost_after_start') signal = ac.signal;
  let cut = false;
  const watcher = setInterval(() => {
    const log = logLines();
    for (const l of ['start', 'done'])
      if (log.includes(l) && !seen.some((s) => s.event === l)) note(l, 'remote log line');
    if (cutAt !== null && !cut && log.includes(cutAt)) {
      cut = true;
      if (condition === 'transport_lost_after_start') {
        note('transport_cut', 'the relay dropped both sides');
        env.proxy.cutAll();
      } else {
        note('client_abort', `AbortSignal after the ${cutAt} line`);
        ac.abort();
      }
    }
  }, 10);

  const markerDir = (op: string | null) => join(env.markerDir, op ?? '-');
  const truth = (op: string | null): SshTruth => {
    const m = markerDir(op);
    return {
      log: logLines(),
      executions: lines(readText(file('count'))).length,
      marker: existsSync(join(m, 'done'))
        ? 'completed'
        : existsSync(join(m, 'start'))
          ? 'started'
          : existsSync(m)
            ? 'claimed'
            : 'absent',
    };
  };

  return {
    action,
    ...(signal ? { signal } : {}),
    truth,
    settle: async (op) => {
      if (!holdBefore && !holdAfter) return;
      const m = markerDir(op);
      if (condition === 'remote_killed_after_start') {
        // Under a marker: the wrapper and the command it recorded; set_state (no marker): the job.
        const pidsNow = () =>
          existsSync(m)
            ? markerPids(m)
            : lines(readText(file('pid')))
                .map(Number)
                .slice(0, 1);
        const want = existsSync(m) ? 2 : 1;
        // The job writes its pid file after its `count` line: killing before that (the marker's
        // pids are known as soon as `start` is logged) would leave a started run uncounted.
        await waitFor(
          () => pidsNow().length === want && lines(readText(file('pid'))).length > 0,
          'the pids of the started command',
        );
        const pids = pidsNow();
        for (const pid of pids) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
        note('remote_killed', `SIGKILL to ${pids.length} remote process(es)`);
        await waitFor(() => pids.every(gone), 'the killed processes to be gone');
        return;
      }
      writeFileSync(file('go'), '');
      note('released', 'the remote command may finish');
      // Marker families: the marker records completion once the command exited. set_state runs
      // without a marker: its `done` line is the last word.
      await waitFor(
        () => existsSync(join(m, 'done')) || (!existsSync(m) && logLines().includes('done')),
        'the remote command to complete',
      );
    },
    events: () => [...seen],
    dispose: async () => {
      clearInterval(watcher);
      // Never leave a remote loop or an armed relay behind.
      if (!existsSync(file('go'))) writeFileSync(file('go'), '');
      if (condition === 'cut_before_exec' || condition === 'transport_lost_after_start')
        env.proxy.cutAll();
      await tick(0);
    },
  };
}

/** Categories that claim the command never ran (or could not have run). */
const BEFORE_EXEC = new Set([
  'local_failure',
  'authentication_failed',
  'authorization_denied',
  'confirmed_rejection',
  'rate_limited',
  'approval_denied',
  'gate_locked',
]);

/**
 * The oracle for SSH rows: the remote log against the tool's claim. A command that started (its
 * `start` line) must never be claimed as "not run" (`remote_effect: none`, or a before-exec
 * category); success must not be claimed for a command that started and never completed; it must
 * never run twice. `outcome_unknown` for a command that never started is imprecision.
 */
export function sshOracle(truth: SshTruth, env: Envelope): Verdict {
  const ran = truth.log.includes('start');
  const completed = truth.log.includes('done');
  if (truth.executions > 1)
    return { verdict: 'unsafe', detail: `the command ran ${truth.executions} times` };
  if (ran && (env.remote_effect === 'none' || BEFORE_EXEC.has(env.category)))
    return {
      verdict: 'unsafe',
      detail: `the command ran but the tool said ${env.category} / remote_effect ${env.remote_effect}`,
    };
  if (ran && !completed && env.category === 'succeeded')
    return {
      verdict: 'unsafe',
      detail: 'the tool claimed success for a command that never completed',
    };
  if (env.category === 'outcome_unknown' && !ran)
    return { verdict: 'imprecise', detail: 'the command never started; the tool could not know' };
  return {
    verdict: 'consistent',
    detail: completed ? 'the command completed' : ran ? 'started, never completed' : 'never ran',
  };
}

/** An SSH row: the condition injected on the real sshd, the remote job's record as the oracle. */
export function sshTarget(row: MatrixRow, cor: string, env: SshMatrixEnv): RowTarget {
  const c = row.condition as { ssh: SshCondition };
  const input = fillVars(row.input, { correlation_id: cor }) as Record<string, unknown>;
  const r = row.expect.remote;
  if (!('executions' in r)) throw new Error('an SSH row needs an SSH remote expectation');
  if (typeof input.service !== 'string') throw new Error('SSH reference actions need a service');
  const rig = prepareSshRow(env, row.operation, c.ssh, input.service);
  let opId: string | null = null;
  let first: SshTruth | null = null;
  return {
    action: rig.action,
    input,
    ...(rig.signal ? { signal: rig.signal } : {}),
    afterFirstClaim: async (claim) => {
      opId = claim.operation_id;
      first = rig.truth(opId);
      await rig.settle(opId);
    },
    remote: () => {
      const now = rig.truth(opId);
      const expected: Record<string, unknown> = { log: r.log, executions: r.executions };
      const actual: Record<string, unknown> = { log: now.log, executions: now.executions };
      if (r.marker !== undefined) {
        expected.marker = r.marker;
        actual.marker = now.marker;
      }
      return { ok: JSON.stringify(expected) === JSON.stringify(actual), expected, actual };
    },
    oracle: (claim, final) => {
      const firstVerdict = sshOracle(first ?? rig.truth(opId), claim);
      return final === claim
        ? firstVerdict
        : combineVerdicts(firstVerdict, sshOracle(rig.truth(opId), final));
    },
    truthTimeline: () =>
      rig
        .events()
        .map((e) => ({ at: e.at, source: 'fake' as const, event: e.event, detail: e.detail })),
    dispose: () => rig.dispose(),
  };
}
