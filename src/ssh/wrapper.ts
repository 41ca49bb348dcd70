// The remote half of the SSH marker protocol (DESIGN.md §4): a small POSIX sh script that keys a
// durable marker by operation id, claims it exclusively (`mkdir`) BEFORE the command runs, records
// `start` and `done <exit status>`, and on a second run with the same id reports the recorded
// result instead of running again. The client half (building the request, parsing the report)
// lives here too so that both sides of the protocol change together.
//
// Invocation: the exec string is always the same text, `sh -c '<script>' candor-wrap`; nothing
// that varies per call is on a command line. The request travels on the channel's stdin and ends
// with EOF: the first line is the nonce, the rest is sh assignments (single-quoted values) ending
// with `# end <nonce>` (a request cut short is refused). Secret inputs are exported only in the
// subshell that execs the command (and the check): they reach it through its environment, never
// argv, and other users cannot read another user's /proc/PID/environ. The nonce lives only in the
// wrapper's memory (not in argv, not exported), so the command cannot learn it from
// /proc/$PPID/cmdline or environ. Limit: a command running as the same user with ptrace rights
// over its parent (kernel.yama.ptrace_scope=0) could still read the wrapper's memory.
//
// Report format (stdout of the wrapper; the command's own output is captured to files and framed,
// so it can never be mistaken for a status line). Every status line starts with
// `CANDOR-WRAP/1 <nonce> `:
//   ran                                    the command ran in this call
//   existing completed <status> <ts>       an earlier call ran it (frames follow)
//   existing started <ts> <pid> <child> <alive|gone>   an earlier call started it, no `done` record
//   existing claimed                       marker exists, command not yet started by its claimant
//   marker absent|claimed|started…|completed…          reconcile mode, same fields
//   converged_before                       set_state: the check passed, the command did not run
//   check <status>                         set_state / check mode: the check's exit status
//   stdout <n> <total> / stderr <n> <total>   followed by exactly n bytes and one newline; total is
//                                          what the command wrote (bytes past the cap are dropped)
//   error <code> [<detail>]                the wrapper refused before running anything
//   exit <status>                          last line; the wrapper's own exit status
import type { MarkerState } from '../core/transport.js';

/** Exit status of the wrapper when it refused before running the command. */
export const WRAPPER_REFUSED_STATUS = 70;
/** Exit status of the wrapper when an earlier call started the operation but left no result. */
export const WRAPPER_IN_PROGRESS_STATUS = 75;
export const WRAPPER_PROTOCOL = 'CANDOR-WRAP/1';

/** Names of the environment variables that carry secret inputs to the command. */
export const SECRET_ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** Default cap on the stdout and stderr kept from one command (the rest is counted and dropped). */
export const DEFAULT_OUTPUT_CAP = 1024 * 1024;

