import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finished, observed, opened, started } from '../../ledger/contract.case.js';
import type { NewEvent } from '../../ledger/events.js';
import { openSqliteLedger } from '../../ledger/sqlite/store.js';
import { follow } from './ops-follow.js';
import { run } from './ops.js';

const dir = mkdtempSync(join(tmpdir(), 'candor-ops-'));
const ledger = `sqlite:${join(dir, 'ledger.db')}`;

/** attempt N of `op` that got a 201 with the given remote ref and replay flag. */
function sent(
  op: string,
  n: number,
  ref: string | null,
  replay: boolean,
  decision: string | null,
): NewEvent[] {
  const s = started(op, `att_${op}_${n}`, n);
  if (s.kind === 'attempt_started') {
    s.data.retry_decision = decision as typeof s.data.retry_decision;
    if (n > 1) {
      s.data.retry_of_attempt_id = `att_${op}_${n - 1}`;
      s.data.retry_reason = 'response_lost_after_dispatch';
    }
  }
  const f = finished(
    op,
    `att_${op}_${n}`,
    ref ? 'succeeded' : 'outcome_unknown',
    ref ? 'never' : 'reconcile_first',
    ref ? 'applied' : 'unknown',
  );
  if (f.kind === 'attempt_finished') {
    f.data.dispatch_state = ref ? 'response_received' : 'sent_no_response';
    f.data.response = ref
      ? { status: 201, fingerprint: 'sha256:body', remote_ref: ref, replay }
      : null;
  }
  return [s, f];
}

beforeAll(async () => {
  const store = openSqliteLedger(join(dir, 'ledger.db'));
  await store.append([
    opened('op_dedup', { key: 'k-1', correlation: 'case-1' }),
    ...sent('op_dedup', 1, null, false, null),
    ...sent('op_dedup', 2, 'dep_1', true, 'destination_idempotency_confirmed'),
    opened('op_lucky'),
    ...sent('op_lucky', 1, 'dep_7', false, null),
    ...sent('op_lucky', 2, 'dep_8', false, null),
    opened('op_open'),
    opened('op_pending'),
    started('op_pending', 'att_p'),
    opened('op_rec'),
    ...sent('op_rec', 1, null, false, null),
    observed('op_rec', 'succeeded'),
  ]);
  await store.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await run(args, { out: (s) => (out += s), err: (s) => (err += s) });
  return { code, out, err };
}

describe('candor ops show', () => {
  it('puts state and intent on top and shows every attempt with its licence', async () => {
    const r = await cli('show', 'op_dedup', '--ledger', ledger);
    expect(r.code).toBe(0);
    const lines = r.out.split('\n');
    expect(lines[0]).toBe('operation    op_dedup');
    expect(lines[1]).toBe('state        succeeded');
    expect(lines[2]).toMatch(/^intent {7}create_deployment app:web params d{64}$/);
    expect(r.out).toContain(
      'verdict      [retry_deduplicated] retried under destination_idempotency_confirmed',
    );
    expect(r.out).toContain('decision destination_idempotency_confirmed');
    expect(r.out).toContain('(same as attempt 1)');
    expect(r.out).toContain('status 201, replay yes, remote ref dep_1');
    expect(r.out).toContain('credential   vault:prod#deploy');
    expect(r.out).toContain(
      'outcome      outcome_unknown (rule test), retry reconcile_first, remote effect unknown',
    );
  });

  it('makes "sent twice and got lucky" visibly different', async () => {
    const r = await cli('show', 'op_lucky', '--ledger', ledger);
    expect(r.code).toBe(0);
    expect(r.out).toContain(
      'verdict      [duplicate_effect] DUPLICATE EFFECT: 2 remote records (dep_7, dep_8)',
    );
    expect(r.out).toContain('attempt 2 was sent with retry decision none');
    expect(r.out).not.toContain('retry_deduplicated');
  });

  it('shows unfinished attempts and observations', async () => {
    const pending = await cli('show', 'op_pending', '--ledger', ledger);
    expect(pending.out).toContain('state        unknown');
    expect(pending.out).toContain('no finish recorded — the request may have been sent');
    const rec = await cli('show', 'op_rec', '--ledger', ledger);
    expect(rec.out).toMatch(/observation 1 {2}obs_op_rec \(lookup, 2026-01-01T00:00:00\.200Z\)/);
    expect(rec.out).toContain('  state after  succeeded');
  });

  it('prints the OperationView with --json', async () => {
    const r = await cli('show', 'op_dedup', '--json', '--ledger', ledger);
    const view = JSON.parse(r.out) as { operation_id: string; attempts: unknown[]; state: string };
    expect(view).toMatchObject({ operation_id: 'op_dedup', state: 'succeeded' });
    expect(view.attempts).toHaveLength(2);
  });

  it('exits 1 for an unknown operation', async () => {
    const r = await cli('show', 'op_nope', '--ledger', ledger);
    expect(r.code).toBe(1);
    expect(r.err).toBe('candor ops: no operation op_nope in the ledger\n');
  });
});

describe('candor ops list', () => {
  it('lists every operation, or those in the given states', async () => {
    const all = await cli('list', '--ledger', ledger);
    expect(all.code).toBe(0);
    expect(all.out.split('\n')[0]).toMatch(
      /^OPERATION\s+STATE\s+ACTION\s+ATTEMPTS\s+SUBJECT\s+DELIVERY$/,
    );
    expect(all.out.trim().split('\n')).toHaveLength(6);
    const unresolved = await cli('list', '--state', 'open,unknown', '--ledger', ledger, '--json');
    const ids = (JSON.parse(unresolved.out) as { operation_id: string }[]).map(
      (v) => v.operation_id,
    );
    expect(ids).toEqual(['op_open', 'op_pending']);
    const done = await cli('list', '--state=succeeded', `--ledger=${ledger}`);
    expect(done.out).toContain('op_dedup');
    expect(done.out).toContain('op_rec');
    expect(done.out).not.toContain('op_open');
    const none = await cli('list', '--state', 'cancelled', '--ledger', ledger);
    expect(none.out).toBe('no operations in state cancelled\n');
  });
});

describe('candor ops errors', () => {
  it('answers misuse with exit 2 and one line', async () => {
    for (const args of [
      [],
      ['list', '--state', 'done'],
      ['show'],
      ['frobnicate'],
      ['list', '--bogus'],
      ['show', 'a', '--ledger', 'mysql://x'],
    ]) {
      const r = await cli(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err.split('\n')).toHaveLength(2);
      expect(r.err.startsWith('candor ops: ')).toBe(true);
    }
  });

  it('exits 3 when the ledger cannot be opened, without creating one', async () => {
    const r = await cli('list', '--ledger', `sqlite:${join(dir, 'absent', 'ledger.db')}`);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/^candor ops: cannot open ledger \(NOT_FOUND\)/);
  });
});

