// The fleet sweep's triggers: a release by another gateway wakes a pass (its timer far away); a
// release during a pass runs one more pass after it; its own release wakes nothing; stop() ends
// the watch.
import { describe, expect, it } from 'vitest';
import type { RecoveryItem } from '../engine/recover.js';
import { startFleetSweep } from './fleet.js';

describe('fleet sweep', () => {
  it('wakes on another gateway’s release, once more after a busy pass, never on its own', async () => {
    let announce: ((owner: string) => void) | null = null;
    let unwatched = false;
    const gates: Array<() => void> = [];
    let calls = 0;
    const runtime = {
      owner: 'gw-b',
      recover: (): Promise<RecoveryItem[]> => {
        calls++;
        return new Promise((r) => gates.push(() => r([])));
      },
    };
    const lines: string[] = [];
    const sweep = startFleetSweep(runtime, {
      onStart: false,
      everyMs: 3_600_000,
      log: (l) => lines.push(l),
      watchReleases: (on) => {
        announce = on;
        return Promise.resolve(() => {
          unwatched = true;
          return Promise.resolve();
        });
      },
    });
    await Promise.resolve();
    expect(announce).not.toBeNull();
    announce!('gw-b'); // its own release
    expect(calls).toBe(0);
    announce!('gw-a');
    expect(calls).toBe(1);
    // Released again while the pass runs: the pass may have read the lease before it ended.
    announce!('gw-c');
    announce!('gw-d');
    expect(calls).toBe(1);
    gates.shift()!();
    await new Promise((r) => setTimeout(r, 0));
    expect(calls).toBe(2);
    gates.shift()!();
    await new Promise((r) => setTimeout(r, 0));
    expect(calls).toBe(2);
    expect(sweep.passes).toEqual({ start: 0, timer: 0, release: 2 });
    await sweep.stop();
    expect(unwatched).toBe(true);
    expect(lines).toEqual([]);
  });
});
