// Shared helpers for the adversarial SSH suites: a remote "job" whose executions are counted on
// the local disk (sshd runs on this machine), runtimes over one ledger, and a cut made exactly
// after the remote command started (an AbortSignal fired once the job's `started` file exists).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Envelope } from '../../src/core/envelope.js';
import type { EngineAction } from '../../src/engine/action.js';
import { staticCredentials } from '../../src/engine/ports.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import type { SshRuntimeOptions } from '../../src/ssh/adapter.js';
import type { SshdFixture } from '../../src/fakes/sshd.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import type { HostEntry } from '../../src/ssh/inventory.js';
import { shQuote } from '../../src/ssh/wrapper.js';

export const HOST = 'box';

export const jobInput = z.object({ job: z.string().regex(/^[a-z0-9-]{1,60}$/) });
export type JobInput = z.output<typeof jobInput>;

/** Bounded (about 30 s), so a failed test never leaves a remote loop behind. */
export const WAIT_GO =
  'i=0; while [ ! -f "$d/go" ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done';

/** The job: counts one execution, marks `started`, optionally holds until `go`, then `effect`. */
export function jobCommand(root: string, job: string, effect = '', hold = true): string {
  return [
    `d=${shQuote(join(root, job))}`,
    'echo run >>"$d/count"',
    'touch "$d/started"',
    ...(hold ? [`if [ -f "$d/hold" ]; then ${WAIT_GO}; fi`] : []),
    ...(effect ? [effect] : []),
    'echo done >>"$d/log"',
  ].join('; ');
}

/** The job's directory; with `hold` the job waits for `go` after `started`. */
export function jobDir(root: string, job: string, hold = false): string {
  const d = join(root, job);
  mkdirSync(d, { recursive: true });
  if (hold) writeFileSync(join(d, 'hold'), '');
  return d;
}

export function executions(root: string, job: string): number {
  const f = join(root, job, 'count');
  return existsSync(f) ? readFileSync(f, 'utf8').split('\n').filter(Boolean).length : 0;
}

export const isDone = (root: string, job: string): boolean => existsSync(join(root, job, 'log'));

/** Polls (bounded) until `pred` holds; throws with `what` otherwise. */
export async function until(pred: () => boolean, what: string, limitMs = 90_000): Promise<void> {
  const step = 25;
  for (let waited = 0; waited < limitMs; waited += step) {
    if (pred()) return;
    await new Promise((r) => setTimeout(r, step));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export function sshOptions(
  sshd: SshdFixture,
  entry: HostEntry = sshd.entry(),
  extra: Partial<SshRuntimeOptions> = {},
): SshRuntimeOptions {
  return { inventory: { [HOST]: entry }, resolveKey: sshd.resolveKey, ...extra };
}

export function runtimeOn(
  ledger: LedgerStore,
  ssh: SshRuntimeOptions,
  actions: EngineAction[] = [],
): Runtime {
  return createRuntime({
    ledger,
    credentials: staticCredentials({}),
    ssh,
    actions,
    sleep: () => Promise.resolve(),
  });
}

/**
 * Opens the operation, runs it, and aborts the local side once the job reports `started` (the
 * remote command runs on, held until `go`): the attempt ends as outcome_unknown.
 */
export async function runCut<I>(
  rt: Runtime,
  action: EngineAction<I, unknown>,
  input: I,
  startedFile: string,
): Promise<{ id: string; envelope: Envelope }> {
  const id = await rt.open(action, input);
  const ac = new AbortController();
  const pending = rt.run(action, input, { operationId: id, signal: ac.signal });
  await until(() => existsSync(startedFile), `${startedFile}`);
  ac.abort();
  return { id, envelope: await pending };
}
