// The remote half of the SSH marker protocol (DESIGN.md §4): a small POSIX sh script that keys a
// durable marker by operation id, claims it exclusively (`mkdir`) BEFORE the command runs, records
// `start` and `done <exit status>`, and on a second run with the same id reports the recorded
// result instead of running again. The client half (building the exec string, parsing the report)
// lives here too so that both sides of the protocol change together.
//
// Report format (stdout of the wrapper; the command's own output is captured to files and framed,
// so it can never be mistaken for a status line). Every status line starts with
// `CANDOR-WRAP/1 <nonce> `, the nonce being fresh per call and unknown to the command:
//   ran                                    the command ran in this call
//   existing completed <status> <ts>       an earlier call ran it (frames follow)
//   existing started <ts> <pid> <child> <alive|gone>   an earlier call started it, no `done` record
//   existing claimed                       marker exists, command not yet started by its claimant
//   marker absent|claimed|started…|completed…          reconcile mode, same fields
//   converged_before                       set_state: the check passed, the command did not run
//   check <status>                         set_state: the check's status after the command ran
//   stdout <n> / stderr <n>                followed by exactly n bytes and one newline
//   error <code>                           the wrapper refused before running anything
//   exit <status>                          last line; the wrapper's own exit status

/** Exit status of the wrapper when it refused before running the command. */
export const WRAPPER_REFUSED_STATUS = 70;
/** Exit status of the wrapper when an earlier call started the operation but left no result. */
export const WRAPPER_IN_PROGRESS_STATUS = 75;
export const WRAPPER_PROTOCOL = 'CANDOR-WRAP/1';

/** Operation ids become file names on the remote host: a conservative character set. */
export const OPERATION_ID_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

// POSIX sh (dash, busybox, bash), written without `${` so that String.raw keeps it verbatim.
// `kill -0` and /proc boot_id give liveness (a zombie counts as gone; a recorded boot id that differs
// from the current one means every recorded process is gone, whatever pids were reused since).
export const WRAPPER_SCRIPT = String.raw`
mode=$1; P="CANDOR-WRAP/1 $2"; dir=$3; op=$4
say() { printf '%s %s\n' "$P" "$*"; }
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
boot() { cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo -; }
frame() { n=$(wc -c <"$2" | tr -d ' '); say "$1" "$n"; cat "$2"; printf '\n'; }
live() {
  b=$1; shift
  if [ "$b" != "$(boot)" ]; then echo gone; return; fi
  for p in "$@"; do
    case $p in ''|*[!0-9]*) continue;; esac
    kill -0 "$p" 2>/dev/null || continue
    z=$(sed -n 's/^.*) \(.\).*/\1/p' "/proc/$p/stat" 2>/dev/null)
    if [ "$z" != Z ]; then echo alive; return; fi
  done
  echo gone
}
show() {
  if [ -f "$m/done" ]; then
    read -r st ts <"$m/done"
    say "$1" completed "$st" "$ts"
    [ -f "$m/stdout" ] && frame stdout "$m/stdout"
    [ -f "$m/stderr" ] && frame stderr "$m/stderr"
    return 0
  elif [ -f "$m/start" ]; then
    ts=; w=; b=; c=
    { read -r ts w b; read -r _ c; } <"$m/start"
    [ -n "$c" ] || c=-
    say "$1" started "$ts" "$w" "$c" "$(live "$b" "$w" "$c")"
  elif [ -d "$m" ]; then
    say "$1" claimed
  else
    say "$1" absent
  fi
  return 1
}
case $op in ''|.*|*[!A-Za-z0-9_.-]*) say error bad_operation_id; say exit 70; exit 70;; esac
if [ -z "$dir" ]; then
  if [ -n "$XDG_STATE_HOME" ]; then dir=$XDG_STATE_HOME/candor/ops; else dir=$HOME/.local/state/candor/ops; fi
fi
m=$dir/$op
case $mode in
reconcile)
  show marker; say exit 0; exit 0;;
run)
  (umask 077; mkdir -p "$dir") 2>/dev/null
  if ! mkdir -m 700 "$m" 2>/dev/null; then
    if [ -d "$m" ]; then
      if show existing; then say exit "$st"; exit "$st"; fi
      say exit 75; exit 75
    fi
    say error marker_unavailable; say exit 70; exit 70
  fi
  if ! { printf '%s %s %s\n' "$(now)" "$$" "$(boot)" >"$m/start.tmp" && mv "$m/start.tmp" "$m/start"; } 2>/dev/null; then
    rm -f "$m/start.tmp"; rmdir "$m" 2>/dev/null
    say error marker_unavailable; say exit 70; exit 70
  fi
  sh -c "$5" </dev/null >"$m/stdout" 2>"$m/stderr" &
  c=$!
  printf 'child %s\n' "$c" >>"$m/start"
  wait "$c"; st=$?
  { printf '%s %s\n' "$st" "$(now)" >"$m/done.tmp" && mv "$m/done.tmp" "$m/done"; } 2>/dev/null
  say ran; frame stdout "$m/stdout"; frame stderr "$m/stderr"; say exit "$st"; exit "$st";;
converge)
  if sh -c "$6" </dev/null >/dev/null 2>&1; then say converged_before; say exit 0; exit 0; fi
  t=$(mktemp -d 2>/dev/null) || { say error tmp_unavailable; say exit 70; exit 70; }
  sh -c "$5" </dev/null >"$t/stdout" 2>"$t/stderr"; st=$?
  sh -c "$6" </dev/null >/dev/null 2>&1; ck=$?
  say ran; frame stdout "$t/stdout"; frame stderr "$t/stderr"; rm -rf "$t"
  say check "$ck"; say exit "$st"; exit "$st";;
*)
  say error bad_mode; say exit 70; exit 70;;
esac
`;

