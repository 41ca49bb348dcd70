// A fleet member's recovery pass: at start and then every `everyMs`, the gateway settles the
// unresolved operations of gateways whose ownership lease has lapsed (recover with `sweep`: it
// takes each over with `owner_changed`, then looks it up, retries it under an honoured key or
// marks it for a person). Its own operations and those of live owners are left alone. One pass
// at a time; a failing pass is logged and the next one tries again.
import type { Runtime } from '../runtime.js';

export interface FleetSweep {
  /** Stops the timer and waits for a pass in progress. */
  stop(): Promise<void>;
  /** Runs one pass now (or joins the one in progress). */
  pass(): Promise<void>;
}

export function startFleetSweep(
  runtime: Pick<Runtime, 'recover'>,
  options: { onStart: boolean; everyMs: number; log: (line: string) => void },
): FleetSweep {
  let running: Promise<void> | null = null;
  let stopped = false;
  const pass = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    running ??= (async () => {
      try {
        const items = await runtime.recover({ sweep: true });
        const person = items.filter((i) => i.outcome === 'needs_person').length;
        if (items.length > 0)
          options.log(
            `candor serve: took over ${items.length} operation(s) of lapsed gateways; ${items.length - person} settled, ${person} need a person (candor ops list --state unknown,open)`,
          );
      } catch (error) {
        options.log(
          `candor serve: fleet sweep failed: ${error instanceof Error ? error.message : String(error)}`,
        );
      } finally {
        running = null;
      }
    })();
    return running;
  };
  const timer = options.everyMs > 0 ? setInterval(() => void pass(), options.everyMs) : null;
  timer?.unref();
  if (options.onStart) void pass();
  return {
    pass,
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await running;
    },
  };
}
