// Rows of the reference matrix where one operation meets several events in a row (DESIGN.md §2
// "Knowledge is monotone"): a lost reply followed by a refusal of the keyed retry, a 201 whose body
// is cut followed by an expired token, a settled operation called again after a restart of the
// gateway. Run through the real runtime against the fake service on real sockets; the ground truth
// is the fake's own record.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { projectOperation } from '../src/ledger/projection.js';
import type { LedgerStore } from '../src/ledger/store.js';
import { runMatrixWithFake } from '../src/matrix/harness.js';
import { parseMatrix } from '../src/matrix/load.js';
import type { MatrixReport } from '../src/matrix/runner.js';

const file = fileURLToPath(new URL('../examples/matrix/reference.yaml', import.meta.url));
const SEQUENCE_ROWS = [
  'create-release-reply-lost-then-429-restart',
  'create-release-reply-lost-then-422',
  'create-release-reply-lost-then-401',
  'create-payment-reply-lost-then-403',
  'create-release-body-cut-then-401',
  'create-deployment-succeeded-restart-called-again',
];

async function run(
  text: string,
  ids: readonly string[],
): Promise<{ report: MatrixReport; ledger: LedgerStore }> {
  const loaded = parseMatrix(text, file);
  if (!loaded.ok) throw new Error(loaded.failure.message);
  const ledger = openMemoryLedger();
  const result = await runMatrixWithFake(loaded.value, {
    ledgerUrl: 'memory:',
    ledger,
    filter: (r) => ids.includes(r.id),
  });
  if (!result.ok) throw new Error(result.failure.message);
  return { report: result.value, ledger };
}

const row = (report: MatrixReport, id: string) => {
  const r = report.rows.find((x) => x.id === id);
  if (!r) throw new Error(`row ${id} did not run`);
  return r;
};

