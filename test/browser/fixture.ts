// A demo-like ledger for the web view's tests: a handful of reference-matrix rows run through the
// real engine against the fake service (with a canary bearer token we know), plus planted events
// the matrix does not produce — sealed and secret-bearing diagnostics, an agent session that
// repeats an intent after outcome_unknown, and a signed checkpoint.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { lookupRefusingInvalid, startFakeService } from '../../src/fakes/index.js';
import { createCheckpointer } from '../../src/ledger/chain/checkpointer.js';
import { generateKey, parseSignerKey } from '../../src/ledger/chain/note.js';
import type { NewEvent } from '../../src/ledger/events.js';
import { generateSealKeyPair, sealPayload } from '../../src/ledger/seal.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { loadMatrix } from '../../src/matrix/load.js';
import { runMatrix, type MatrixReport } from '../../src/matrix/runner.js';

export const ROWS = [
  'reconcile-finds-two',
  'create-issue-after-headers-rst',
  'create-issue-after-commit-delay',
  'create-release-after-body-fin',
  'seed-read-issue-dns',
  'seed-create-issue-expired-token',
  'http-503-payment-not-applied',
  'create-deployment-body-cut-fin',
];

export interface Fixture {
  canary: string;
  report: MatrixReport;
  /** The planted operations. */
  planted: { sealed: string; leaky: string; repeatA: string; repeatB: string; session: string };
}

const digest = `sha256:${'ab'.repeat(32)}`;

export async function buildDemoLedger(store: LedgerStore): Promise<Fixture> {
  const canary = `cnry_ui_${randomBytes(12).toString('hex')}`;
  const loaded = await loadMatrix(
    fileURLToPath(new URL('../../examples/matrix/reference.yaml', import.meta.url)),
  );
  if (!loaded.ok) throw new Error(`reference matrix: ${JSON.stringify(loaded.failure)}`);
  const fake = await startFakeService({
    seed: loaded.value.seed,
    tokens: [{ name: 'reference', token: canary }],
    clock: () => performance.timeOrigin + performance.now(),
  });
  let report: MatrixReport;
  try {
    report = await runMatrix(loaded.value, {
      ledger: store,
      fake,
      canary,
      lookup: lookupRefusingInvalid,
      filter: (row) => ROWS.includes(row.id),
    });
  } finally {
    await fake.close();
  }

  const session = `ses_uitest${randomBytes(4).toString('hex')}`;
  const now = Date.now();
  const seal = generateSealKeyPair();
  const op = (id: string, at: number, action = 'create_issue'): NewEvent => ({
    kind: 'operation_opened',
    at,
    session_id: session,
    operation_id: id,
    correlation_id: `corr-${id}`,
    data: {
      owner: 'test',
      action,
      action_class: 'create',
      // The repeated pair shares one intent; the others differ (the checker compares intents).
      intent: {
        kind: action,
        subject_ref: 'project:ui',
        params_digest: action === 'create_ticket' ? digest : `sha256:${id}`,
      },
      destination: {
        method: 'POST',
        route_template: '/v1/issues',
        authority_ref: 'vault:reference-api',
      },
      idempotency_key: null,
      supersedes_operation_id: null,
      attempt_budget: 3,
      params: { title: 'x', password: canary },
    },
  });
  const attempt = (
    id: string,
    at: number,
    diagnostics: Record<string, unknown> | null,
  ): NewEvent[] => [
    {
      kind: 'attempt_started',
      at,
      session_id: session,
      operation_id: id,
      correlation_id: `corr-${id}`,
      data: {
        attempt_id: `att_${id}`,
        number: 1,
        worker: 'test',
        retry_of_attempt_id: null,
        retry_reason: null,
        retry_decision: null,
        attempt_budget_remaining: 2,
        request_fingerprint: digest,
        prior_request_fingerprint: null,
        credential_ref: 'vault:reference-api',
        destination: { method: 'POST', route_template: '/v1/issues' },
      },
    },
    {
      kind: 'attempt_finished',
      at: at + 40,
      session_id: session,
      operation_id: id,
      correlation_id: `corr-${id}`,
      data: {
        attempt_id: `att_${id}`,
        dispatch_state: 'sent_no_response',
        category: 'outcome_unknown',
        retry: 'reconcile_first',
        remote_effect: 'unknown',
        rule: 'sent_no_response',
        phases: {
          started_at: at,
          connected_at: at + 3,
          request_sent_at: at + 6,
          finished_at: at + 40,
        },
        response: null,
        duration_ms: 40,
        diagnostics_ref: `diag_${id}`,
        diagnostics,
      },
    },
  ];
  const planted = {
    sealed: 'op_uitest_sealed',
    leaky: 'op_uitest_leaky',
    repeatA: 'op_uitest_repeat_a',
    repeatB: 'op_uitest_repeat_b',
    session,
  };
  await store.append([
    {
      kind: 'session_started',
      at: now,
      session_id: session,
      operation_id: null,
      correlation_id: null,
      data: { owner: 'test', instance_id: 'i1', pid: 1, agent: 'scripted-agent' },
    },
    op(planted.sealed, now + 1),
    ...attempt(
      planted.sealed,
      now + 2,
      sealPayload(seal.publicKey, JSON.stringify({ body: canary }), 0) as unknown as Record<
        string,
        unknown
      >,
    ),
    op(planted.leaky, now + 100),
    ...attempt(planted.leaky, now + 101, {
      status: null,
      headers: { authorization: `Bearer ${canary}` },
      note: `retry with token=${canary}`,
    }),
    // The agent opens the same intent again after outcome_unknown: the checker must flag it.
    op(planted.repeatA, now + 200, 'create_ticket'),
    ...attempt(planted.repeatA, now + 201, null),
    op(planted.repeatB, now + 400, 'create_ticket'),
  ]);
  const key = generateKey('candor.test/log');
  const signer = parseSignerKey(key.signerKey);
  if (!signer.ok) throw new Error(signer.failure);
  await createCheckpointer({
    ledger: store,
    signer: signer.value,
    origin: 'candor.test/log',
  }).checkpoint();
  return { canary, report, planted };
}

/** A fresh operation appended later (the live test). */
export function newOperation(id: string): NewEvent[] {
  return [
    {
      kind: 'operation_opened',
      at: Date.now(),
      session_id: null,
      operation_id: id,
      correlation_id: `live-${id}`,
      data: {
        owner: 'test',
        action: 'create_issue',
        action_class: 'create',
        intent: { kind: 'create_issue', subject_ref: null, params_digest: digest },
        destination: { method: 'POST', route_template: '/v1/issues' },
        idempotency_key: null,
        supersedes_operation_id: null,
        attempt_budget: 3,
        params: {},
      },
    },
  ];
}
