// candor audit verify|export|decrypt|keygen — argv to ledger/chain calls and an exit code.
//   verify PATH [--log-key K] [--witness-key K] [--trusted CHECKPOINT] [--json]
//          PATH is a bundle file or a ledger URL (sqlite:…, postgres://…); exit 0 only when INTACT.
//          Only keys given here are trusted: a bundle's own keys are reported as claimed.
//   export --ledger URL --out FILE [--sign-key FILE] [--log-key K] [--witness-key K] [--checkpoint FILE]
//   decrypt PATH --key FILE [--json]     opens the sealed payloads of a bundle with the auditor key
//   keygen --kind seal|log|witness --name NAME --out FILE   writes the secret key, prints the public one
// Keys (K) are verifier key strings or files holding one per line (a trust file; '#' starts a
// comment line); several may be comma-separated.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { readBundle, verifyBundle } from '../../ledger/chain/bundle.js';
import { verifyBundleFile } from '../../ledger/chain/bundle-file.js';
import { exportBundle, verifyStore } from '../../ledger/chain/export.js';
import { capLine, quote, quotePath } from '../../core/quote.js';
import type { StoredEvent } from '../../ledger/events.js';
import {
  SigType,
  generateKey,
  parseSignerKey,
  parseVerifierKey,
  signatureKeyLabel,
} from '../../ledger/chain/note.js';
import { unanchoredReason, type VerifyReport } from '../../ledger/chain/verify.js';
import { openLedger } from '../../ledger/open.js';
import {
  decodeSealPrivateKey,
  encodeSealPrivateKey,
  encodeSealPublicKey,
  generateSealKeyPair,
  isSealedPayload,
  openPayload,
} from '../../ledger/seal.js';
import { ledgerUrlFrom } from '../config-ledger.js';
import { checkOutputPath, Exit, CliUsageError, parseFlags, type CommandIo } from '../io.js';

const VERIFY_USAGE =
  'candor audit verify PATH [--log-key KEY] [--witness-key KEY] [--trusted CHECKPOINT] [--json]';
const EXPORT_USAGE =
  'candor audit export [--config FILE | --ledger URL] --out FILE [--sign-key FILE] [--log-key KEY] [--witness-key KEY] [--checkpoint FILE]';
const STATUS_USAGE = 'candor audit status [--ledger URL]';
const USAGE = `usage: ${VERIFY_USAGE} | ${EXPORT_USAGE} | ${STATUS_USAGE} | candor audit decrypt PATH --key FILE [--json] | candor audit keygen --kind seal|log|witness --name NAME --out FILE`;

export async function run(args: string[], io: CommandIo): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'verify':
      return verify(rest, io);
    case 'export':
      return exportCmd(rest, io);
    case 'decrypt':
      return decrypt(rest, io);
    case 'keygen':
      return keygen(rest, io);
    case 'status':
      return status(rest, io);
    default:
      throw new CliUsageError(USAGE);
  }
}

const isLedgerUrl = (p: string): boolean => /^(sqlite:|memory:|postgres(ql)?:\/\/)/.test(p);

/** Verifier keys from `--log-key a,b` where each item is a key string or a file holding keys. */
export function readKeys(value: string | boolean | undefined): string[] {
  if (typeof value !== 'string') return [];
  return value.split(',').flatMap((item) => {
    const t = item.trim();
    if (t.includes('+')) return [t];
    if (!existsSync(t))
      throw new CliUsageError(`key ${JSON.stringify(t)} is neither a key nor a file`);
    return readFileSync(t, 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l.length > 0 && !l.startsWith('#'));
  });
}

/**
 * The keys of `--log-key` / `--witness-key`, each parsed and of the right kind: a malformed key, or
 * a witness key given as a log key (or the reverse), is a usage error naming the flag — never a
 * verdict on the bundle.
 */
export function verifierKeys(
  flag: 'log-key' | 'witness-key',
  value: string | boolean | undefined,
): { strings: string[]; labels: string[] } {
  const want = flag === 'log-key' ? SigType.ed25519 : SigType.cosignature_v1;
  const strings = readKeys(value);
  const labels = strings.map((k) => {
    const v = parseVerifierKey(k);
    if (!v.ok)
      throw new CliUsageError(`--${flag}: ${quote(k, 40)} is not a verifier key: ${v.failure}`);
    if (v.value.type !== want) {
      throw new CliUsageError(
        flag === 'log-key'
          ? `--log-key: ${signatureKeyLabel(v.value)} is a witness (cosignature) key; pass it with --witness-key`
          : `--witness-key: ${signatureKeyLabel(v.value)} is a log (Ed25519) key; pass it with --log-key`,
      );
    }
    return signatureKeyLabel(v.value);
  });
  return { strings, labels };
}

