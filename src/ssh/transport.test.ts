// The pure parts of the transport: which family runs how, and what a marker state means as
// evidence once classify() reads it. The network paths are covered by test/ssh-*.test.ts.
import { describe, expect, it } from 'vitest';
import { classify } from '../core/classify.js';
import { valuesOf, ActionClass } from '../core/vocabulary.js';
import { familyMode, markerEvidence, runSsh, sshContract } from './transport.js';

describe('families', () => {
  it('runs reads raw, set_state converging and everything else under the marker', () => {
    const modes = Object.fromEntries(valuesOf(ActionClass).map((c) => [c, familyMode(c)]));
    expect(modes).toMatchObject({ read: 'raw', set_state: 'converge', execute: 'marker' });
    expect(Object.values(modes).filter((m) => m === 'marker')).toHaveLength(8);
  });

  it('an unknown outcome means reconcile first for writes and a plain retry for reads', () => {
    for (const c of valuesOf(ActionClass)) {
      const r = classify({ phase: 'request_sent', exit_status: null }, sshContract(c));
      expect(r.category).toBe('outcome_unknown');
      expect(r.retry).toBe(c === 'read' ? 'allowed' : 'reconcile_first');
    }
  });
});

describe('markerEvidence', () => {
  const contract = sshContract('execute');
  const verdict = (m: Parameters<typeof markerEvidence>[0]) => {
    const c = classify(markerEvidence(m), contract);
    return [c.category, c.remote_effect];
  };
  it('maps each marker state to what the caller may claim', () => {
    expect(verdict({ state: 'completed', exit_status: 0, completed_at: 't' })).toEqual([
      'succeeded',
      'applied',
    ]);
    expect(verdict({ state: 'completed', exit_status: 255, completed_at: 't' })).toEqual([
      'confirmed_failure',
      'unknown',
    ]);
    for (const process of ['alive', 'gone'] as const) {
      expect(verdict({ state: 'started', started_at: 't', pid: 1, child_pid: 2, process })).toEqual(
        ['outcome_unknown', 'unknown'],
      );
    }
    expect(verdict({ state: 'claimed' })).toEqual(['outcome_unknown', 'unknown']);
    // No marker here now is not proof that nothing ran: only the ledger can prove "never reached".
    expect(verdict({ state: 'absent' })).toEqual(['outcome_unknown', 'unknown']);
  });
});

describe('runSsh argument checks', () => {
  const host = {
    host: '127.0.0.1',
    port: 1,
    user: 'u',
    key_ref: 'vault:k',
    host_key: { policy: 'pinned', fingerprint: `SHA256:${'A'.repeat(43)}` },
  } as const;
  const resolveKey = () => Promise.reject(new Error('must not be called'));
  it('refuses an operation id that is unsafe as a file name, before any connection', async () => {
    const r = await runSsh({
      host,
      resolveKey,
      command: 'true',
      operationId: '../etc',
      family: 'execute',
    });
    expect(r.evidence).toEqual({
      phase: 'not_sent',
      local_error: 'other',
      error_code: 'invalid_operation_id',
    });
  });
  it('refuses set_state without a convergence check', async () => {
    const r = await runSsh({
      host,
      resolveKey,
      command: 'true',
      operationId: 'op_1',
      family: 'set_state',
    });
    expect(r.evidence.error_code).toBe('missing_convergence_check');
  });
  it('an already aborted signal stops before fetching the key', async () => {
    const ac = new AbortController();
    ac.abort();
    const r = await runSsh({
      host,
      resolveKey,
      command: 'true',
      operationId: 'op_1',
      family: 'execute',
      signal: ac.signal,
    });
    expect(r.evidence).toEqual({ phase: 'not_sent', local_error: 'cancelled' });
  });
});
