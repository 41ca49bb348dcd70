// A fleet member's recovery pass: at start, every `everyMs`, and whenever another gateway ends its
// lease (a clean shutdown, announced by the store: PostgreSQL LISTEN/NOTIFY), the gateway settles
// the unresolved operations of gateways whose ownership lease has lapsed (recover with `sweep`: it
// takes each over with `owner_changed`, then looks it up, retries it under an honoured key or
// marks it for a person). Its own operations and those of live owners are left alone. One pass
// at a time; a wake-up during a pass runs one more pass after it (the running pass may have read
// the released owner's lease before it ended); a failing pass is logged and the next one tries
// again.
import type { Runtime } from '../runtime.js';

/** What started a pass. */
export type SweepCause = 'start' | 'timer' | 'release';

export interface FleetSweep {
  /** Stops the timer and the watch, and waits for a pass in progress. */
  stop(): Promise<void>;
  /** Runs one pass now (or joins the one in progress). */
  pass(cause?: SweepCause): Promise<void>;
  /** Passes started so far, by cause. */
  readonly passes: Readonly<Record<SweepCause, number>>;
}

export interface FleetSweepOptions {
  onStart: boolean;
  everyMs: number;
  log: (line: string) => void;
  /** The store's release announcements (`OwnerLeases.watchReleases`), when it has them. */
  watchReleases?: (onRelease: (owner: string) => void) => Promise<() => Promise<void>>;
}

export function startFleetSweep(
  runtime: Pick<Runtime, 'recover' | 'owner'>,
  options: FleetSweepOptions,
): FleetSweep {
  let running: Promise<void> | null = null;
  let again: { cause: SweepCause; why: string } | null = null;
  let stopped = false;
  const passes: Record<SweepCause, number> = { start: 0, timer: 0, release: 0 };
  const one = async (cause: SweepCause, why: string): Promise<void> => {
    passes[cause]++;
    try {
      const items = await runtime.recover({ sweep: true });
      const person = items.filter((i) => i.outcome === 'needs_person').length;
      if (items.length > 0)
        options.log(
          `candor serve: ${why}took over ${items.length} operation(s) of lapsed gateways; ${items.length - person} settled, ${person} need a person (candor ops list --state unknown,open)`,
        );
    } catch (error) {
      options.log(
        `candor serve: fleet sweep failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  };
  const pass = (cause: SweepCause = 'timer', why = ''): Promise<void> => {
    if (stopped) return Promise.resolve();
    if (running) {
      if (cause === 'release') again = { cause, why };
      return running;
    }
    running = (async () => {
      try {
        await one(cause, why);
        while (again && !stopped) {
          const next: { cause: SweepCause; why: string } = again;
          again = null;
          await one(next.cause, next.why);
        }
      } finally {
        running = null;
      }
    })();
    return running;
  };
  const timer = options.everyMs > 0 ? setInterval(() => void pass('timer'), options.everyMs) : null;
  timer?.unref();
  let unwatch: Promise<(() => Promise<void>) | null> = Promise.resolve(null);
  if (options.watchReleases) {
    unwatch = options
      .watchReleases((owner) => {
        if (owner !== runtime.owner) void pass('release', `${owner} released its lease: `);
      })
      .catch((error: unknown) => {
        options.log(
          `candor serve: cannot watch for released leases (sweeping every ${options.everyMs} ms only): ${error instanceof Error ? error.message : String(error)}`,
        );
        return null;
      });
  }
  // The watch is in place before the first pass, so a release during it is not missed.
  if (options.onStart) void unwatch.then(() => pass('start'));
  return {
    pass,
    passes,
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await (
        await unwatch
      )?.();
      await running;
    },
  };
}