/** `--trusted`: a checkpoint is UTF-8 text; other bytes are named as such, not as a bad signature. */
function readTrusted(path: string): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch {
    throw new CliUsageError(`cannot read trusted checkpoint ${quotePath(path)}`);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new CliUsageError(
      `--trusted: ${quotePath(path)} is not valid UTF-8 text, so it is not a checkpoint (its signature was not checked)`,
    );
  }
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    throw new CliUsageError(`cannot read ${what} ${JSON.stringify(path)}`);
  }
}

const LOG_KEY_LINE: Record<VerifyReport['log_key'], string> = {
  anchored:
    'log key: anchored (given with --log-key): checkpoint signatures prove the log signed them',
  claimed:
    'log key: claimed by the bundle, not trusted: signatures checked for self-consistency only (whoever rewrites a bundle can replace its key); pass --log-key to anchor it',
  none: 'log key: none: checkpoint signatures NOT checked; roots still compared (pass --log-key)',
};

/**
 * The log key line. "Signatures prove" is said only where a signature proved something: a
 * checkpoint was verified with the auditor's key over a log that is intact.
 */
function logKeyLine(r: VerifyReport): string {
  if (r.log_key !== 'anchored' || (r.ok && r.checkpoints > 0)) return LOG_KEY_LINE[r.log_key];
  return r.ok
    ? 'log key: anchored (given with --log-key), but no checkpoint was verified with it: nothing here is signed'
    : `log key: anchored (given with --log-key), but the log is damaged (${r.code}): ${r.checkpoints === 0 ? 'no checkpoint was verified with it' : 'its signatures vouch only for the checkpoints counted above, not for the damaged records'}`;
}

interface GivenKeys {
  log: string[];
  witness: string[];
}

function printReport(r: VerifyReport, json: boolean, io: CommandIo, given: GivenKeys): number {
  const unanchored = unanchoredReason(r);
  if (json) {
    io.out(
      `${JSON.stringify({ ...r, anchored: r.ok && unanchored === null, keys_given: given }, null, 2)}\n`,
    );
    return r.ok ? Exit.ok : Exit.check_failed;
  }
  // INTACT is printed only as a pass; records that agree but nothing anchors are UNANCHORED.
  io.out(
    unanchored === null
      ? `${r.code}${r.first_bad_seq === null ? '' : ` at seq ${r.first_bad_seq}`}: ${r.message}\n`
      : `UNANCHORED: the hash chain of ${r.size} record(s) is consistent, but ${unanchored}\n`,
  );
  io.out(
    `size ${r.size}, root ${r.root || '-'}, ${r.checkpoints} checkpoint(s)${r.ok ? '' : ' verified before the damage'}\n`,
  );
  io.out(
    `keys given: --log-key ${given.log.length > 0 ? given.log.join(', ') : 'none'}; --witness-key ${given.witness.length > 0 ? given.witness.join(', ') : 'none'}\n`,
  );
  io.out(`${logKeyLine(r)}\n`);
  io.out(
    r.witnessed_by.length > 0
      ? `witnessed up to ${r.witnessed_size} by ${r.witnessed_by.join(', ')} (trusted: given with --witness-key)\n`
      : `witnessed up to 0: no cosignature from a witness given with --witness-key\n`,
  );
  if (r.claimed_witnesses.length > 0) {
    io.out(
      `witness key(s) claimed by the bundle, not trusted: ${r.claimed_witnesses.join(', ')}` +
        (r.claimed_witnessed_size > 0
          ? ` (they would vouch up to ${r.claimed_witnessed_size}; pass a key with --witness-key only if you trust it)`
          : '') +
        '\n',
    );
  }
  if (r.ignored_signatures.length > 0) {
    const where = r.ignored_signatures.map(
      (s) =>
        `${s.key} (${s.checkpoint_seq === null ? 'bundle checkpoint' : `seq ${s.checkpoint_seq}`})`,
    );
    io.out(`ignored ${where.length} signature line(s) from unknown keys: ${where.join(', ')}\n`);
  }
  return r.ok ? Exit.ok : Exit.check_failed;
}