// POSIX sh (dash, busybox, bash), written without `${` so that String.raw keeps it verbatim.
// `kill -0` and /proc boot_id give liveness (a zombie counts as gone; a recorded boot id that differs
// from the current one means every recorded process is gone, whatever pids were reused since). A
// process whose /proc entry cannot be read counts as alive while `kill -0` still reaches it (a host
// without /proc), and as gone once it does not: its parent reaped it between the two reads. The
// marker also records each process's start time (/proc/PID/stat field 22, `-` without /proc): a
// live process under a recorded pid that started at another time is a reused pid, so the recorded
// one is gone. Markers written before the start time was recorded are read as before.
// Marker directories: every component of the path is checked without following symlinks — a
// symlink anywhere is refused; ancestors belong to the user or root and nobody else can write them
// (a world-writable ancestor only with the sticky bit, like /tmp); the marker directory itself and
// each operation directory belong to the user and nobody else can write them (no ACL either).
export const WRAPPER_SCRIPT = String.raw`
unset N P B mode dir op cap cmd chk
set -f
U=$(umask); umask 077
IFS= read -r N || exit 70
case $N in ''|*[!0-9a-f]*) exit 70;; esac
P="CANDOR-WRAP/1 $N"
say() { printf '%s %s\n' "$P" "$*"; }
no() { say error "$@"; say exit 70; exit 70; }
B=$(cat)
case $B in *"
# end $N") ;; *) no bad_request;; esac
senv() { :; }
eval "$B"
unset B
case $cap in ''|*[!0-9]*) no bad_request;; esac
need='date wc tr cat dd mkdir mv rm rmdir ls id sed'
case $mode in read|converge) need="$need mktemp";; esac
miss=
for t in $need; do command -v "$t" >/dev/null 2>&1 || miss="$miss,$t"; done
[ -z "$miss" ] || no missing_tools "$miss"
uid=$(id -u)
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
boot() { k=-; read -r k </proc/sys/kernel/random/boot_id 2>/dev/null; echo "$k"; }
size() { k=$(wc -c <"$1"); echo $((k)); }
emit() {
  q=$(($2 / 4096)); r=$(($2 % 4096))
  dd if="$1" bs=4096 count="$q" 2>/dev/null
  dd if="$1" bs=1 skip=$((q * 4096)) count="$r" 2>/dev/null
}
frame() {
  t=
  if [ -f "$2.size" ]; then read -r t <"$2.size"; fi
  case $t in ''|*[!0-9]*) t=$(size "$2");; esac
  n=$t; [ "$n" -le "$cap" ] || n=$cap
  say "$1" "$n" "$t"
  emit "$2" "$n"
  printf '\n'
}
trim() {
  n=$(size "$1"); printf '%s\n' "$n" >"$1.size"
  if [ "$n" -gt "$cap" ]; then emit "$1" "$cap" >"$1.cut" && mv "$1.cut" "$1"; fi
}
runc() { ( senv; umask "$U"; exec sh -c -- "$1" ) </dev/null; }
pst() {
  k=-
  if [ -r "/proc/$1/stat" ]; then
    set -- $(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null)
    if [ $# -ge 20 ]; then shift 19; k=$1; fi
  fi
  echo "$k"
}
live() {
  b=$1; shift
  if [ "$b" != "$(boot)" ]; then echo gone; return; fi
  while [ $# -ge 2 ]; do
    p=$1; s=$2; shift 2
    case $p in ''|*[!0-9]*) continue;; esac
    kill -0 "$p" 2>/dev/null || continue
    z=$(sed -n 's/^.*) \(.\).*/\1/p' "/proc/$p/stat" 2>/dev/null)
    [ -n "$z" ] || kill -0 "$p" 2>/dev/null || continue
    [ "$z" != Z ] || continue
    case $s in ''|-|*[!0-9]*) ;; *) [ "$(pst "$p")" = "$s" ] || continue;; esac
    echo alive; return
  done
  echo gone
}
ck() {
  if [ -L "$1" ]; then return 2; fi
  [ -e "$1" ] || return 1
  [ -d "$1" ] || return 3
  s=$2
  set -- $(LC_ALL=C ls -ldn -- "$1" 2>/dev/null)
  case $1 in d*) ;; *) return 2;; esac
  case $1 in ??????????+*) return 2;; esac
  if [ "$3" != "$uid" ]; then [ "$s" = 0 ] && [ "$3" = 0 ] || return 2; fi
  case $1 in ?????w*|????????w*)
    [ "$s" = 0 ] || return 2
    case $1 in ?????????[tT]*) ;; *) return 2;; esac;;
  esac
  return 0
}
walk() {
  cr=$2; p=; i=0
  IFS=/; set -- $1; unset IFS
  for c in "$@"; do
    case $c in .|..) return 2;; esac
    [ -n "$c" ] && i=$((i + 1))
  done
  [ "$i" -gt 0 ] || return 2
  for c in "$@"; do
    [ -n "$c" ] || continue
    p=$p/$c; i=$((i - 1)); s=0
    [ "$i" = 0 ] && s=1
    ck "$p" "$s"; r=$?
    if [ "$r" = 1 ]; then
      [ "$cr" = 1 ] || return 1
      mkdir -m 700 "$p" 2>/dev/null || [ -d "$p" ] || return 3
      ck "$p" "$s" || return 2
    elif [ "$r" != 0 ]; then return "$r"; fi
  done
}
mk() {
  case $op in ''|.*|*[!A-Za-z0-9_.-]*) no bad_operation_id;; esac
  if [ -z "$dir" ] && [ -n "$XDG_STATE_HOME" ]; then dir=$XDG_STATE_HOME/candor/ops; fi
  case $dir in
  /*) ;;
  *)
    h=$(cd "$HOME" 2>/dev/null && pwd -P) || no marker_unavailable home
    if [ -z "$dir" ]; then dir=$h/.local/state/candor/ops; else dir=$h/$dir; fi;;
  esac
  walk "$dir" "$1"
  case $? in 0) ;; 1) return 1;; 3) no marker_unavailable;; *) no marker_unsafe;; esac
  m=$dir/$op
}
show() {
  if [ -f "$m/done" ]; then
    read -r st ts <"$m/done"
    say "$1" completed "$st" "$ts"
    [ -f "$m/stdout" ] && frame stdout "$m/stdout"
    [ -f "$m/stderr" ] && frame stderr "$m/stderr"
    return 0
  elif [ -f "$m/start" ]; then
    ts=; w=; b=; ws=; c=; cs=
    { read -r ts w b ws; read -r _ c cs; } <"$m/start"
    [ -n "$c" ] || c=-
    say "$1" started "$ts" "$w" "$c" "$(live "$b" "$w" "$ws" "$c" "$cs")"
  else
    say "$1" claimed
  fi
  return 1
}
case $mode in
reconcile)
  if mk 0; then
    ck "$m" 1
    case $? in 0) show marker;; 1) say marker absent;; 3) no marker_unavailable;; *) no marker_unsafe;; esac
  else
    say marker absent
  fi
  say exit 0; exit 0;;
run)
  mk 1
  if ! mkdir -m 700 "$m" 2>/dev/null; then
    ck "$m" 1; r=$?
    [ "$r" = 2 ] && no marker_unsafe
    if [ "$r" = 0 ]; then
      if show existing; then say exit "$st"; exit "$st"; fi
      say exit 75; exit 75
    fi
    no marker_unavailable
  fi
  if ! { printf '%s %s %s %s\n' "$(now)" "$$" "$(boot)" "$(pst $$)" >"$m/start.tmp" && mv "$m/start.tmp" "$m/start"; } 2>/dev/null; then
    rm -f "$m/start.tmp"; rmdir "$m" 2>/dev/null
    no marker_unavailable
  fi
  ( senv; umask "$U"; exec sh -c -- "$cmd" ) </dev/null >"$m/stdout" 2>"$m/stderr" &
  c=$!
  printf 'child %s %s\n' "$c" "$(pst "$c")" >>"$m/start"
  wait "$c"; st=$?
  trim "$m/stdout"; trim "$m/stderr"
  { printf '%s %s\n' "$st" "$(now)" >"$m/done.tmp" && mv "$m/done.tmp" "$m/done"; } 2>/dev/null
  say ran; frame stdout "$m/stdout"; frame stderr "$m/stderr"; say exit "$st"; exit "$st";;
converge|read)
  T=$(mktemp -d 2>/dev/null) || no tmp_unavailable
  trap 'rm -rf "$T"' EXIT
  trap 'rm -rf "$T"; trap - EXIT HUP; kill -HUP $$' HUP
  trap 'rm -rf "$T"; trap - EXIT TERM; kill -TERM $$' TERM
  if [ "$mode" = converge ] && runc "$chk" >/dev/null 2>&1; then
    rm -rf "$T"; say converged_before; say exit 0; exit 0
  fi
  runc "$cmd" >"$T/stdout" 2>"$T/stderr"; st=$?
  trim "$T/stdout"; trim "$T/stderr"
  [ "$mode" = converge ] && { runc "$chk" >/dev/null 2>&1; k=$?; }
  say ran; frame stdout "$T/stdout"; frame stderr "$T/stderr"; rm -rf "$T"
  [ "$mode" = converge ] && say check "$k"
  say exit "$st"; exit "$st";;
check)
  runc "$chk" >/dev/null 2>&1; k=$?
  say checked; say check "$k"; say exit 0; exit 0;;
*)
  no bad_mode;;
esac
`;

