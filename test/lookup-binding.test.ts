// Lookups users write (issue 30): a record found by a client-chosen id is this operation's effect
// only when it is bound to the operation, and the matrix's oracle judges claims both ways. The
// reference matrix's lookup rows run through the real runtime against the fake service (real
// sockets); the teeth test plants a lookup that always finds a matching record (and carries the
// row's correlation value, so the engine has to believe it) and proves the matrix calls the
// resulting "succeeded" unsafe and fails.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ReconciliationDeclaration } from '../src/engine/action.js';
import { startFakeService } from '../src/fakes/index.js';
import { openMemoryLedger } from '../src/ledger/memory/store.js';
import { runMatrixWithFake } from '../src/matrix/harness.js';
import { loadMatrix } from '../src/matrix/load.js';
import { referenceActions } from '../src/matrix/reference-actions.js';
import { summaryLine } from '../src/matrix/report.js';
import { runMatrix } from '../src/matrix/runner.js';
import { matrixSchema } from '../src/matrix/spec.js';

const file = fileURLToPath(new URL('../examples/matrix/reference.yaml', import.meta.url));

describe('reference matrix: lookups by a client-chosen id', () => {
  it('an older record with the same id is never taken as this operation’s effect', async () => {
    const loaded = await loadMatrix(file);
    if (!loaded.ok) throw new Error(loaded.failure.message);
    const ledger = openMemoryLedger();
    const result = await runMatrixWithFake(loaded.value, {
      ledgerUrl: 'memory:',
      ledger,
      ci: false,
      filter: (r) => r.id.startsWith('lookup-older-record-'),
    });
    if (!result.ok) throw new Error(result.failure.message);
    const report = result.value;
    expect(report.rows.map((r) => r.id).sort()).toEqual([
      'lookup-older-record-body-never-committed',
      'lookup-older-record-never-committed',
      'lookup-older-record-reply-lost',
    ]);
    const failed = report.rows
      .filter((r) => !r.passed)
      .map((r) => `${r.id}: ${JSON.stringify(r.assertions)} ${r.oracle.detail} ${r.error ?? ''}`);
    expect(failed).toEqual([]);
    expect(report.summary.unsafe).toBe(0);

    // Never committed: the older record is someone else's — unknown, with the refusal code, and
    // the lookup is in the ledger as an ambiguous observation.
    const never = report.rows.find((r) => r.id === 'lookup-older-record-never-committed')!;
    expect(never.final).toMatchObject({
      ok: false,
      category: 'outcome_unknown',
      remote_effect: 'unknown',
      retry: 'escalate',
      data: { escalation: { code: 'lookup_ambiguous' } },
    });
    expect((never.final!.data as { unbound_refs: string[] }).unbound_refs).toHaveLength(1);
    const obs = (await ledger.query({ correlation_id: never.correlation_id })).filter(
      (e) => e.kind === 'observation_recorded',
    );
    expect(obs.map((e) => e.data)).toEqual([
      expect.objectContaining({
        source: 'lookup',
        verdict: 'ambiguous',
        matches: 0,
        remote_refs: [],
        unbound: 1,
        status: 200,
        request: 'GET /v1/issues?client_ref={{input.ref}}',
        state_after: 'unknown',
      }),
    ]);

    // Reply lost: the record this operation made (it carries the row's correlation id) is the
    // effect; the older one is not a second effect.
    const lost = report.rows.find((r) => r.id === 'lookup-older-record-reply-lost')!;
    expect(lost.final).toMatchObject({ category: 'succeeded', remote_effect: 'applied' });
    expect(lost.final!.data).toMatchObject({ correlation_id: lost.correlation_id });
  }, 180_000);
});

describe('the oracle is symmetric', () => {
  it('a lying lookup turns a create that never committed into succeeded: 1 unsafe claim, the row fails', async () => {
    const fake = await startFakeService();
    try {
      // Always one matching record, carrying the correlation value the engine passed in the
      // lookup: indistinguishable, for the engine, from the operation's own record.
      const liar: ReconciliationDeclaration = {
        lookup: (ctx) => ({
          method: 'GET',
          path: `/v1/issues?lie=${encodeURIComponent(ctx.correlation_id)}`,
        }),
        matches: () => [{ ref: 'iss_9999', record: { id: 'iss_9999', client_ref: corSeen } }],
      };
      let corSeen = '';
      const actions = referenceActions(fake.url).map((a) =>
        a.name === 'create_issue'
          ? {
              ...a,
              destination: {
                ...a.destination,
                reconciliation: {
                  ...liar,
                  lookup: (ctx: Parameters<ReconciliationDeclaration['lookup']>[0]) => {
                    corSeen = ctx.correlation_id;
                    return liar.lookup(ctx, null);
                  },
                },
              },
            }
          : a,
      );
      const matrix = matrixSchema.parse({
        matrix: 'teeth',
        rows: [
          {
            id: 'lying-lookup',
            operation: 'create_issue',
            input: { title: 'never committed' },
            condition: { phase: 'after_request_headers', action: 'rst' },
            remote_effect_known: false,
            expect: {
              // What a correct engine with a correct lookup says: the row expects honesty.
              category: 'outcome_unknown',
              retry: 'reconcile_first',
              remote_effect: 'unknown',
              next_action: 'reconcile',
              final: { category: 'outcome_unknown', retry: 'escalate' },
              remote: { kind: 'issues', count: 0 },
              unknown_reason: 'nothing committed',
            },
          },
        ],
      });
      const report = await runMatrix(matrix, {
        ledger: openMemoryLedger(),
        fake,
        canary: 'cnry_teeth_0123456789',
        actions,
      });
      const row = report.rows[0]!;
      expect(row.final).toMatchObject({ category: 'succeeded', remote_effect: 'applied' });
      expect(row.oracle.verdict).toBe('unsafe');
      expect(row.oracle.detail).toContain('no mutation of this row was committed');
      expect(row.passed).toBe(false);
      expect(report.summary.unsafe).toBe(1);
      expect(summaryLine(report)).toContain('1 unsafe claims');
    } finally {
      await fake.close();
    }
  }, 180_000);
});
