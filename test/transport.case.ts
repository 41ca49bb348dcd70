// The transport port's contract (src/core/transport.ts), run over every transport — HTTP on real
// sockets, SSH against a real OpenSSH server, an upstream MCP server over stdio, and the scripted
// transport of `candor/testing` — by one `transport-*.test.ts` per transport. Transports differ in
// what they carry, never in these promises: a failed exchange is evidence (dispatch and lookup
// resolve, never throw); the phases are true (taken within the call, in order); aborting the
// caller's signal ends an exchange or a lookup as `cancelled`; a lookup answers found, absent or
// failed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Evidence } from '../src/core/evidence.js';
import type { Looked, Lookups, Phases, Prepared, Transport } from '../src/core/transport.js';

/** The requests the contract sends; a scripted subject is told which one comes next. */
export type CaseRequest =
  | 'answered'
  | 'failing'
  | 'held'
  | 'lookup_found'
  | 'lookup_absent'
  | 'lookup_failed'
  | 'lookup_held';

export interface TransportSubject<P extends Prepared> {
  transport: Transport<P>;
  /** An attempt the destination answers in full. */
  answered: P;
  /** An attempt whose exchange fails (nothing listens, the host or server is gone). */
  failing: P;
  /** An attempt the destination takes and never answers. */
  held: P;
  lookups: {
    found: Lookups[P['kind']]['prepared'];
    /** Null where the transport itself never says absent (MCP: the configured rule reads the reply). */
    absent: Lookups[P['kind']]['prepared'] | null;
    failed: Lookups[P['kind']]['prepared'];
    held: Lookups[P['kind']]['prepared'];
  };
  /** Called before each request (a script queues its answer here). */
  before?: (which: CaseRequest) => void;
  close(): Promise<void>;
}

/** Phases in order, and within the wall-clock window of the call that reported them. */
function expectTruePhases(phases: Phases, from: number, to: number): void {
  const points = [
    phases.started_at,
    ...(phases.request_sent_at !== undefined ? [phases.request_sent_at] : []),
    ...(phases.headers_at !== undefined ? [phases.headers_at] : []),
    phases.finished_at,
  ];
  expect(points[0]).toBeGreaterThanOrEqual(from);
  expect(points.at(-1)).toBeLessThanOrEqual(to);
  for (let i = 1; i < points.length; i++) expect(points[i]).toBeGreaterThanOrEqual(points[i - 1]!);
}

function expectCancelled(evidence: Evidence): void {
  expect(evidence.local_error).toBe('cancelled');
  expect(evidence.phase).not.toBe('response_complete');
}

/** How long after the abort the exchange must have ended (far below any deadline in the subjects). */
const ABORT_WITHIN_MS = 5_000;
const ABORT_AFTER_MS = 300;

export function transportContract<P extends Prepared>(
  name: string,
  open: () => Promise<TransportSubject<P>>,
  options: { skip?: string | undefined } = {},
): void {
  describe.skipIf(options.skip !== undefined)(`transport contract: ${name}`, () => {
    let s: TransportSubject<P>;
    beforeAll(async () => {
      s = await open();
    });
    afterAll(async () => {
      await s?.close();
    });

    const dispatch = async (which: CaseRequest, p: P, signal?: AbortSignal) => {
      s.before?.(which);
      const from = Date.now();
      const d = await s.transport.dispatch(p, { signal });
      return { d, from, to: Date.now() };
    };
    const lookup = async (
      which: CaseRequest,
      p: Lookups[P['kind']]['prepared'],
      signal?: AbortSignal,
    ): Promise<{ l: Looked<Lookups[P['kind']]['found']>; from: number; to: number }> => {
      s.before?.(which);
      const from = Date.now();
      const l = await s.transport.lookup(p, { signal });
      return { l, from, to: Date.now() };
    };

    it('dispatch never throws for a failed exchange: the failure is evidence, with true phases', async () => {
      const { d, from, to } = await dispatch('failing', s.failing);
      expect(d.evidence.phase).not.toBe('response_complete');
      expect(d.evidence.local_error ?? d.evidence.error_code).toBeDefined();
      expectTruePhases(d.phases, from, to);
    });

    it('an answered exchange is response_complete, with true phases', async () => {
      const { d, from, to } = await dispatch('answered', s.answered);
      expect(d.evidence.phase).toBe('response_complete');
      expect(d.evidence.local_error).toBeUndefined();
      expectTruePhases(d.phases, from, to);
    });

    it('an abort ends a held exchange as cancelled, promptly', async () => {
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), ABORT_AFTER_MS);
      const { d, from, to } = await dispatch('held', s.held, ac.signal);
      clearTimeout(timer);
      expectCancelled(d.evidence);
      expect(to - from).toBeGreaterThanOrEqual(ABORT_AFTER_MS - 50);
      expect(to - from).toBeLessThan(ABORT_AFTER_MS + ABORT_WITHIN_MS);
      expectTruePhases(d.phases, from, to);
    });

    it('a lookup that finds the effect says found, with what it found', async () => {
      const { l, from, to } = await lookup('lookup_found', s.lookups.found);
      expect(l.verdict).toBe('found');
      expect(l.verdict === 'found' ? l.found : null).not.toBeNull();
      expectTruePhases(l.phases, from, to);
    });

    it('a lookup of nothing says absent (where the transport itself can tell)', async (ctx) => {
      if (s.lookups.absent === null) {
        ctx.skip();
        return;
      }
      const { l, from, to } = await lookup('lookup_absent', s.lookups.absent);
      expect(l.verdict).toBe('absent');
      expectTruePhases(l.phases, from, to);
    });

    it('a lookup that learns nothing says failed, never throws', async () => {
      const { l, from, to } = await lookup('lookup_failed', s.lookups.failed);
      expect(l.verdict).toBe('failed');
      expectTruePhases(l.phases, from, to);
    });

    it('an abort ends a held lookup as failed, evidence cancelled', async () => {
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), ABORT_AFTER_MS);
      const { l, from, to } = await lookup('lookup_held', s.lookups.held, ac.signal);
      clearTimeout(timer);
      expect(l.verdict).toBe('failed');
      expectCancelled(l.evidence);
      expect(to - from).toBeLessThan(ABORT_AFTER_MS + ABORT_WITHIN_MS);
      expectTruePhases(l.phases, from, to);
    });
  });
}
