// The approval queue shared by the gate's console approver and `candor approve`: a directory, by
// default `./.candor/approvals/`, with one file per request and one per decision:
//
//   requests/<approval_id>.json    the card, written by the gate (temp file + rename: never torn)
//   decisions/<approval_id>.json   { decision, by, at }, created exclusively (O_EXCL)
//
// One file per entry instead of one shared JSON list: the gate and the console write at the same
// time, and exclusive creation makes "first decision wins" hold without any lock — a console `yes`
// racing the gate's expiry gives exactly one recorded answer, never a lost update.
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApprovalCard } from '../card.js';
import { isSelfApproval, type ApproverIdentity } from '../identity.js';
import { DEFAULT_APPROVALS_DIR, isCode } from '../lock.js';

export interface QueueDecision {
  decision: 'approved' | 'denied' | 'expired';
  by: string;
  at: number;
  /** The person who decided, when known. */
  identity?: ApproverIdentity;
  reason?: string | null;
  /** The request fingerprint the decision was made for (the card's, checked when written). */
  request_fingerprint?: string;
}

/** What a person's decision carries beyond yes or no. */
export interface DecideDetails {
  identity?: ApproverIdentity;
  reason?: string | null;
  /** The fingerprint the person was shown: it must be the card's, or nothing is decided. */
  request_fingerprint?: string;
  /** The four-eyes rule: the caller that asked for the call may not approve it. */
  four_eyes?: boolean;
}

export type DecideFailureCode =
  | 'not_found'
  | 'ambiguous'
  | 'already_decided'
  | 'expired'
  | 'fingerprint_mismatch'
  | 'self_approval';

export type DecideResult =
  | { ok: true; value: { approval_id: string; card: ApprovalCard }; failure?: never }
  | { ok: false; failure: { code: DecideFailureCode; message: string }; value?: never };

export interface ApprovalQueue {
  readonly dir: string;
  submit(card: ApprovalCard): Promise<void>;
  /** Requests without a decision whose card has not expired at `now`, oldest first. */
  pending(now: number): Promise<ApprovalCard[]>;
  /** Finds a request by its full id or a unique prefix (at least 8 characters). */
  find(idOrPrefix: string): Promise<{ card: ApprovalCard } | { failure: DecideFailureCode }>;
  /**
   * Records a person's answer; the first decision for a request wins. Refused without writing
   * anything: a fingerprint that is not the card's (the person saw another request), and under
   * four-eyes an approval by the caller that asked for the call.
   */
  decide(
    idOrPrefix: string,
    decision: 'approved' | 'denied',
    by: string,
    now: number,
    details?: DecideDetails,
  ): Promise<DecideResult>;
  /** Records `expired` unless a decision exists; returns the decision that stands. */
  expire(approvalId: string, now: number): Promise<QueueDecision>;
  decisionFor(approvalId: string): Promise<QueueDecision | null>;
  /** Forgets a finished request (the ledger keeps the record). */
  remove(approvalId: string): Promise<void>;
}

const SAFE_ID = /^[A-Za-z0-9_-]{1,80}$/;

