// Offline verification of a ledger: needs no key. Given the ordered stored record bytes, signed
// checkpoints (passed in, or carried by `checkpoint` events inside the log) and optionally the
// log/witness verifier keys and a checkpoint the auditor already trusts, it returns one code and the
// first bad seq. The exact rules are in README.md ("Verification codes"); the order of checks is:
// record structure (seq and hash chain) -> checkpoint validity -> fork -> truncation -> root ->
// trusted checkpoint -> torn tail. A crash-torn final record is never reported over tampering.
import { openCheckpoint, peekCheckpoint, type Checkpoint } from './checkpoint.js';
import { capLine, quote } from '../../core/quote.js';
import { parseVerifierKey, signatureKeyLabel, SigType, type NoteVerifier } from './note.js';
import { scanRecords, type EmbeddedCheckpoint, type ScanResult } from './scan.js';

export const VerifyCode = {
  INTACT: 'INTACT',
  MODIFIED: 'MODIFIED',
  DELETED: 'DELETED',
  INSERTED: 'INSERTED',
  REORDERED: 'REORDERED',
  ROOT_MISMATCH: 'ROOT_MISMATCH',
  TRUNCATED: 'TRUNCATED',
  ROLLBACK: 'ROLLBACK',
  FORK: 'FORK',
  BAD_CHECKPOINT: 'BAD_CHECKPOINT',
  TORN_TAIL: 'TORN_TAIL',
} as const;
export type VerifyCode = (typeof VerifyCode)[keyof typeof VerifyCode];

export interface VerifyReport {
  /** True only for INTACT. */
  ok: boolean;
  code: VerifyCode;
  /** The first seq the log can no longer vouch for; null when the problem is not tied to a record. */
  first_bad_seq: number | null;
  message: string;
  /** Records verified (for TORN_TAIL: the intact prefix). */
  size: number;
  /** RFC 9162 root (hex) over those records. */
  root: string;
  /** Valid checkpoints whose roots were compared. */
  checkpoints: number;
  /** Whether checkpoint signatures were checked (a log verifier key was available). */
  signatures_checked: boolean;
  /**
   * Where the log key came from: `anchored` (the auditor gave it), `claimed` (the bundle's own
   * key: proves self-consistency only, since whoever rewrites a bundle can replace it), `none`.
   */
  log_key: LogKeyTrust;
  /** Largest checkpoint size cosigned by a witness the auditor trusts (0 if none). */
  witnessed_size: number;
  /** Trusted witnesses (keys the auditor gave) whose cosignatures verified. */
  witnessed_by: string[];
  /** Witness keys the bundle names but the auditor did not give: claimed, not trusted. */
  claimed_witnesses: string[];
  /** Largest size cosigned only by claimed witness keys; never counts as witnessed. */
  claimed_witnessed_size: number;
  /** Signature lines from unknown keys, ignored as the signed-note spec requires. */
  ignored_signatures: IgnoredSignature[];
}

export type LogKeyTrust = 'anchored' | 'claimed' | 'none';

export interface IgnoredSignature {
  /** Seq of the `checkpoint` event carrying the note; null for a checkpoint outside the log. */
  checkpoint_seq: number | null;
  /** `name+keyid` of the unknown key. */
  key: string;
}

export interface VerifyInput {
  /** Stored record bytes in log order (record k at index k - 1). */
  records: readonly Uint8Array[];
  /** Signed checkpoint notes from outside the log (export, witness). */
  checkpoints?: readonly string[];
  /** Log verifier keys the auditor anchored (`name+id+key`, type 0x01). */
  logKeys?: readonly string[];
  /**
   * Log keys the material claims for itself (a bundle header): used only when no key is anchored,
   * and then reported as `claimed`. Without any log key, signatures are not checked.
   */
  claimedLogKeys?: readonly string[];
  /** Witness verifier keys the auditor trusts (type 0x04): only these count as witnessed. */
  witnessKeys?: readonly string[];
  /**
   * Witness keys the material claims (a bundle header): their cosignatures must verify, but they
   * never raise the witnessed size. A claimed key identical to a trusted one is that trusted key.
   */
  claimedWitnessKeys?: readonly string[];
  /** A checkpoint note the auditor already trusts (e.g. saved at the last audit). */
  trusted?: string;
  /** Expected log origin; defaults to the origin of the first checkpoint. */
  origin?: string;
}

interface Found {
  code: VerifyCode;
  first_bad_seq: number | null;
  message: string;
}

interface ValidCheckpoint {
  cp: Checkpoint;
  /** Seq of the carrying event, or null for an external note. */
  at: number | null;
  witnessed: boolean;
  claimedOnly: boolean;
}