describe('reference matrix: one operation, several events', () => {
  it('every sequence row holds: the claim follows the operation, never the last attempt', async () => {
    const text = await readFile(file, 'utf8');
    const { report, ledger } = await run(text, SEQUENCE_ROWS);
    try {
      expect(report.rows.map((r) => r.id)).toEqual(SEQUENCE_ROWS);
      for (const r of report.rows) {
        expect({ id: r.id, passed: r.passed, error: r.error }).toEqual({
          id: r.id,
          passed: true,
          error: null,
        });
        expect(r.oracle.verdict).not.toBe('unsafe');
      }

      // Lost reply, then 429: the fake committed once, refused the keyed retry, and replayed the
      // stored release to the retry after the delay; after the restart nothing more arrived.
      const rl = row(report, 'create-release-reply-lost-then-429-restart');
      const fake = rl.timeline.filter((t) => t.source === 'fake');
      expect(fake.filter((t) => t.event === 'received')).toHaveLength(3);
      expect(fake.filter((t) => t.event === 'mutation_committed')).toHaveLength(1);
      expect(fake.filter((t) => t.event === 'response_bytes_written').map((t) => t.detail)).toEqual(
        [expect.stringContaining('429'), expect.stringMatching(/201 .*replayed/)],
      );
      expect(rl.envelope?.message).toMatch(/earlier attempt may have applied/i);
      // The restarted gateway (same owner) appended no attempt: it answered from the ledger.
      const events = await ledger.query({ correlation_id: rl.correlation_id });
      expect(events.filter((e) => e.kind === 'attempt_started')).toHaveLength(3);
      expect(rl.assertions.agent_next_action.actual).toMatchObject({
        again: { category: 'succeeded', sent: false },
      });
      const view = projectOperation(await ledger.query({ operation_id: rl.operation_id! }));
      expect(view?.owner_changes).toEqual([]);
      expect(view?.state).toBe('succeeded');
      expect(await ledger.unresolved()).not.toContain(rl.operation_id);

      // A refused keyed retry (422/401/403) never resolves the operation failed.
      for (const id of [
        'create-release-reply-lost-then-422',
        'create-release-reply-lost-then-401',
        'create-payment-reply-lost-then-403',
      ]) {
        const r = row(report, id);
        const evs = await ledger.query({ correlation_id: r.correlation_id });
        const resolved = evs.flatMap((e) =>
          e.kind === 'operation_resolved' ? [e.data.state] : [],
        );
        expect({ id, resolved }).toEqual({ id, resolved: ['succeeded'] });
        expect(evs.some((e) => e.kind === 'observation_recorded')).toBe(true);
      }

      // A cut 201 then a 401 on the keyed retry: the release exists, the operation is settled as
      // done on the ledger (not left open), and calling it again sends nothing.
      const cut = row(report, 'create-release-body-cut-then-401');
      const cutEvents = await ledger.query({ correlation_id: cut.correlation_id });
      expect(
        cutEvents.flatMap((e) => (e.kind === 'attempt_finished' ? [e.data.category] : [])),
      ).toEqual(['outcome_unknown', 'authentication_failed']);
      expect(
        cutEvents.flatMap((e) => (e.kind === 'operation_resolved' ? [e.data.state] : [])),
      ).toEqual(['succeeded']);
    } finally {
      await ledger.close();
    }
  });

  it('has teeth: a row expecting the call again to send, or the refusal to speak for the operation, fails', async () => {
    const text = (await readFile(file, 'utf8'))
      .replace(
        'again: { category: succeeded, retry: never, remote_effect: applied, sent: false }\n      remote: { kind: deployments, count: 1 }',
        'again: { category: succeeded, retry: never, remote_effect: applied, sent: true }\n      remote: { kind: deployments, count: 1 }',
      )
      .replace(
        /(id: create-release-reply-lost-then-422\n[\s\S]*?expect:\n\s+category: )outcome_unknown\n(\s+)retry: reconcile_first\n(\s+)remote_effect: unknown/,
        '$1confirmed_rejection\n$2retry: never\n$3remote_effect: none',
      );
    expect(text).toContain('sent: true');
    expect(text).toContain('category: confirmed_rejection');
    const ids = [
      'create-deployment-succeeded-restart-called-again',
      'create-release-reply-lost-then-422',
    ];
    const { report, ledger } = await run(text, ids);
    try {
      const again = row(report, ids[0]!);
      expect(again.passed).toBe(false);
      expect(again.assertions.agent_next_action.actual).toMatchObject({ again: { sent: false } });
      const refused = row(report, ids[1]!);
      expect(refused.passed).toBe(false);
      expect(refused.assertions.category_and_retry.actual).toEqual({
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
      });
    } finally {
      await ledger.close();
    }
  });

  it('refuses rows whose sequence cannot run, naming the field', () => {
    const base = `matrix: t\nrows:\n  - id: r1\n    operation: create_release\n    input: { version: '1' }\n`;
    const noExpect = parseMatrix(
      `${base}    condition: { none: true }\n    again: { restart: true }\n    remote_effect_known: true\n    expect: { category: succeeded, retry: never, remote_effect: applied, next_action: continue, remote: { kind: releases, count: 1 } }\n`,
      'm.yaml',
    );
    expect(noExpect.ok).toBe(false);
    expect(noExpect.failure?.message).toMatch(/^m\.yaml:.*expect\.again|again.*expect\.again/);
    const thenWithoutFault = parseMatrix(
      `${base}    condition: { before_bytes: refused }\n    then: [{ phase: status, status: 429 }]\n    remote_effect_known: true\n    expect: { category: local_failure, retry: allowed, remote_effect: none, next_action: retry_same_operation, remote: { kind: releases, count: 0 } }\n`,
      'm.yaml',
    );
    expect(thenWithoutFault.ok).toBe(false);
    expect(thenWithoutFault.failure?.message).toMatch(/then/);
  });
});