describe('candor ops follow', () => {
  it('prints what another connection appends, polling SQLite, and stops cleanly when told', async () => {
    const store = openSqliteLedger(join(dir, 'ledger.db'));
    const reader = openSqliteLedger(join(dir, 'ledger.db'));
    let out = '';
    let err = '';
    const io = { out: (s: string) => void (out += s), err: (s: string) => void (err += s) };
    const stop = new AbortController();
    const following = follow(
      reader,
      { pollMs: 10, json: false, ledgerKind: 'sqlite' },
      io,
      stop.signal,
    );
    await until(() => err.includes('following'));
    // Only new events: nothing of what the ledger held before.
    expect(err).toMatch(
      /^candor ops: following the sqlite ledger from #\d+ \(polling every 10 ms\)/,
    );
    await store.append([
      opened('op_follow', { correlation: 'follow-1' }),
      started('op_follow', 'att_f'),
    ]);
    await until(() => out.includes('attempt_started'));
    expect(out.split('\n').filter(Boolean)).toEqual([
      expect.stringMatching(
        /^#\d+ \S+ operation_opened op_follow create_deployment \(create\), owner gw-1$/,
      ),
      expect.stringMatching(/^#\d+ \S+ attempt_started op_follow attempt 1 by w-1$/),
    ]);
    expect(out).not.toContain('op_dedup');
    stop.abort();
    expect(await following).toBe(0);
    await store.close();
    await reader.close();
  });

  it('--from 1 replays the whole ledger as JSON lines; --help explains; misuse exits 2', async () => {
    const stop = new AbortController();
    let out = '';
    const reader = openSqliteLedger(join(dir, 'ledger.db'));
    const following = follow(
      reader,
      { from: 1, pollMs: 10, json: true, ledgerKind: 'sqlite' },
      { out: (s) => void (out += s), err: () => undefined },
      stop.signal,
    );
    await until(() => out.includes('op_rec'));
    stop.abort();
    expect(await following).toBe(0);
    await reader.close();
    const first = JSON.parse(out.split('\n')[0]!) as { seq: number; operation_id: string };
    expect(first).toMatchObject({ seq: 1, operation_id: 'op_dedup' });

    const help = await cli('follow', '--help');
    expect(help.code).toBe(0);
    expect(help.out).toContain('LISTEN/NOTIFY');
    expect(help.out).toContain(
      '--poll-ms N   SQLite: how often to look for new events (default 1000)',
    );
    const bad = await cli('follow', '--poll-ms', '0', '--ledger', ledger);
    expect(bad).toMatchObject({ code: 2, out: '' });
    expect(bad.err).toBe('candor ops: --poll-ms needs a positive whole number, not "0"\n');
    expect((await cli('list', '--from', '3', '--ledger', ledger)).code).toBe(2);
  });
});

async function until(check: () => boolean): Promise<void> {
  // Waits for output without a deadline of its own: the test's timeout bounds it.
  while (!check()) await new Promise((r) => setTimeout(r, 5));
}