export function verifyRecords(input: VerifyInput): VerifyReport {
  return classify(scanRecords(input.records), input);
}

/** Judges a finished scan against the checkpoints, keys and trusted checkpoint in `input`. */
export function classify(scan: ScanResult, input: Omit<VerifyInput, 'records'>): VerifyReport {
  const keys = parseKeys(input);
  const external = (input.checkpoints ?? []).map((note) => ({ note, at: null as number | null }));
  const n = scan.n;
  const torn = n > 0 && !scan.lastParses;
  const rootAt = (size: number): string | undefined => scan.rootAt(size);
  const report = (found: Found, size = n): VerifyReport => ({
    ok: found.code === VerifyCode.INTACT,
    ...found,
    // Messages may quote what a bundle says: never longer than one short line.
    message: capLine(found.message),
    size,
    root: rootAt(size) ?? '',
    checkpoints: valid.length,
    signatures_checked: keys.ok && keys.log.length > 0,
    log_key: keys.ok ? keys.logTrust : 'none',
    witnessed_size: Math.max(0, ...valid.filter((v) => v.witnessed).map((v) => v.cp.size)),
    witnessed_by: [...witnessedBy],
    claimed_witnesses: keys.ok ? keys.claimed.map((k) => signatureKeyLabel(k)) : [],
    claimed_witnessed_size: Math.max(
      0,
      ...valid.filter((v) => v.claimedOnly).map((v) => v.cp.size),
    ),
    ignored_signatures: ignored,
  });
  const witnessedBy = new Set<string>();
  const ignored: IgnoredSignature[] = [];
  const valid: ValidCheckpoint[] = [];

  const structural = recordStructure(scan, torn);
  if (structural) return report(structural);
  if (!keys.ok)
    return report({ code: VerifyCode.BAD_CHECKPOINT, first_bad_seq: null, message: keys.message });

  // Checkpoint validity: format, origin, signatures (when keys are known), embedded fields.
  const all: { note: string; at: number | null; ev?: EmbeddedCheckpoint }[] = [
    ...scan.checkpoints.map((c) => ({ note: c.note, at: c.at, ev: c })),
    ...external,
  ];
  let origin = input.origin;
  for (const c of all) {
    const where = c.at === null ? 'a checkpoint' : `the checkpoint in record ${c.at}`;
    const bad = (why: string): VerifyReport =>
      report({
        code: VerifyCode.BAD_CHECKPOINT,
        first_bad_seq: c.at,
        message: `${where} is invalid: ${why}`,
      });
    const opened =
      keys.log.length > 0
        ? openCheckpoint(c.note, [...keys.log, ...keys.witness, ...keys.claimed])
        : peekCheckpoint(c.note);
    if (!opened.ok) return bad(opened.failure);
    const cp = 'checkpoint' in opened.value ? opened.value.checkpoint : opened.value;
    let witnessed = false;
    let claimedOnly = false;
    if ('cosigners' in opened.value) {
      const trustedHere = opened.value.cosigners.filter((s) => keys.isTrustedWitness(s));
      for (const s of trustedHere) witnessedBy.add(s.name);
      witnessed = trustedHere.length > 0;
      claimedOnly = !witnessed && opened.value.cosigners.length > 0;
      for (const u of opened.value.unknown)
        ignored.push({ checkpoint_seq: c.at, key: signatureKeyLabel(u) });
    }
    origin ??= cp.origin;
    if (cp.origin !== origin) return bad(`origin ${quote(cp.origin)} is not ${quote(origin)}`);
    if (c.ev && (c.ev.size !== cp.size || c.ev.root_hash !== cp.root.toString('hex'))) {
      return bad('its size/root_hash fields disagree with its signed note');
    }
    valid.push({ cp, at: c.at, witnessed, claimedOnly });
  }
  let trusted: Checkpoint | null = null;
  if (input.trusted !== undefined) {
    const t =
      keys.log.length > 0
        ? openCheckpoint(input.trusted, [...keys.log, ...keys.witness])
        : peekCheckpoint(input.trusted);
    if (!t.ok) {
      return report({
        code: VerifyCode.BAD_CHECKPOINT,
        first_bad_seq: null,
        message: `the trusted checkpoint is invalid: ${t.failure}`,
      });
    }
    trusted = 'checkpoint' in t.value ? t.value.checkpoint : t.value;
    if (origin !== undefined && trusted.origin !== origin) {
      return report({
        code: VerifyCode.BAD_CHECKPOINT,
        first_bad_seq: null,
        message: `the trusted checkpoint is for origin ${quote(trusted.origin)}, not ${quote(origin)}`,
      });
    }
  }

  // Records proven by a matching checkpoint: the first unproven seq bounds where a rewrite began.
  const committed = torn ? n - 1 : n;
  const matches = (cp: Checkpoint): boolean =>
    cp.size <= committed && rootAt(cp.size) === cp.root.toString('hex');
  const provenBelow = (size: number): number =>
    Math.max(0, ...valid.filter((v) => v.cp.size < size && matches(v.cp)).map((v) => v.cp.size));

  const bySize = new Map<number, Checkpoint>();
  for (const v of valid) {
    const other = bySize.get(v.cp.size);
    if (other && !other.root.equals(v.cp.root)) {
      return report({
        code: VerifyCode.FORK,
        first_bad_seq: provenBelow(v.cp.size) + 1,
        message: `two signed checkpoints of size ${v.cp.size} have different roots: the log presented two histories`,
      });
    }
    bySize.set(v.cp.size, v.cp);
  }
  const sorted = [...valid].sort((a, b) => a.cp.size - b.cp.size);
  for (const v of sorted) {
    if (torn && v.cp.size >= n) {
      return report({
        code: VerifyCode.MODIFIED,
        first_bad_seq: n,
        message: `record ${n} cannot be read, but a signed checkpoint of size ${v.cp.size} covers it: committed bytes were damaged`,
      });
    }
    if (v.cp.size > n) {
      return report({
        code: VerifyCode.TRUNCATED,
        first_bad_seq: n + 1,
        message: `a signed checkpoint covers ${v.cp.size} records but only ${n} are present`,
      });
    }
    if (!matches(v.cp)) {
      return report({
        code: VerifyCode.ROOT_MISMATCH,
        first_bad_seq: provenBelow(v.cp.size) + 1,
        message: `the hash chain is self-consistent but the Merkle root of the first ${v.cp.size} records differs from the signed checkpoint: records were rewritten and re-chained`,
      });
    }
  }

  if (trusted) {
    if (trusted.size > committed) {
      return report({
        code: VerifyCode.ROLLBACK,
        first_bad_seq: committed + 1,
        message: `the trusted checkpoint covers ${trusted.size} records but the log now has ${committed}: the log was rolled back`,
      });
    }
    if (!matches(trusted)) {
      const signedLater = valid.some((v) => v.cp.size >= trusted.size);
      return report({
        code: signedLater ? VerifyCode.FORK : VerifyCode.ROLLBACK,
        first_bad_seq: provenBelow(trusted.size) + 1,
        message: signedLater
          ? `the log's signed checkpoints are not consistent with the trusted checkpoint of size ${trusted.size}: the log forked`
          : `the first ${trusted.size} records no longer match the trusted checkpoint: the log was rolled back and rewritten`,
      });
    }
  }

  if (torn) {
    return report(
      {
        code: VerifyCode.TORN_TAIL,
        first_bad_seq: n,
        message: `the final record ${n} is incomplete (a crash during append, not tampering); records 1..${n - 1} are intact`,
      },
      n - 1,
    );
  }
  const newest = sorted.at(-1)?.cp.size ?? 0;
  const tail = n - newest;
  return report({
    code: VerifyCode.INTACT,
    first_bad_seq: null,
    message:
      `${n} records intact` +
      (valid.length === 0
        ? '; no checkpoint: the whole log could have been rewritten or cut without detection'
        : tail > 0
          ? `; the ${tail} record(s) after the newest checkpoint could vanish without detection`
          : '; every record is covered by a checkpoint'),
  });
}