export function approvalQueue(dir: string = DEFAULT_APPROVALS_DIR): ApprovalQueue {
  const requests = join(dir, 'requests');
  const decisions = join(dir, 'decisions');
  const requestPath = (id: string): string => join(requests, `${id}.json`);
  const decisionPath = (id: string): string => join(decisions, `${id}.json`);

  async function readJson<T>(path: string): Promise<T | null> {
    try {
      return JSON.parse(await readFile(path, 'utf8')) as T;
    } catch (err) {
      if (isCode(err, 'ENOENT')) return null;
      if (err instanceof SyntaxError) return null;
      throw err;
    }
  }

  async function ids(): Promise<string[]> {
    try {
      return (await readdir(requests))
        .filter((f) => f.endsWith('.json'))
        .map((f) => f.slice(0, -'.json'.length))
        .sort();
    } catch (err) {
      if (isCode(err, 'ENOENT')) return [];
      throw err;
    }
  }

  /** Exclusive create: false when a decision already exists. */
  async function writeDecision(id: string, d: QueueDecision): Promise<boolean> {
    await mkdir(decisions, { recursive: true });
    try {
      await writeFile(decisionPath(id), `${JSON.stringify(d)}\n`, { flag: 'wx' });
      return true;
    } catch (err) {
      if (isCode(err, 'EEXIST')) return false;
      throw err;
    }
  }

  const queue: ApprovalQueue = {
    dir,
    async submit(card) {
      if (!SAFE_ID.test(card.approval_id)) throw new TypeError('approval id is not file-safe');
      await mkdir(requests, { recursive: true });
      const tmp = join(requests, `.${card.approval_id}.${process.pid}.tmp`);
      await writeFile(tmp, `${JSON.stringify(card)}\n`);
      await rename(tmp, requestPath(card.approval_id));
    },

    async pending(now) {
      const out: ApprovalCard[] = [];
      for (const id of await ids()) {
        const card = await readJson<ApprovalCard>(requestPath(id));
        if (!card || card.expires_at < now) continue;
        if ((await queue.decisionFor(id)) !== null) continue;
        out.push(card);
      }
      return out.sort((a, b) => a.requested_at - b.requested_at);
    },

    async find(idOrPrefix) {
      const all = await ids();
      const exact = all.includes(idOrPrefix) ? [idOrPrefix] : [];
      const hits =
        exact.length > 0
          ? exact
          : idOrPrefix.length >= 8
            ? all.filter((id) => id.startsWith(idOrPrefix))
            : [];
      if (hits.length > 1) return { failure: 'ambiguous' };
      const card = hits[0] ? await readJson<ApprovalCard>(requestPath(hits[0])) : null;
      return card ? { card } : { failure: 'not_found' };
    },

    async decide(idOrPrefix, decision, by, now, details = {}) {
      const found = await queue.find(idOrPrefix);
      if ('failure' in found) {
        return {
          ok: false,
          failure: {
            code: found.failure,
            message:
              found.failure === 'ambiguous'
                ? `"${idOrPrefix}" matches more than one pending request; give more of the id`
                : `no pending approval request "${idOrPrefix}"`,
          },
        };
      }
      const { card } = found;
      const id = card.approval_id;
      if (card.expires_at < now) {
        await writeDecision(id, { decision: 'expired', by: 'ttl', at: now });
        return {
          ok: false,
          failure: { code: 'expired', message: `request ${id} expired; nothing was approved` },
        };
      }
      if (
        details.request_fingerprint !== undefined &&
        details.request_fingerprint !== card.request_fingerprint
      )
        return {
          ok: false,
          failure: {
            code: 'fingerprint_mismatch',
            message: `request ${id} is for ${card.request_fingerprint}, not the request shown (${details.request_fingerprint}); nothing was decided`,
          },
        };
      if (
        details.four_eyes === true &&
        decision === 'approved' &&
        details.identity &&
        isSelfApproval(card.requested_by, details.identity)
      )
        return {
          ok: false,
          failure: {
            code: 'self_approval',
            message: card.requested_by
              ? `${details.identity.subject} asked for this call and cannot approve it (four-eyes rule); another approver must decide`
              : `the caller of this call is not recorded, so the four-eyes rule cannot tell it from ${details.identity.subject}; another way of deciding is needed`,
          },
        };
      const record: QueueDecision = {
        decision,
        by,
        at: now,
        request_fingerprint: card.request_fingerprint,
        ...(details.identity ? { identity: details.identity } : {}),
        ...(details.reason !== undefined ? { reason: details.reason } : {}),
      };
      if (!(await writeDecision(id, record))) {
        const standing = await queue.decisionFor(id);
        return {
          ok: false,
          failure: {
            code: 'already_decided',
            message: `request ${id} was already answered (${standing?.decision ?? 'unknown'})`,
          },
        };
      }
      return { ok: true, value: { approval_id: id, card } };
    },

    async expire(approvalId, now) {
      if (await writeDecision(approvalId, { decision: 'expired', by: 'ttl', at: now }))
        return { decision: 'expired', by: 'ttl', at: now };
      return (await queue.decisionFor(approvalId)) ?? { decision: 'expired', by: 'ttl', at: now };
    },

    async decisionFor(approvalId) {
      const d = await readJson<QueueDecision>(decisionPath(approvalId));
      if (!d) return null;
      const decision =
        d.decision === 'approved' || d.decision === 'denied' || d.decision === 'expired'
          ? d.decision
          : 'denied'; // an unreadable answer is not an approval
      return {
        decision,
        by: typeof d.by === 'string' ? d.by : 'unknown',
        at: Number(d.at) || 0,
        ...(validIdentity(d.identity) ? { identity: d.identity } : {}),
        ...(typeof d.reason === 'string' ? { reason: d.reason } : {}),
        ...(typeof d.request_fingerprint === 'string'
          ? { request_fingerprint: d.request_fingerprint }
          : {}),
      };
    },

    async remove(approvalId) {
      // Only the request leaves the queue. Its decision stays as the record that it was answered:
      // removing it too would let an answer racing this removal (request read just before, decision
      // written just after) be accepted as a second, different answer.
      await rm(requestPath(approvalId), { force: true });
    },
  };
  return queue;
}

function validIdentity(v: unknown): v is ApproverIdentity {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return (
    (o['kind'] === 'oidc' || o['kind'] === 'token' || o['kind'] === 'local') &&
    typeof o['subject'] === 'string' &&
    (o['issuer'] === null || typeof o['issuer'] === 'string')
  );
}