/** Quotes one word for a POSIX shell (the remote login shell parses the exec string). */
export function shQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

export type WrapperMode = 'run' | 'reconcile' | 'converge';

export interface WrapperCall {
  mode: WrapperMode;
  nonce: string;
  /** Empty string: the remote default directory. */
  markerDir: string;
  operationId: string;
  command?: string;
  check?: string;
}

/** argv for the script after `sh -c SCRIPT candor-wrap`. */
export function wrapperArgs(call: WrapperCall): string[] {
  return [
    call.mode,
    call.nonce,
    call.markerDir,
    call.operationId,
    call.command ?? '',
    call.check ?? '',
  ];
}

/** The exec string sent over SSH: `sh -c '<script>' candor-wrap <args…>`. */
export function wrapperExecString(call: WrapperCall): string {
  return ['sh', '-c', WRAPPER_SCRIPT, 'candor-wrap', ...wrapperArgs(call)].map(shQuote).join(' ');
}

/** What the marker says about one operation. */
export type MarkerState =
  | { state: 'absent' }
  | { state: 'claimed' }
  | {
      state: 'started';
      started_at: string;
      pid: number | null;
      child_pid: number | null;
      /** Whether any recorded process still runs (same boot, `kill -0`). */
      process: 'alive' | 'gone';
    }
  | { state: 'completed'; exit_status: number; completed_at: string };

export interface WrapperReport {
  kind: 'ran' | 'existing' | 'marker' | 'converged_before' | 'error';
  /** For `existing` and `marker`. */
  marker?: MarkerState;
  /** Refusal code for `error` (e.g. `marker_unavailable`, `bad_operation_id`). */
  error?: string;
  /** set_state: status of the convergence check after the command ran. */
  check_status?: number;
  stdout: Buffer;
  stderr: Buffer;
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
        kindSeen = true;
        break;
      default:
        return { ok: false, failure: 'bad_line' };
    }
  }
  return { ok: false, failure: 'no_exit_line' };
}