/** Seq analysis and hash-chain analysis; the torn final record is left to the caller. */
function recordStructure(scan: ScanResult, torn: boolean): Found | null {
  const n = scan.n;
  const last = torn ? n - 1 : n;
  const unreadable = new Set(scan.unreadable);
  let seqPos = 0;
  for (let k = 1; k <= last; k++) {
    if (scan.seqs[k - 1] !== k && !unreadable.has(k)) {
      seqPos = k;
      break;
    }
  }
  const firstBroken = scan.broken.find((k) => k <= last) ?? 0;
  const firstUnreadable = scan.unreadable.find((k) => k <= last) ?? 0;
  const chainPos = Math.min(firstBroken || Infinity, firstUnreadable || Infinity);
  const chain = Number.isFinite(chainPos) ? chainPos : 0;
  if (seqPos > 0 && (chain === 0 || seqPos <= chain + 1)) {
    const s = scan.seqs[seqPos - 1]!;
    if (s < seqPos) {
      return {
        code: VerifyCode.INSERTED,
        first_bad_seq: s,
        message: `the record at position ${seqPos} repeats seq ${s}: a record was inserted`,
      };
    }
    for (let j = seqPos; j < n; j++) {
      const later = scan.seqs[j]!;
      if (later >= seqPos && later < s) {
        return {
          code: VerifyCode.REORDERED,
          first_bad_seq: seqPos,
          message: `seq ${later} appears after seq ${s}: records are out of order`,
        };
      }
    }
    const gap = s - 1 === seqPos ? `seq ${seqPos} is` : `seqs ${seqPos}..${s - 1} are`;
    return {
      code: VerifyCode.DELETED,
      first_bad_seq: seqPos,
      message: `${gap} missing: records were deleted`,
    };
  }
  if (chain === 0) return null;
  if (unreadable.has(chain)) {
    return {
      code: VerifyCode.MODIFIED,
      first_bad_seq: chain,
      message: `record ${chain} is not a readable record: its bytes were changed`,
    };
  }
  // A content edit of record j breaks only the link into j + 1; an edit of j's own prev_hash breaks
  // the links into j and j + 1. The genesis link has no earlier record to blame.
  const doubled = chain < last && scan.broken.includes(chain + 1);
  const bad = chain === 1 || doubled ? chain : chain - 1;
  return {
    code: VerifyCode.MODIFIED,
    first_bad_seq: bad,
    message: `the hash chain breaks at record ${chain}: record ${bad} was modified`,
  };
}

