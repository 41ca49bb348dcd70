// The root entry point is pure library: importing it loads no database or SSH driver.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

// The public surface of the root entry, exactly. Internal tables (the classifier's STATUS_RULES,
// NOT_SENT_RULES, …) stay reachable for tests through src/, never through 'candor'. Adding a name
// here is a decision about the public API, not a way to make this test pass.
const PUBLIC_API = [
  'ActionClass',
  'Category',
  'ContractCheck',
  'DEFAULT_LEASE_MS',
  'DEFAULT_LEDGER_URL',
  'DispatchState',
  'EngineErrorCode',
  'EventKind',
  'HttpErrorCode',
  'LocalError',
  'McpErrorCode',
  'OperationState',
  'Phase',
  'RemoteEffect',
  'Retry',
  'RetryDecision',
  'RetryReason',
  'SshErrorCode',
  'UsageError',
  'classify',
  'createRedactor',
  'createRuntime',
  'defineAction',
  'defineSshAction',
  'envelopeJsonSchema',
  'envelopeSchema',
  'idempotencyKeyFor',
  'isUsageError',
  'manualClock',
  'openTelemetry',
  'openLedger',
  'projectOperation',
  'reportedCode',
  'staticCredentials',
  'systemClock',
];

describe('root entry', () => {
  it('exports the public API and nothing internal', async () => {
    const mod = (await import('../src/index.js')) as Record<string, unknown>;
    const names = Object.keys(mod).sort();
    for (const internal of [
      'STATUS_RULES',
      'NOT_SENT_RULES',
      'CONFIRMED_FAILURE_RETRY',
      'ACTION_CLASS_RULES',
      'canonicalJson',
      'createEngine',
    ]) {
      expect(names, `${internal} leaked into the root entry`).not.toContain(internal);
    }
    expect(names).toEqual([...PUBLIC_API].sort());
  });

  it('loads no better-sqlite3, pg or ssh2', () => {
    const script = `
      const { createRequire } = await import('node:module');
      const mod = await import('./dist/index.js');
      const require = createRequire(import.meta.url);
      const loaded = Object.keys(require.cache).filter((k) => /node_modules[\\\\/](better-sqlite3|pg|ssh2)[\\\\/]/.test(k));
      console.log(JSON.stringify({ exports: Object.keys(mod).length, loaded }));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root,
      encoding: 'utf8',
    });
    const parsed = JSON.parse(out) as { exports: number; loaded: string[] };
    expect(parsed.exports).toBeGreaterThan(10);
    expect(parsed.loaded).toEqual([]);
  });

  it('does load them behind the subpaths', () => {
    const script = `
      const { createRequire } = await import('node:module');
      await import('./dist/ledger/sqlite/store.js');
      const require = createRequire(import.meta.url);
      console.log(Object.keys(require.cache).some((k) => k.includes('better-sqlite3')));
    `;
    expect(
      execFileSync(process.execPath, ['--input-type=module', '-e', script], {
        cwd: root,
        encoding: 'utf8',
      }).trim(),
    ).toBe('true');
  });
});
