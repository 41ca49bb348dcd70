// C2SP tlog-checkpoint (c2sp.org/tlog-checkpoint): a signed note whose text is the origin line, the
// tree size in decimal, the base64 RFC 9162 root hash, then optional non-empty extension lines.
// The log signs with an Ed25519 note key (type 0x01); witnesses add timestamped cosignatures
// (type 0x04, c2sp.org/tlog-cosignature) over the same text.
import { quote } from '../../core/quote.js';
import {
  SigType,
  formatSignatureLine,
  openNote,
  parseNote,
  signNote,
  strictBase64,
  type NoteSigner,
  type NoteSignature,
  type NoteVerifier,
  type Result,
} from './note.js';

export interface Checkpoint {
  origin: string;
  size: number;
  /** 32-byte RFC 9162 root hash. */
  root: Buffer;
  extensions: string[];
}

const fail = (failure: string): { ok: false; failure: string } => ({ ok: false, failure });

export function formatCheckpoint(cp: Checkpoint): string {
  return [cp.origin, String(cp.size), cp.root.toString('base64'), ...cp.extensions]
    .map((l) => `${l}\n`)
    .join('');
}

/** Parses the note text of a checkpoint (not the signatures). */
export function parseCheckpointText(text: string): Result<Checkpoint> {
  if (!text.endsWith('\n')) return fail('checkpoint text must end with a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) return fail('checkpoint needs origin, size and root hash lines');
  const [origin, sizeLine, rootLine, ...extensions] = lines as [
    string,
    string,
    string,
    ...string[],
  ];
  if (origin.length === 0) return fail('checkpoint origin is empty');
  if (!/^(0|[1-9][0-9]*)$/.test(sizeLine)) return fail('checkpoint size is not a decimal');
  const size = Number(sizeLine);
  if (!Number.isSafeInteger(size)) return fail('checkpoint size is too large');
  const root = strictBase64(rootLine);
  if (!root || root.length !== 32) return fail('checkpoint root hash is not 32 bytes of base64');
  if (extensions.some((e) => e.length === 0))
    return fail('checkpoint extension lines must be non-empty');
  return { ok: true, value: { origin, size, root, extensions } };
}

/** Signs a checkpoint with the log key; the key name should equal the origin. */
export function signCheckpoint(cp: Checkpoint, log: NoteSigner): Result<string> {
  if (log.type !== SigType.ed25519) return fail('the log key must be an Ed25519 (type 0x01) key');
  return signNote(formatCheckpoint(cp), [log]);
}

/** A cosignature line from a witness key (type 0x04) over a checkpoint note's text. */
export function cosignatureLine(checkpointText: string, witness: NoteSigner): Result<string> {
  if (witness.type !== SigType.cosignature_v1) {
    return fail('a witness key must be a cosignature/v1 (type 0x04) key');
  }
  return {
    ok: true,
    value: formatSignatureLine({
      name: witness.name,
      keyId: witness.keyId,
      sig: witness.sign(checkpointText),
    }),
  };
}

export interface OpenedCheckpoint {
  checkpoint: Checkpoint;
  text: string;
  /** Names of witness keys (type 0x04) whose cosignatures verified. */
  witnessed_by: string[];
  /** The cosignatures (type 0x04) that verified, to tell trusted witnesses from claimed ones. */
  cosigners: NoteSignature[];
  /** Cosignature timestamps (seconds) by witness name. */
  cosigned_at: Record<string, number>;
  unknown: NoteSignature[];
}

export interface OpenCheckpointOptions {
  /** The origin the caller expects; a different origin is rejected. */
  origin?: string;
}

/**
 * Opens a checkpoint note: it must carry a valid signature from one of the log keys (type 0x01)
 * among `verifiers`; every signature from a known witness key must verify too; signatures from
 * unknown keys are ignored (returned in `unknown`).
 */
export function openCheckpoint(
  note: string,
  verifiers: readonly NoteVerifier[],
  opts: OpenCheckpointOptions = {},
): Result<OpenedCheckpoint> {
  const opened = openNote(note, verifiers);
  if (!opened.ok) return opened;
  const cp = parseCheckpointText(opened.value.text);
  if (!cp.ok) return cp;
  if (opts.origin !== undefined && cp.value.origin !== opts.origin) {
    return fail(
      `checkpoint origin ${quote(cp.value.origin)} is not the expected ${quote(opts.origin)}`,
    );
  }
  const kindOf = (s: NoteSignature): number | undefined =>
    verifiers.find((v) => v.name === s.name && v.keyId === s.keyId)?.type;
  const logSigned = opened.value.verified.some((s) => kindOf(s) === SigType.ed25519);
  if (!logSigned) return fail('checkpoint has no valid signature from a log key');
  const witnesses = opened.value.verified.filter((s) => kindOf(s) === SigType.cosignature_v1);
  const cosigned_at: Record<string, number> = {};
  for (const w of witnesses) cosigned_at[w.name] = Number(w.sig.readBigUInt64BE(0));
  return {
    ok: true,
    value: {
      checkpoint: cp.value,
      text: opened.value.text,
      witnessed_by: witnesses.map((w) => w.name),
      cosigners: witnesses,
      cosigned_at,
      unknown: opened.value.unknown,
    },
  };
}

/** Reads the checkpoint fields of a note without checking any signature (for reporting). */
export function peekCheckpoint(note: string): Result<Checkpoint> {
  const n = parseNote(note);
  return n.ok ? parseCheckpointText(n.value.text) : n;
}
