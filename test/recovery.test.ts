// Crash recovery: a gateway process is killed between dispatch and the response; the next process
// settles the operation from remote evidence without minting a new operation id and without a
// duplicate effect.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticCredentials } from '../src/engine/ports.js';
import { createRuntime } from '../src/runtime.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openLedger } from '../src/ledger/open.js';
import { projectOperation } from '../src/ledger/projection.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../src/matrix/reference-actions.js';

const TOKEN = 'recovery-canary-token-5b1e';
const child = fileURLToPath(new URL('./fixtures/recovery/child.mjs', import.meta.url));
let fake: FakeService;
let dir: string;

beforeAll(async () => {
  fake = await startFakeService({ tokens: [{ name: 'gateway', token: TOKEN }] });
  dir = mkdtempSync(join(tmpdir(), 'candor-recovery-'));
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

async function killAfterCommit(ledgerPath: string, cor: string, action: string): Promise<void> {
  fake.arm({ call_id: cor, phase: 'after_commit', action: 'delay', delay_ms: 30_000 });
  const proc = spawn(process.execPath, [child, ledgerPath, fake.url, TOKEN, cor, action], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    proc.on('exit', (_code, signal) => resolve(signal)),
  );
  const deadline = Date.now() + 20_000;
  while (!fake.groundTruth(cor).some((t) => t.event === 'mutation_committed')) {
    if (Date.now() > deadline) throw new Error(`the child never reached the commit: ${stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  proc.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
}

describe('recovery after the gateway is killed mid-request', () => {
  it.each(['create_deployment', 'create_release'])(
    '%s: the next process settles the operation, one remote record',
    { timeout: 180_000 },
    async (actionName) => {
      const ledgerPath = join(dir, `${actionName}.db`);
      const cor = `recover-${actionName}`;
      await killAfterCommit(ledgerPath, cor, actionName);

      const opened = await openLedger(`sqlite:${ledgerPath}`);
      if (!opened.ok) throw new Error(opened.failure.message);
      const ledger = opened.value;
      const before = await ledger.unresolved();
      expect(before).toHaveLength(1);
      const opId = before[0]!;
      const crashed = projectOperation(await ledger.query({ operation_id: opId }))!;
      expect(crashed.state).toBe('unknown');
      expect(crashed.attempts).toHaveLength(1);
      expect(crashed.attempts[0]!.finish).toBeNull(); // started, never finished: the bytes may have left

      const runtime = createRuntime({
        ledger,
        credentials: staticCredentials({
          [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` },
        }),
        actions: referenceActions(fake.url),
        owner: 'gateway-2',
      });
      const report = await runtime.recover();
      expect(report).toHaveLength(1);
      expect(report[0]).toMatchObject({
        operation_id: opId,
        outcome: 'found_by_lookup',
        unresolved: false,
        envelope: { ok: true, category: 'succeeded', operation_id: opId },
      });

      const kind = actionName === 'create_release' ? 'releases' : 'deployments';
      expect(fake.resources.list(kind, { client_ref: cor })).toHaveLength(1);
      const posts = fake
        .groundTruth(cor)
        .filter((t) => t.event === 'received' && t.method === 'POST');
      expect(posts).toHaveLength(1);
      const events = await ledger.query({ correlation_id: cor });
      expect(events.filter((e) => e.kind === 'operation_opened')).toHaveLength(1); // no new operation id
      const settled = projectOperation(events)!;
      expect(settled.state).toBe('succeeded');
      expect(settled.observations).toHaveLength(1);
      expect(settled.observations[0]).toMatchObject({ source: 'lookup', matches: 1 });
      expect(await ledger.unresolved()).toEqual([]);
      expect(JSON.stringify(events)).not.toContain(TOKEN);
      await ledger.close();
    },
  );
});