/** Quotes one word for a POSIX shell. */
export function shQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The exec string sent over SSH, the same for every call: `sh -c '<script>' candor-wrap`. */
export const WRAPPER_EXEC = ['sh', '-c', WRAPPER_SCRIPT, 'candor-wrap'].map(shQuote).join(' ');

/**
 * `run`: under the marker; `reconcile`: read the marker; `converge`: set_state (check, command,
 * re-check); `check`: only the convergence check; `read`: the command, no marker.
 */
export type WrapperMode = 'run' | 'reconcile' | 'converge' | 'check' | 'read';

export interface WrapperCall {
  mode: WrapperMode;
  /** Lowercase hex, fresh per call. */
  nonce: string;
  /** Empty string: the remote default directory. */
  markerDir: string;
  operationId: string;
  command?: string;
  check?: string;
  /** Secret inputs, exported only into the command's (and the check's) environment. */
  secretEnv?: Readonly<Record<string, string>>;
  /** Bytes of stdout and of stderr kept (default DEFAULT_OUTPUT_CAP). */
  outputCap?: number;
}

/** Why a call cannot be sent (a value the remote shell cannot carry), or undefined. */
export function wrapperCallProblem(call: WrapperCall): string | undefined {
  if (!/^[0-9a-f]{8,64}$/.test(call.nonce)) return 'bad_nonce';
  const cap = call.outputCap ?? DEFAULT_OUTPUT_CAP;
  if (!Number.isSafeInteger(cap) || cap < 0) return 'bad_output_cap';
  const env = Object.entries(call.secretEnv ?? {});
  if (env.some(([k]) => !SECRET_ENV_NAME_PATTERN.test(k))) return 'bad_secret_env_name';
  const values = [call.markerDir, call.operationId, call.command ?? '', call.check ?? ''];
  if ([...values, ...env.map(([, v]) => v)].some((v) => v.includes('\0'))) return 'nul_in_value';
  return undefined;
}

