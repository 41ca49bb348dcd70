// The approval webhook against a real HTTP receiver on loopback: the receiver verifies the
// HMAC-SHA-256 signature over timestamp and body, answers 500 first and then 200, and sees the retry;
// a receiver that answers too much is not read past the limit.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { ApprovalCard } from './card.js';
import { createWebhookNotifier, SIGNATURE_HEADER, TIMESTAMP_HEADER } from './webhook.js';

const SECRET = 'whsec-test-4c2a91';
const card = {
  approval_id: 'apr_01TEST',
  scope: 'per_call',
  question: 'Send 120 EUR to account A-17?',
  operation_id: 'op_01TEST',
  action: 'create_payment',
  action_class: 'financial',
  request: {
    method: 'POST',
    target: '/v1/payments',
    destination: 'https://pay.example',
    body: { amount: 120 },
  },
  expires_at: 1_800_000_000_000,
} as unknown as ApprovalCard;

interface Received {
  verified: boolean;
  body: Record<string, unknown>;
}

let server: Server | null = null;
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = null;
});

/** A receiver that verifies like a real one would, answering `statuses` in turn. */
async function receiver(
  statuses: number[],
  answer = '{}',
): Promise<{ url: string; got: Received[] }> {
  const got: Received[] = [];
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString('utf8')));
    req.on('end', () => {
      const ts = String(req.headers[TIMESTAMP_HEADER] ?? '');
      const sig = String(req.headers[SIGNATURE_HEADER] ?? '');
      const want = `v1=${createHmac('sha256', SECRET).update(`${ts}.${raw}`).digest('hex')}`;
      const fresh = Math.abs(Date.now() / 1000 - Number(ts)) < 300;
      const verified =
        fresh && sig.length === want.length && timingSafeEqual(Buffer.from(sig), Buffer.from(want));
      got.push({ verified, body: JSON.parse(raw) as Record<string, unknown> });
      res
        .writeHead(statuses[got.length - 1] ?? 200, { 'content-type': 'application/json' })
        .end(answer);
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got };
}

describe('approval webhook', () => {
  it('signs each delivery and retries with backoff after a 500', async () => {
    const { url, got } = await receiver([500, 200]);
    const waits: number[] = [];
    const n = createWebhookNotifier({
      url,
      secret: SECRET,
      slack: true,
      sleep: (ms) => {
        waits.push(ms);
        return Promise.resolve();
      },
    });
    const deliveries = await n.notify(card);
    expect(deliveries.map((d) => d.status)).toEqual([500, 200]);
    expect(got).toHaveLength(2);
    expect(got.every((g) => g.verified)).toBe(true);
    expect(got[0]!.body).toMatchObject({
      type: 'approval_requested',
      approval_id: 'apr_01TEST',
      operation_id: 'op_01TEST',
      request: { method: 'POST', target: '/v1/payments', body: { amount: 120 } },
    });
    expect(String(got[0]!.body['text'])).toContain('Approval needed: Send 120 EUR');
    expect(waits).toEqual([500]);
  });

  it('a forged signature does not verify at the receiver (the check has teeth)', async () => {
    const { url, got } = await receiver([200]);
    await createWebhookNotifier({ url, secret: 'another-secret' }).notify(card);
    expect(got).toHaveLength(1);
    expect(got[0]!.verified).toBe(false);
  });

  it('a 4xx ends it; a receiver that never answers well is given up after the bounded attempts', async () => {
    const refused = await receiver([400]);
    const lines: string[] = [];
    const d1 = await createWebhookNotifier({
      url: refused.url,
      secret: SECRET,
      log: (l) => lines.push(l),
    }).notify(card);
    expect(d1.map((d) => d.status)).toEqual([400]);
    await new Promise<void>((r) => server!.close(() => r()));
    const failing = await receiver([503, 503, 503], 'x'.repeat(1_000_000));
    const d2 = await createWebhookNotifier({
      url: failing.url,
      secret: SECRET,
      attempts: 3,
      max_answer_bytes: 1024,
      sleep: () => Promise.resolve(),
      log: (l) => lines.push(l),
    }).notify(card);
    expect(d2.map((d) => d.status)).toEqual([503, 503, 503]);
    expect(failing.got).toHaveLength(3);
    expect(lines.at(-1)).toMatch(/not delivered after 3 attempt\(s\) \(503\)/);
  });
});
