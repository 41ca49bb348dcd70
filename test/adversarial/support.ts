// Shared setup for the adversarial suites: the real runtime, the reference actions and the fake
// service on real sockets, with an approval gate whose lock the test flips.
import {
  createApprovalGate,
  createLockGate,
  scriptedApprover,
  type ScriptedAnswer,
} from '../../src/approvals/index.js';
import type { Envelope } from '../../src/core/envelope.js';
import type { ActionDefinition } from '../../src/engine/action.js';
import { staticCredentials, type CredentialProvider, type Gate } from '../../src/engine/ports.js';
import { createRuntime } from '../../src/runtime.js';
import { lookupRefusingInvalid, type FakeService } from '../../src/fakes/index.js';
import { openMemoryLedger } from '../../src/ledger/memory/store.js';
import { projectOperation } from '../../src/ledger/projection.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { REFERENCE_AUTHORITY, referenceActions } from '../../src/matrix/reference-actions.js';

export const TOKEN = 'adversarial-canary-9f3c';
const WIDE = { total_ms: 5_000, connect_ms: 2_000, first_byte_ms: 5_000, body_idle_ms: 2_000 };

export interface Setup {
  ledger: LedgerStore;
  approver: ReturnType<typeof scriptedApprover>;
  runtime: ReturnType<typeof createRuntime>;
  /** The lock the gate reads; `unreadable` makes reading it throw. */
  lock: { locked: boolean; unreadable: boolean };
  action(name: string): ActionDefinition;
  run(name: string, input: unknown, opts?: { cor?: string; op?: string }): Promise<Envelope>;
  view(operationId: string): Promise<NonNullable<ReturnType<typeof projectOperation>>>;
}

export function setup(
  fake: FakeService,
  answers: ScriptedAnswer[] = [],
  options: {
    credentials?: CredentialProvider;
    ledger?: LedgerStore;
    /** `lock`: the gate without approvals (createLockGate); `approval` (default) asks `answers`. */
    gate?: 'approval' | 'lock' | ((ledger: LedgerStore) => Gate);
  } = {},
): Setup {
  const ledger = options.ledger ?? openMemoryLedger();
  const approver = scriptedApprover(answers);
  const lock = { locked: false, unreadable: false };
  const isLocked = () =>
    lock.unreadable
      ? Promise.reject(new Error('EACCES: the lock state cannot be read'))
      : Promise.resolve(lock.locked);
  const gate =
    typeof options.gate === 'function'
      ? options.gate(ledger)
      : options.gate === 'lock'
        ? createLockGate({ ledger, lock: { name: 'test_lock', isLocked } })
        : createApprovalGate({ ledger, approver, lock: isLocked });
  // Deadlines wide enough for a loaded machine: these suites inject their faults explicitly.
  const actions = new Map(
    referenceActions(fake.url).map((a) => [a.name, { ...a, timeouts: WIDE }]),
  );
  const runtime = createRuntime({
    ledger,
    credentials:
      options.credentials ??
      staticCredentials({ [REFERENCE_AUTHORITY]: { authorization: `Bearer ${TOKEN}` } }),
    gate,
    actions: [...actions.values()],
    sleep: () => Promise.resolve(),
    lookup: lookupRefusingInvalid,
  });
  return {
    ledger,
    approver,
    runtime,
    lock,
    action: (name) => actions.get(name)!,
    run: (name, input, opts = {}) =>
      runtime.run(actions.get(name)!, input, {
        ...(opts.cor ? { correlationId: opts.cor } : {}),
        ...(opts.op ? { operationId: opts.op } : {}),
      }),
    view: async (id) => projectOperation(await ledger.query({ operation_id: id }))!,
  };
}

/** Requests the fake received for a call id (a lookup carries `<cor>.lookup`). */
export function received(fake: FakeService, callId: string, method?: string): number {
  return fake
    .groundTruth(callId)
    .filter((t) => t.event === 'received' && (method === undefined || t.method === method)).length;
}