/** The request the wrapper reads from stdin (see the file comment). Throws on a bad call. */
export function wrapperRequest(call: WrapperCall): Buffer {
  const problem = wrapperCallProblem(call);
  if (problem !== undefined) throw new RangeError(`wrapper call: ${problem}`);
  const env = Object.entries(call.secretEnv ?? {});
  const lines = [
    call.nonce,
    `mode=${shQuote(call.mode)}`,
    `dir=${shQuote(call.markerDir)}`,
    `op=${shQuote(call.operationId)}`,
    `cap=${String(call.outputCap ?? DEFAULT_OUTPUT_CAP)}`,
    `cmd=${shQuote(call.command ?? '')}`,
    `chk=${shQuote(call.check ?? '')}`,
    env.length === 0
      ? 'senv() { :; }'
      : `senv() {\n${env.map(([k, v]) => `export ${k}=${shQuote(v)}`).join('\n')}\n}`,
    `# end ${call.nonce}`,
    '',
  ];
  return Buffer.from(lines.join('\n'), 'utf8');
}

export type { MarkerState };

export interface WrapperReport {
  kind: 'ran' | 'existing' | 'marker' | 'converged_before' | 'checked' | 'error';
  /** For `existing` and `marker`. */
  marker?: MarkerState;
  /** Refusal code for `error` (e.g. `marker_unavailable`, `marker_unsafe`, `missing_tools`). */
  error?: string;
  /** What the refusal names, e.g. the missing tools (`date,wc`). */
  error_detail?: string;
  /** set_state: status of the convergence check after the command ran. */
  check_status?: number;
  stdout: Buffer;
  stderr: Buffer;
  /** Bytes the command wrote to each stream; more than the frame holds when the cap cut it. */
  stdout_total?: number;
  stderr_total?: number;
  /** The `exit` line; undefined if the report was cut before it. */
  exit?: number;
}

