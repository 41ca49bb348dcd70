// The oracle: every claim Candor makes about an operation, compared with the fake's ground truth
// (how many times it committed the operation's write). A claim is false when it says the effect
// is absent ("none", "failed", "not applied", "nothing was sent") while the fake committed, or
// present ("applied", "succeeded", "Done") while it did not. Two commits for one operation are a
// duplicate whatever was claimed (under an honoured key the fake replays, it never commits twice).
// A settled (`succeeded`) operation that later answers or shows anything but applied reopened
// without positive evidence. An envelope whose structured fields and sentence disagree is
// incoherent (not false by itself, but an agent reading one or the other is told two things).
import type { Envelope } from '../../../src/core/envelope.js';
import type { OperationView } from '../../../src/ledger/projection.js';
import { deliveryVerdict } from '../../../src/ledger/projection.js';

export const Claim = {
  none_while_committed: 'none_while_committed',
  applied_while_not_committed: 'applied_while_not_committed',
  duplicate_commit: 'duplicate_commit',
  settled_reopened: 'settled_reopened',
  incoherent: 'incoherent',
  status_disagrees: 'status_disagrees',
  exception: 'exception',
} as const;
export type Claim = (typeof Claim)[keyof typeof Claim];

export interface Violation {
  claim: Claim;
  /** Who said it: which envelope, view or listing. */
  source: string;
  /** What it said (category/retry/remote_effect, state, or the sentence). */
  said: string;
  /** Groups violations into failure classes. */
  key: string;
}

/** "Nothing was sent" said of the whole operation (not "nothing was sent now / from here"). */
const NOTHING_SENT = /nothing was sent(?! now| from here)/i;
const NOT_APPLIED =
  /\bwas not applied\b|\bnot applied\b|\bwas not attempted\b|reported that .* failed/i;
const SAYS_DONE = /^Done:|\bdid apply\b/;
const SAYS_UNKNOWN = /\bunknown\b|\bwhether\b|\bmay have\b/i;

function shape(e: Pick<Envelope, 'category' | 'retry' | 'remote_effect'>): string {
  return `${e.category}/${e.retry}/${e.remote_effect}`;
}

function violation(claim: Claim, source: string, said: string, keyPart: string): Violation {
  return { claim, source, said, key: `${claim} | ${source} | ${keyPart}` };
}

/**
 * The fake's commit count for a claim: one number when it cannot change while the claim is made,
 * or the counts read just before the claim was asked for and just after it arrived, when something
 * else (a successor's sweep, a resumed owner) may commit in between. A "not applied" claim is then
 * false only if a commit existed before it was asked for, an "applied" one only if none existed
 * after it arrived.
 */
export type Commits = number | { before: number; after: number };
const before = (c: Commits): number => (typeof c === 'number' ? c : c.before);
const after = (c: Commits): number => (typeof c === 'number' ? c : c.after);

/** The claims of one envelope (and its headline, the first line an MCP client shows). */
export function checkEnvelope(
  source: string,
  e: Envelope,
  commits: Commits,
  headline?: string,
): Violation[] {
  const out: Violation[] = [];
  const said = `${shape(e)} "${e.message}"${headline ? ` [${headline}]` : ''}`;
  const notApplied =
    e.remote_effect === 'none' ||
    NOT_APPLIED.test(e.message) ||
    NOTHING_SENT.test(e.message) ||
    (headline !== undefined && NOTHING_SENT.test(headline));
  const applied =
    e.ok ||
    e.category === 'succeeded' ||
    e.remote_effect === 'applied' ||
    SAYS_DONE.test(e.message);
  if (before(commits) > 0 && notApplied) {
    const what =
      e.remote_effect === 'none' ? shape(e) : `${shape(e)} with a "not applied" sentence`;
    out.push(violation(Claim.none_while_committed, source, said, what));
  }
  if (after(commits) === 0 && applied)
    out.push(violation(Claim.applied_while_not_committed, source, said, shape(e)));
  // Structured fields and sentence must tell the same story.
  const sentenceNone = NOT_APPLIED.test(e.message) || NOTHING_SENT.test(e.message);
  if (e.remote_effect === 'applied' && SAYS_UNKNOWN.test(e.message) && !SAYS_DONE.test(e.message))
    out.push(
      violation(Claim.incoherent, source, said, `${shape(e)} but the sentence says unknown`),
    );
  else if (e.remote_effect !== 'none' && sentenceNone)
    out.push(
      violation(Claim.incoherent, source, said, `${shape(e)} but the sentence says not applied`),
    );
  else if (e.remote_effect === 'none' && SAYS_UNKNOWN.test(e.message))
    out.push(
      violation(Claim.incoherent, source, said, `${shape(e)} but the sentence says unknown`),
    );
  if ((e.category === 'succeeded') !== (e.remote_effect === 'applied' && e.ok))
    if (e.category === 'succeeded' || e.ok)
      out.push(violation(Claim.incoherent, source, said, `${shape(e)} ok=${String(e.ok)}`));
  return out;
}

/** What `candor ops list/show` would say about the operation (its projected view). */
export function checkView(source: string, v: OperationView, commits: Commits): Violation[] {
  const out: Violation[] = [];
  const verdict = deliveryVerdict(v);
  const said = `state ${v.state ?? '-'}; delivery ${verdict.code}: ${verdict.line}`;
  if (before(commits) > 0 && (v.state === 'failed' || v.state === 'cancelled'))
    out.push(violation(Claim.none_while_committed, source, said, `state ${v.state}`));
  if (before(commits) > 0 && verdict.line === 'no attempt reached the destination')
    out.push(violation(Claim.none_while_committed, `${source} delivery`, said, verdict.code));
  if (after(commits) === 0 && (v.state === 'succeeded' || v.state === 'duplicate_effect_confirmed'))
    out.push(violation(Claim.applied_while_not_committed, source, said, `state ${v.state}`));
  return out;
}

/** A settled operation answered, or was shown, as anything but applied. */
export function checkSettled(
  source: string,
  e: Envelope | null,
  v: OperationView | null,
): Violation[] {
  if (e && e.remote_effect !== 'applied')
    return [violation(Claim.settled_reopened, source, `${shape(e)} "${e.message}"`, shape(e))];
  if (v && v.state !== 'succeeded' && v.state !== 'duplicate_effect_confirmed')
    return [
      violation(
        Claim.settled_reopened,
        source,
        `state ${v.state ?? '-'}`,
        `state ${v.state ?? '-'}`,
      ),
    ];
  return [];
}

export function duplicate(commits: number): Violation {
  return violation(
    Claim.duplicate_commit,
    'fake ground truth',
    `${commits} commits`,
    'two or more commits',
  );
}

/**
 * One answer per state: `operation_status` asked right after a call (nothing happened in between)
 * must tell the agent what the call told it — the same category, directive and remote effect.
 */
export function checkAgreement(source: string, call: Envelope, status: Envelope): Violation[] {
  if (shape(call) === shape(status)) return [];
  return [
    violation(
      Claim.status_disagrees,
      `${source} vs operation_status`,
      `${shape(call)} "${call.message}" vs ${shape(status)} "${status.message}"`,
      `${shape(call)} vs ${shape(status)}`,
    ),
  ];
}
