// Webhook notifier for pending approvals: a team channel or pager hears that a person is needed.
//   - Each delivery is a POST of JSON, signed with HMAC-SHA-256 over `TIMESTAMP.BODY` under the
//     shared secret: `Candor-Timestamp: <unix seconds>` and `Candor-Signature: v1=<hex>`. The
//     receiver recomputes it and refuses a stale timestamp (replay).
//   - A 5xx answer or no answer is retried with exponential backoff, up to `attempts` deliveries;
//     a 2xx ends it, a 4xx ends it (the receiver refused; repeating would not help).
//   - The receiver's answer is bounded in time (`timeout_ms`, headers and body) and size
//     (`max_answer_bytes`, the rest is not read): a slow or huge receiver cannot hold the gateway.
//   - A notification never decides anything: the approval still waits for a person; a failed
//     notification is one log line.
//   - `slack: true` sends a Slack-compatible body (`text`) beside the card fields.
import { createHmac } from 'node:crypto';
import type { ApprovalCard } from './card.js';
import type { Approver } from './approvers/approver.js';

export interface WebhookOptions {
  url: string;
  secret: string;
  slack?: boolean;
  /** Deliveries at most (default 4). */
  attempts?: number;
  /** First backoff delay (default 500 ms, doubled each time). */
  backoff_ms?: number;
  timeout_ms?: number;
  max_answer_bytes?: number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
  log?: (line: string) => void;
}

export interface Delivery {
  attempt: number;
  status: number | null;
  problem: string | null;
}

export const SIGNATURE_HEADER = 'candor-signature';
export const TIMESTAMP_HEADER = 'candor-timestamp';

/** `v1=<hex>` over `timestamp.body`. */
export function webhookSignature(secret: string, timestamp: string, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

export function webhookBody(card: ApprovalCard, slack: boolean): Record<string, unknown> {
  const fields = {
    type: 'approval_requested',
    approval_id: card.approval_id,
    operation_id: card.operation_id,
    action: card.action,
    action_class: card.action_class,
    scope: card.scope,
    question: card.question,
    request: card.request ?? null,
    expires_at: new Date(card.expires_at).toISOString(),
  };
  return slack
    ? {
        text: `Approval needed: ${card.question} (operation ${card.operation_id}; answer with candor approve ${card.approval_id})`,
        ...fields,
      }
    : fields;
}

/** Reads at most `limit` bytes of the answer, then stops reading. */
async function drain(res: Response, limit: number): Promise<void> {
  if (!res.body) return;
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let size = 0;
  for (;;) {
    const next = await reader.read();
    if (next.done) return;
    size += next.value.length;
    if (size > limit) {
      await reader.cancel();
      return;
    }
  }
}

export function createWebhookNotifier(options: WebhookOptions): {
  notify(card: ApprovalCard): Promise<Delivery[]>;
} {
  const attempts = options.attempts ?? 4;
  const timeout = options.timeout_ms ?? 5_000;
  const limit = options.max_answer_bytes ?? 65_536;
  const sleep = options.sleep ?? ((ms) => new Promise<void>((r) => setTimeout(r, ms)));
  const now = options.now ?? Date.now;
  const log = options.log ?? (() => undefined);
  return {
    async notify(card) {
      const body = JSON.stringify(webhookBody(card, options.slack ?? false));
      const deliveries: Delivery[] = [];
      let delay = options.backoff_ms ?? 500;
      for (let attempt = 1; attempt <= attempts; attempt++) {
        const timestamp = String(Math.floor(now() / 1000));
        let status: number | null = null;
        let problem: string | null = null;
        try {
          const res = await fetch(options.url, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              [TIMESTAMP_HEADER]: timestamp,
              [SIGNATURE_HEADER]: webhookSignature(options.secret, timestamp, body),
            },
            body,
            redirect: 'error',
            signal: AbortSignal.timeout(timeout),
          });
          status = res.status;
          await drain(res, limit);
        } catch (error) {
          problem = error instanceof Error ? error.name : 'error';
        }
        deliveries.push({ attempt, status, problem });
        if (status !== null && status < 500) break;
        if (attempt < attempts) {
          await sleep(delay);
          delay *= 2;
        }
      }
      const last = deliveries.at(-1)!;
      if (last.status === null || last.status >= 300)
        log(
          `candor: approval webhook for ${card.approval_id} not delivered after ${deliveries.length} attempt(s) (${last.status ?? last.problem})`,
        );
      return deliveries;
    },
  };
}

/** Tells the webhook about every card, then asks the approver as before (never waits for it). */
export function notifyingApprover(
  inner: Approver,
  notifier: { notify(card: ApprovalCard): Promise<unknown> },
): Approver {
  return {
    ...inner,
    ask(card, options) {
      void notifier.notify(card).catch(() => undefined);
      return inner.ask(card, options);
    },
  };
}
