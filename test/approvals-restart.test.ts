// No approval survives its process: a session approval given in one agent process is unknown to a
// fresh node process, even one that presents the same session id and shares the SQLite ledger. The
// children run the compiled package (dist/, built by the vitest global setup).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../src/approvals/index.js';
import type { Envelope } from '../src/core/envelope.js';
import { startFakeService, type FakeService } from '../src/fakes/index.js';
import { openLedger } from '../src/ledger/open.js';
import { projectOperations } from '../src/ledger/projection.js';

const script = fileURLToPath(new URL('./fixtures/approvals/agent.mjs', import.meta.url));
const built = fileURLToPath(new URL('../dist/approvals/index.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'candor-approvals-restart-'));
const ledgerUrl = `sqlite:${join(dir, 'ledger.db')}`;

interface ChildResult {
  pid: number;
  instance_id: string;
  session_id: string;
  envelopes: Envelope[];
  cards: ApprovalCard[];
  prompts: number;
}

let fake: FakeService;
beforeAll(async () => {
  fake = await startFakeService({ seed: 5 });
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

function agentProcess(args: Record<string, unknown>): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [script, JSON.stringify({ ledger: ledgerUrl, origin: fake.url, ...args })],
      { timeout: 90_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`agent process failed: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').at(-1)!) as ChildResult);
      },
    );
  });
}

const createIssue = (correlation: string) => ({
  action: 'create_issue',
  input: { title: correlation },
  correlation_id: correlation,
});

describe('approvals are bound to one process instance', () => {
  it('a session approval from the first process does not exist in a fresh one', async () => {
    expect(existsSync(built), 'dist/ is missing: the vitest global setup builds it').toBe(true);

    // Process 1: approved once for the session, the second create needs no prompt.
    const first = await agentProcess({
      answers: ['approved'],
      calls: [createIssue('appr-restart-1a'), createIssue('appr-restart-1b')],
    });
    expect(first.envelopes.map((e) => e.category)).toEqual(['succeeded', 'succeeded']);
    expect(first.prompts).toBe(1);
    expect(first.cards).toHaveLength(1);

    // Process 2: same session id, same ledger, approver with no answer (nobody says yes).
    const second = await agentProcess({
      session_id: first.session_id,
      answers: [],
      calls: [createIssue('appr-restart-2a')],
    });
    expect(second.pid).not.toBe(first.pid);
    expect(second.instance_id).not.toBe(first.instance_id);
    expect(second.prompts).toBe(1); // it had to ask: nothing was inherited
    expect(second.cards[0]).toMatchObject({
      session_id: first.session_id,
      action: 'create_issue',
      scope: 'session',
    });
    expect(second.envelopes[0]).toMatchObject({
      category: 'approval_denied',
      remote_effect: 'none',
    });
    expect(fake.groundTruth('appr-restart-2a')).toEqual([]);

    // Process 3: asked again; this time a person says yes.
    const third = await agentProcess({
      session_id: first.session_id,
      answers: ['approved'],
      calls: [createIssue('appr-restart-3a')],
    });
    expect(third.prompts).toBe(1);
    expect(third.envelopes[0]!.category).toBe('succeeded');

    // The shared ledger: three prompts in one session id, each held by a different instance.
    const opened = await openLedger(ledgerUrl);
    if (!opened.ok) throw new Error(opened.failure.message);
    const events = await opened.value.read();
    await opened.value.close();
    const asked = events.filter((e) => e.kind === 'approval_requested');
    expect(
      asked.map((e) => [
        e.session_id,
        e.kind === 'approval_requested' && e.data.card['instance_id'],
      ]),
    ).toEqual([
      [first.session_id, first.instance_id],
      [first.session_id, second.instance_id],
      [first.session_id, third.instance_id],
    ]);
    const decided = events.flatMap((e) => (e.kind === 'approval_decided' ? [e.data.decision] : []));
    expect(decided).toEqual(['approved', 'denied', 'approved']);
    const ops = projectOperations(events);
    expect(ops.map((o) => [o.correlation_id, o.prompts, o.state])).toEqual([
      ['appr-restart-1a', 1, 'succeeded'],
      ['appr-restart-1b', 0, 'succeeded'],
      ['appr-restart-2a', 1, 'cancelled'],
      ['appr-restart-3a', 1, 'succeeded'],
    ]);
  });
});