interface Keys {
  ok: true;
  /** The log keys signatures are checked with: anchored ones, else the claimed ones. */
  log: NoteVerifier[];
  logTrust: LogKeyTrust;
  witness: NoteVerifier[];
  /** Claimed witness keys that are not also trusted. */
  claimed: NoteVerifier[];
  isTrustedWitness(s: { name: string; keyId: number }): boolean;
}

function parseKeys(
  input: Omit<VerifyInput, 'records'>,
): Keys | { ok: false; log: NoteVerifier[]; message: string } {
  const parsed: NoteVerifier[][] = [];
  const lists = [
    [input.logKeys ?? [], SigType.ed25519, ''],
    [input.claimedLogKeys ?? [], SigType.ed25519, "the bundle's "],
    [input.witnessKeys ?? [], SigType.cosignature_v1, ''],
    [input.claimedWitnessKeys ?? [], SigType.cosignature_v1, "the bundle's "],
  ] as const;
  for (const [list, want, whose] of lists) {
    const into: NoteVerifier[] = [];
    for (const k of list) {
      const v = parseVerifierKey(k);
      if (!v.ok)
        return {
          ok: false,
          log: [],
          message: `${whose}verifier key ${quote(k, 40)} is invalid: ${v.failure}`,
        };
      if (v.value.type !== want)
        return {
          ok: false,
          log: [],
          message: `${whose}verifier key ${signatureKeyLabel(v.value)} has the wrong signature type`,
        };
      into.push(v.value);
    }
    parsed.push(into);
  }
  const [anchored = [], claimedLog = [], witness = [], claimedWitness = []] = parsed;
  const same = (a: NoteVerifier, b: NoteVerifier): boolean =>
    a.name === b.name && a.keyId === b.keyId && a.publicKey.equals(b.publicKey);
  const log = anchored.length > 0 ? anchored : claimedLog;
  const logTrust: LogKeyTrust =
    anchored.length > 0 ? 'anchored' : claimedLog.length > 0 ? 'claimed' : 'none';
  // The same key given by the auditor and named by the bundle is one trusted key, not two.
  const claimed = claimedWitness.filter(
    (c, i) => !witness.some((w) => same(w, c)) && claimedWitness.findIndex((o) => same(o, c)) === i,
  );
  return {
    ok: true,
    log,
    logTrust,
    witness,
    claimed,
    isTrustedWitness: (s) => witness.some((w) => w.name === s.name && w.keyId === s.keyId),
  };
}

/**
 * Why an INTACT report proves less than it seems, or null. INTACT alone says the records agree with
 * each other; they are anchored only when a checkpoint covers them and its signature was checked
 * against a log key the auditor gave. Without that, whoever could rewrite the log could have
 * rewritten it consistently, so no report may show a pass beside this reason. Null for a damaged
 * log too: its code already says it failed.
 */
export function unanchoredReason(r: VerifyReport): string | null {
  if (!r.ok) return null;
  if (r.checkpoints === 0)
    return 'no checkpoint covers them: the whole log could have been rewritten or cut without detection';
  // A cosignature by a witness the auditor named anchors the checkpoint as well as the log key.
  if (r.log_key === 'anchored' || r.witnessed_size > 0) return null;
  if (r.log_key === 'none')
    return 'checkpoint signatures were not checked (no log key given): whoever can rewrite the ledger can rewrite its checkpoints too';
  return "the checkpoints are signed by the bundle's own key, not one you gave: whoever rewrites a bundle can replace it";
}