async function verify(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    trusted: 'string',
    json: 'boolean',
    'log-key': 'string',
    'witness-key': 'string',
  });
  const [path] = positional;
  if (path === undefined || positional.length > 1)
    throw new CliUsageError(`usage: ${VERIFY_USAGE}`);
  const log = verifierKeys('log-key', flags['log-key']);
  const witness = verifierKeys('witness-key', flags['witness-key']);
  const given: GivenKeys = { log: log.labels, witness: witness.labels };
  const logKeys = log.strings;
  // No --log-key: a bundle's own key is used for self-consistency only (reported as claimed).
  const opts = {
    ...(logKeys.length > 0 ? { logKeys } : {}),
    witnessKeys: witness.strings,
    ...(typeof flags.trusted === 'string' ? { trusted: readTrusted(flags.trusted) } : {}),
  };
  if (isLedgerUrl(path)) {
    const opened = await openLedger(path, { readOnly: true });
    if (!opened.ok) {
      io.err(`candor audit verify: ${opened.failure.message}\n`);
      return opened.failure.code === 'BAD_URL' ? Exit.usage : Exit.environment;
    }
    try {
      return printReport(await verifyStore(opened.value, opts), flags.json === true, io, given);
    } finally {
      await opened.value.close();
    }
  }
  if (!existsSync(path)) {
    io.err(`candor audit verify: no such bundle ${JSON.stringify(path)}\n`);
    return Exit.environment;
  }
  if (statSync(path).isDirectory()) {
    io.err(`candor audit verify: ${JSON.stringify(path)} is a directory, not a bundle file\n`);
    return Exit.environment;
  }
  return printReport(await verifyBundleFile(path, opts), flags.json === true, io, given);
}

/**
 * `audit status`: the newest checkpoint stored in the ledger and what its witness said. Exit 1 when
 * the witness reported a possible fork or rollback (it has cosigned a larger tree of this log).
 */
async function status(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, { ledger: 'string' });
  if (positional.length > 0) throw new CliUsageError(`usage: ${STATUS_USAGE}`);
  const opened = await openLedger(typeof flags.ledger === 'string' ? flags.ledger : undefined, {
    readOnly: true,
  });
  if (!opened.ok) {
    io.err(`candor audit status: ${opened.failure.message}\n`);
    return opened.failure.code === 'BAD_URL' ? Exit.usage : Exit.environment;
  }
  try {
    let last: Extract<StoredEvent, { kind: 'checkpoint' }> | null = null;
    let fork: Extract<StoredEvent, { kind: 'checkpoint' }> | null = null;
    for (let from = 1; ;) {
      const page = await opened.value.read(from, 5_000);
      for (const e of page) {
        if (e.kind !== 'checkpoint') continue;
        last = e;
        if (e.data.witness_problem_code === 'fork') fork = e;
      }
      if (page.length < 5_000) break;
      from = page.at(-1)!.seq + 1;
    }
    if (!last) {
      io.out('no checkpoint stored in this ledger\n');
      return Exit.ok;
    }
    const d = last.data;
    io.out(
      `newest checkpoint: seq ${last.seq}, size ${d.size}, ${d.witnessed === true ? 'witnessed' : d.witnessed === false ? `NOT witnessed (${d.witness_problem_code ?? 'problem'}: ${capLine(d.witness_problem ?? '', 160)})` : 'no witness configured'}\n`,
    );
    if (fork) {
      io.out(
        `POSSIBLE FORK OR ROLLBACK: the witness has cosigned a tree of size ${fork.data.witness_size ?? '?'} of this log; the checkpoint at seq ${fork.seq} has size ${fork.data.size}\n`,
      );
      return Exit.check_failed;
    }
    return Exit.ok;
  } finally {
    await opened.value.close();
  }
}

async function exportCmd(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    ledger: 'string',
    config: 'string',
    out: 'string',
    'sign-key': 'string',
    'log-key': 'string',
    'witness-key': 'string',
    checkpoint: 'string',
  });
  if (positional.length > 0 || typeof flags.out !== 'string') {
    throw new CliUsageError(`usage: ${EXPORT_USAGE}`);
  }
  checkOutputPath('out', flags.out);
  let signer;
  if (typeof flags['sign-key'] === 'string') {
    const s = parseSignerKey(readText(flags['sign-key'], 'signing key').trim());
    if (!s.ok || s.value.type !== SigType.ed25519)
      throw new CliUsageError(`--sign-key: ${s.ok ? 'not an Ed25519 log key' : s.failure}`);
    signer = s.value;
  }
  const logKey = readKeys(flags['log-key'])[0];
  const url = await ledgerUrlFrom(flags);
  const opened = await openLedger(url, { mustExist: true });
  if (!opened.ok) {
    io.err(`candor audit export: ${opened.failure.message}\n`);
    return Exit.environment;
  }
  try {
    const summary = await exportBundle(opened.value, flags.out, {
      ...(signer ? { signer } : {}),
      ...(logKey ? { logKey } : {}),
      witnessKeys: readKeys(flags['witness-key']),
      checkpoints:
        typeof flags.checkpoint === 'string' ? [readText(flags.checkpoint, 'checkpoint')] : [],
    });
    io.out(
      `exported ${summary.records} records and ${summary.checkpoints} checkpoint(s) to ${flags.out}: ` +
        `${summary.inside_ledger} inside the ledger, ${summary.alongside} alongside` +
        `${summary.signed_now ? ' (1 signed now over every record)' : ''}\n`,
    );
    if (summary.dropped_checkpoints > 0)
      io.err(
        `warning: dropped ${summary.dropped_checkpoints} checkpoint(s) signed by no listed key\n`,
      );
    if (summary.mismatched.length > 0) {
      io.err(
        `warning: stored bytes of seq ${summary.mismatched.join(', ')} are not canonical; the bundle carries their canonical form\n`,
      );
      return Exit.check_failed;
    }
    return Exit.ok;
  } finally {
    await opened.value.close();
  }
}

