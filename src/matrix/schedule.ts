// Runs matrix rows a few at a time. Each row already owns its correlation id, its fault (armed per
// call id), its fake resources, its SSH job directory and its operation marker, so rows are
// independent — except where a row's condition lives in something all rows share:
//   - a keep-alive race (`warmup: true`) leaves a doomed socket in a connection pool, and its
//     measured call must be the one that picks it up: such a row has a pool of its own (runner.ts)
//     and, in case pools are ever shared, runs alone among HTTP rows;
//   - the SSH relay's `holdNext` and `cutAll` act on every relayed connection, so rows that go
//     through the relay run one at a time;
//   - the runtime knows an action by its name, and the last `run` of a name is what a later
//     `reconcile` rebuilds the request from: a row that runs a changed copy of an action (another
//     origin for `before_bytes`, another SSH host) gets a runtime of its own (runner.ts).
// Everything else runs side by side; results keep the file's row order.
import type { MatrixRow, SshCondition } from './spec.js';
import { usesOtherHost } from './ssh-reference.js';

type Mode = 'shared' | 'exclusive';

/**
 * The row runs a changed copy of its action (registered under the same name) or arms its condition
 * in the connection pool: it needs a runtime of its own when rows run side by side.
 */
export function needsOwnRuntime(row: MatrixRow): boolean {
  const c = row.condition as Record<string, unknown>;
  if ('ssh' in c) return usesOtherHost(c.ssh as SshCondition);
  // A restart closes the row's runtime and opens another with the same owner.
  return row.warmup === true || 'before_bytes' in c || row.again?.restart === true;
}

/** The shared things a row touches and how. */
export function rowClaims(row: MatrixRow): Map<string, Mode> {
  const claims = new Map<string, Mode>();
  const c = row.condition as Record<string, unknown>;
  if ('ssh' in c) {
    const ssh = c.ssh as SshCondition;
    if (ssh === 'cut_before_exec' || ssh === 'transport_lost_after_start')
      claims.set('ssh-relay', 'exclusive');
    return claims;
  }
  claims.set('http-pool', row.warmup === true ? 'exclusive' : 'shared');
  return claims;
}

const sshFirst = (row: MatrixRow): number => ('ssh' in row.condition ? 0 : 1);

/** A readers-writer lock that lets a waiting writer in before later readers (no starvation). */
class RwLock {
  private readers = 0;
  private writer = false;
  private readonly queue: { mode: Mode; go: () => void }[] = [];

  acquire(mode: Mode): Promise<void> {
    return new Promise((go) => {
      this.queue.push({ mode, go });
      this.drain();
    });
  }

  release(mode: Mode): void {
    if (mode === 'exclusive') this.writer = false;
    else this.readers--;
    this.drain();
  }

  private drain(): void {
    while (this.queue.length > 0) {
      const next = this.queue[0]!;
      if (this.writer) return;
      if (next.mode === 'exclusive' && this.readers > 0) return;
      this.queue.shift();
      if (next.mode === 'exclusive') this.writer = true;
      else this.readers++;
      next.go();
    }
  }
}

/**
 * Runs `run` over `rows` with at most `concurrency` at once, each row holding its claims while it
 * runs. Claims are taken in name order, so two rows never wait on each other in a cycle.
 * `onDone` sees rows in completion order with a running count.
 */
export async function runRows<R>(
  rows: readonly MatrixRow[],
  concurrency: number,
  run: (row: MatrixRow, index: number) => Promise<R>,
  onDone?: (result: R, done: number) => void,
): Promise<R[]> {
  const results = new Array<R>(rows.length);
  const locks = new Map<string, RwLock>();
  const lock = (name: string): RwLock => {
    let l = locks.get(name);
    if (!l) locks.set(name, (l = new RwLock()));
    return l;
  };
  // SSH rows take longest (a connection and a remote shell each, some wait for a remote step), so
  // with more than one row at a time they start first; one at a time keeps the file order. (HTTP
  // and SSH rows in two lanes side by side was tried: the SSH handshakes' CPU in this process made
  // the first HTTP rows miss their deadlines on a busy machine.)
  const order = rows.map((_, i) => i);
  let alone = -1;
  if (concurrency > 1) {
    order.sort((a, b) => sshFirst(rows[a]!) - sshFirst(rows[b]!) || a - b);
    // The first HTTP exchange of a process pays one-time costs (the HTTP client compiles its
    // parser, code warms up): hundreds of milliseconds on a busy machine, long enough to eat the
    // deadlines of rows running beside it. One HTTP row that reaches the service runs alone first.
    alone = rows.findIndex((r) => !('ssh' in r.condition) && !('before_bytes' in r.condition));
    if (alone >= 0) order.splice(order.indexOf(alone), 1);
  }
  let done = 0;
  const runOne = async (index: number): Promise<void> => {
    const row = rows[index]!;
    const claims = [...rowClaims(row)].sort(([a], [b]) => a.localeCompare(b));
    for (const [name, mode] of claims) await lock(name).acquire(mode);
    try {
      results[index] = await run(row, index);
    } finally {
      for (const [name, mode] of claims) lock(name).release(mode);
    }
    onDone?.(results[index], done++);
  };
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < order.length) await runOne(order[next++]!);
  };
  if (alone >= 0) await runOne(alone);
  const width = Math.max(1, Math.min(Math.floor(concurrency), order.length));
  await Promise.all(Array.from({ length: width }, worker));
  return results;
}
