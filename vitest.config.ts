import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Test files run in separate processes (pool: 'forks'). Many of them spend much of their time
// waiting on sockets, child processes, sshd, PostgreSQL and Chromium rather than computing (the
// reference matrix file uses about a quarter of one core), so twice as many files run at once as
// there are cores (four on the 2-core CI machine), filling those waits without changing what any
// test does. Capped so that a large machine does not start dozens of servers.
// `npx vitest run --maxWorkers=N` overrides it for one run.
const workers = Math.min(8, Math.max(2, 2 * availableParallelism()));

// Unit test files that mock modules (see the `unit-isolated` project below); test/
// unit-isolation.test.ts checks that every such file is listed.
export const MOCKING_UNIT_FILES = ['src/ledger/chain/bundle-file.test.ts'];

export default defineConfig({
  test: {
    // A guard for hangs, not a speed target (speed lives in bench/). Several files are CPU-heavy
    // (seeded properties, campaigns) or spawn the CLI; with four files at once on two cores a test
    // that takes 10 s alone was seen taking 47 s in CI, so the guard sits far above that.
    testTimeout: 120_000,
    // Setup hooks start servers (initdb, sshd, Chromium) and transpile trees: a guard for hangs,
    // generous because with more files at once than cores a loaded machine slows setup most.
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: workers,
    globalSetup: ['test/global-setup.ts'],
    projects: [
      // The unit tests beside the sources share one module graph per worker (isolate: false): they
      // hold no process-wide state, and loading the engine, zod and the ledger once per worker instead
      // of once per file cut their CPU time by about 40 % (measured: 120 s → 72 s user).
      // A file that mocks a module (vi.mock) must load its own copy of what imports it: in a shared
      // graph an earlier file may have loaded the real one first (seen in CI: the hashing-thread
      // tests of bundle-file verified a file their mock should have failed), so such files run
      // isolated.
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts'],
          exclude: MOCKING_UNIT_FILES,
          isolate: false,
        },
      },
      { extends: true, test: { name: 'unit-isolated', include: MOCKING_UNIT_FILES } },
      // The integration tests start servers, child processes, telemetry providers and browsers: each
      // file keeps its own process.
      { extends: true, test: { name: 'integration', include: ['test/**/*.test.ts'] } },
    ],
  },
});