/** Every sealed payload inside a JSON value, with a JSON-pointer-like path. */
function findSealed(v: unknown, path: string, out: { path: string; payload: unknown }[]): void {
  if (isSealedPayload(v)) out.push({ path, payload: v });
  else if (Array.isArray(v)) v.forEach((x, i) => findSealed(x, `${path}/${i}`, out));
  else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) findSealed(x, `${path}/${k}`, out);
  }
}

async function decrypt(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, { key: 'string', json: 'boolean' });
  const [path] = positional;
  if (path === undefined || positional.length > 1 || typeof flags.key !== 'string') {
    throw new CliUsageError('usage: candor audit decrypt PATH --key FILE [--json]');
  }
  const sk = decodeSealPrivateKey(readText(flags.key, 'key file'));
  if (!sk.ok) throw new CliUsageError(`--key: ${sk.failure}`);
  if (!existsSync(path)) {
    io.err(`candor audit decrypt: no such bundle ${JSON.stringify(path)}\n`);
    return Exit.environment;
  }
  const bundle = await readBundle(path);
  const check = verifyBundle(bundle);
  if (!check.ok) io.err(`warning: the bundle does not verify (${check.code}): ${check.message}\n`);
  let failed = 0;
  for (const bytes of bundle.records) {
    let rec: { seq?: unknown; data?: unknown; operation_id?: unknown };
    try {
      rec = JSON.parse(bytes.toString('utf8')) as typeof rec;
    } catch {
      continue;
    }
    if (typeof rec.seq !== 'number') continue;
    const found: { path: string; payload: unknown }[] = [];
    findSealed(rec.data, '/data', found);
    for (const f of found) {
      const opened = openPayload(
        sk.value,
        f.payload as Parameters<typeof openPayload>[1],
        rec.seq,
        rec,
      );
      if (!opened.ok) failed++;
      const line = opened.ok
        ? { seq: rec.seq, path: f.path, ok: true, plaintext: opened.value.toString('utf8') }
        : { seq: rec.seq, path: f.path, ok: false, error: opened.failure };
      io.out(
        flags.json
          ? `${JSON.stringify(line)}\n`
          : `seq ${rec.seq} ${f.path}: ${'plaintext' in line ? line.plaintext : `cannot open (${line.error})`}\n`,
      );
    }
  }
  return failed > 0 ? Exit.check_failed : Exit.ok;
}

async function keygen(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, { kind: 'string', name: 'string', out: 'string' });
  const kind = flags.kind;
  if (
    positional.length > 0 ||
    typeof flags.out !== 'string' ||
    (kind !== 'seal' && kind !== 'log' && kind !== 'witness')
  ) {
    throw new CliUsageError(
      'usage: candor audit keygen --kind seal|log|witness --name NAME --out FILE',
    );
  }
  let secret: string;
  let pub: string;
  let label: string;
  if (kind === 'seal') {
    const kp = generateSealKeyPair();
    secret = encodeSealPrivateKey(kp.privateKey);
    pub = encodeSealPublicKey(kp.publicKey);
    label = `seal key pair (HPKE X25519): the auditor's private key is in ${flags.out} (keep it off the gateway); public key for audit.seal_to:`;
  } else {
    if (typeof flags.name !== 'string')
      throw new CliUsageError('--name is required for log and witness keys');
    const k = generateKey(flags.name, kind === 'log' ? SigType.ed25519 : SigType.cosignature_v1);
    secret = k.signerKey;
    pub = k.verifierKey;
    label =
      kind === 'log'
        ? `log key ${flags.name} (Ed25519): the signing key is in ${flags.out} (for audit.log_key_file); verifier key for auditors (--log-key) and witnesses:`
        : `witness key ${flags.name} (cosignature/v1): the signing key is in ${flags.out} (for candor witness serve --key); verifier key for audit.witness_key and auditors (--witness-key):`;
  }
  await writeFile(flags.out, `${secret}\n`, { mode: 0o600, flag: 'wx' }).catch(
    (err: NodeJS.ErrnoException) => {
      throw new CliUsageError(
        err.code === 'EEXIST'
          ? `${flags.out} exists; refusing to overwrite a key`
          : `cannot write ${flags.out}`,
      );
    },
  );
  // The label goes to stderr so that stdout stays exactly one key (scripts capture it).
  io.err(`${label}\n`);
  io.out(`${pub}\n`);
  return Exit.ok;
}
