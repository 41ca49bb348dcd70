import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Test files run in separate processes (pool: 'forks'). Many of them spend much of their time
// waiting on sockets, child processes, sshd, PostgreSQL and Chromium rather than computing (the
// reference matrix file uses about a quarter of one core), so twice as many files run at once as
// there are cores (four on the 2-core CI machine), filling those waits without changing what any
// test does. Capped so that a large machine does not start dozens of servers.
// `npx vitest run --maxWorkers=N` overrides it for one run.
const workers = Math.min(8, Math.max(2, 2 * availableParallelism()));

// Test files that must load their own copy of every module, in a process of their own (the
// `isolated` project below): those that mock a module (vi.mock, vi.doMock) or change what the
// whole process sees (process.env, globals, fake timers, the working directory). test/
// unit-isolation.test.ts checks that every such file is listed, and only such files.
export const ISOLATED_FILES = [
  'src/cli/main.test.ts',
  'src/config/paths.test.ts',
  'src/ledger/chain/bundle-file.test.ts',
];

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
      // Every other file shares one module graph per worker (isolate: false): a worker process runs
      // file after file, loading the engine, zod, undici and the ledger once instead of once per
      // file. For the unit tests beside the sources this cut their CPU time by about 40 % (120 s →
      // 72 s user); for the integration tests, which start servers, child processes, browsers and
      // PostgreSQL but hold no process-wide state, the whole suite went from about 1,160 s of CPU to
      // about 960 s on the 2-core machine, and the suite there is CPU-bound (both cores about 98 %
      // busy), so its wall time follows. What a file starts it stops in its own afterAll, as before.
      // A file that mocks a module must load its own copy of what imports it: in a shared graph an
      // earlier file may have loaded the real one first (seen in CI: the hashing-thread tests of
      // bundle-file verified a file their mock should have failed), so such files run isolated.
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts'],
          exclude: ISOLATED_FILES,
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: ISOLATED_FILES,
          isolate: false,
        },
      },
      { extends: true, test: { name: 'isolated', include: ISOLATED_FILES } },
    ],
  },
});