export type ParseResult =
  | { ok: true; value: WrapperReport; failure?: never }
  | { ok: false; failure: 'no_report' | 'bad_line' | 'bad_frame' | 'no_exit_line'; value?: never };

const intOrNull = (s: string | undefined): number | null =>
  s !== undefined && /^\d+$/.test(s) ? Number(s) : null;

function parseMarker(words: string[]): MarkerState | undefined {
  const [state, a, b, c, d] = words;
  if (state === 'absent') return { state: 'absent' };
  if (state === 'claimed') return { state: 'claimed' };
  if (state === 'completed') {
    const status = intOrNull(a);
    if (status === null) return undefined;
    return { state: 'completed', exit_status: status, completed_at: b ?? '' };
  }
  if (state === 'started' && (d === 'alive' || d === 'gone')) {
    return {
      state: 'started',
      started_at: a ?? '',
      pid: intOrNull(b),
      child_pid: intOrNull(c),
      process: d,
    };
  }
  return undefined;
}

/**
 * Parses the wrapper's stdout. Bytes before the first status line (a login banner, a noisy shell
 * profile) are ignored; anything after the first status line must follow the format exactly.
 */
export function parseWrapperOutput(out: Buffer, nonce: string): ParseResult {
  const prefix = Buffer.from(`${WRAPPER_PROTOCOL} ${nonce} `);
  let pos = out.indexOf(prefix);
  while (pos > 0 && out[pos - 1] !== 0x0a) pos = out.indexOf(prefix, pos + 1);
  if (pos < 0) return { ok: false, failure: 'no_report' };

  const report: WrapperReport = { kind: 'error', stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) };
  let kindSeen = false;
  while (pos < out.length) {
    if (!out.subarray(pos, pos + prefix.length).equals(prefix))
      return { ok: false, failure: 'bad_line' };
    const eol = out.indexOf(0x0a, pos);
    if (eol < 0) return { ok: false, failure: 'bad_line' };
    const words = out
      .subarray(pos + prefix.length, eol)
      .toString('utf8')
      .split(' ');
    pos = eol + 1;
    const [verb, ...rest] = words;
    switch (verb) {
      case 'stdout':
      case 'stderr': {
        const n = intOrNull(rest[0]);
        if (n === null || pos + n >= out.length || out[pos + n] !== 0x0a)
          return { ok: false, failure: 'bad_frame' };
        report[verb] = Buffer.from(out.subarray(pos, pos + n));
        const total = intOrNull(rest[1]);
        report[`${verb}_total`] = total !== null && total >= n ? total : n;
        pos += n + 1;
        break;
      }
      case 'exit': {
        const n = intOrNull(rest[0]);
        if (n === null) return { ok: false, failure: 'bad_line' };
        report.exit = n;
        return kindSeen ? { ok: true, value: report } : { ok: false, failure: 'bad_line' };
      }
      case 'check': {
        const n = intOrNull(rest[0]);
        if (n === null) return { ok: false, failure: 'bad_line' };
        report.check_status = n;
        break;
      }
      case 'ran':
      case 'converged_before':
      case 'checked':
        report.kind = verb;
        kindSeen = true;
        break;
      case 'existing':
      case 'marker': {
        const marker = parseMarker(rest);
        if (!marker) return { ok: false, failure: 'bad_line' };
        report.kind = verb;
        report.marker = marker;
        kindSeen = true;
        break;
      }
      case 'error':
        report.kind = 'error';
        report.error = rest[0] ?? 'unknown';
        if (rest[1]) report.error_detail = rest[1].replace(/^,/, '');
        kindSeen = true;
        break;
      default:
        return { ok: false, failure: 'bad_line' };
    }
  }
  return { ok: false, failure: 'no_exit_line' };
}
