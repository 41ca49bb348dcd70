// Live updates of `candor ui` on PostgreSQL: an operation appended by another connection (another
// gateway) reaches an open Server-Sent Events stream and the operations page. Real PostgreSQL,
// started here; outside CI a missing server skips with a printed reason, under CI=true it fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/store.js';
import type { LedgerStore } from '../../src/ledger/store.js';
import { startUi, TOKEN_COOKIE, type StartedUi } from '../../src/web/server.js';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from '../support/postgres.js';
import { newOperation } from './fixture.js';

const skip = postgresSkipReason();

describe.skipIf(skip !== undefined)('candor ui live on PostgreSQL', () => {
  let pg: ThrowawayPostgres;
  let reader: LedgerStore;
  let writer: LedgerStore;
  let ui: StartedUi;

  beforeAll(async () => {
    pg = await startPostgres();
    reader = await openPostgresLedger(pg.url, { schema: 'ui_live' });
    writer = await openPostgresLedger(pg.url, { schema: 'ui_live' });
    await writer.append(newOperation('op_pg_first'));
    ui = await startUi({
      store: reader,
      ledger: 'postgres://candor@127.0.0.1/postgres',
      pollMs: 100,
    });
  }, 180_000);

  afterAll(async () => {
    await ui?.close();
    await reader?.close();
    await writer?.close();
    await pg?.stop();
  });

  it('streams a new operation to an open /events connection and lists it', async () => {
    const cookie = `${TOKEN_COOKIE}=${ui.ui.token}`;
    const first = await fetch(ui.url, { headers: { cookie } });
    expect(await first.text()).toContain('op_pg_first');

    const abort = new AbortController();
    const res = await fetch(`${ui.url}events`, { headers: { cookie }, signal: abort.signal });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const read = async (until: (t: string) => boolean): Promise<void> => {
      while (!until(text)) {
        const chunk = await reader.read();
        if (chunk.done) throw new Error(`stream ended: ${text}`);
        text += decoder.decode(chunk.value as Uint8Array, { stream: true });
      }
    };
    await read((t) => t.includes('event: hello'));
    await writer.append(newOperation('op_pg_live'));
    await read((t) => t.includes('op_pg_live'));
    abort.abort();
    const message = text.split('\n\n').find((m) => m.includes('op_pg_live'))!;
    expect(message).toContain('event: ledger');
    const data = JSON.parse(
      message
        .split('\n')
        .find((l) => l.startsWith('data: '))!
        .slice(6),
    ) as {
      kind: string;
      operation_id: string;
    }[];
    expect(data.map((e) => [e.kind, e.operation_id])).toEqual([['operation_opened', 'op_pg_live']]);

    const page = await (await fetch(ui.url, { headers: { cookie } })).text();
    expect(page).toContain('data-op="op_pg_live"');
  });
});
