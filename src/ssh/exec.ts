// One SSH exec over ssh2, observed phase by phase. This layer only records what happened on the
// wire (how far we got, exit status or signal, local stop reason as a code); turning that into
// `Evidence` is the caller's job. It never throws for expected failures and never reads error text.
import { Client, type ClientChannel, type ConnectConfig } from 'ssh2';
import { reportedCode, SshErrorCode, type ReportedCode } from '../core/error-code.js';
import type { LocalError } from '../core/evidence.js';
import { systemClock, type Clock } from '../core/time.js';
import { pinnedHostVerifier, type HostEntry, type ResolveKey } from './inventory.js';

export type SshPhaseName =
  'connect_started' | 'key_resolved' | 'authenticated' | 'exec_sent' | 'exit_received' | 'closed';

/** Clock readings (ms) of each phase reached; absent phases were not reached. */
export type SshPhases = Partial<Record<SshPhaseName, number>>;

export interface ExecObservation {
  /** false: the exec request was never handed to ssh2 (or the server refused the channel). */
  execSent: boolean;
  /** Exit status from the remote `exit-status` message; null when none arrived. */
  exitCode: number | null;
  /** Signal name from `exit-signal` (the remote process was killed), else null. */
  exitSignal: string | null;
  /** The channel closed cleanly (remote EOF/close), as opposed to the connection dying. */
  channelClosed: boolean;
  localError?: LocalError;
  errorCode?: SshErrorCode;
  stdout: Buffer;
  stderr: Buffer;
  /** Bytes received past `maxStdout` / `maxStderr`: counted, not kept. */
  stdoutDropped: number;
  stderrDropped: number;
  phases: SshPhases;
}

export interface ExecOptions {
  host: HostEntry;
  /** The exec string, parsed by the remote user's login shell. */
  command: string;
  resolveKey: ResolveKey;
  signal?: AbortSignal | undefined;
  /** Budget in ms for the whole exchange, from the call. */
  deadlineMs?: number | undefined;
  clock?: Clock | undefined;
  /**
   * Written to the channel's stdin, then EOF. Without it stdin is closed at once: a command never
   * waits for input that cannot come.
   */
  stdin?: Buffer | undefined;
  /** Bytes of stdout / stderr kept in memory (default 1 MiB each); the rest is counted and dropped. */
  maxStdout?: number | undefined;
  maxStderr?: number | undefined;
  /** Observability hook, called synchronously as each phase is reached (tests use it to cut). */
  onPhase?: ((phase: SshPhaseName) => void) | undefined;
}

const SOCKET_CODES: Readonly<Record<string, LocalError>> = {
  ECONNREFUSED: 'connect_refused',
  ENOTFOUND: 'dns',
  EAI_AGAIN: 'dns',
  ETIMEDOUT: 'connect_timeout',
  EHOSTUNREACH: 'connect_timeout',
  ENETUNREACH: 'connect_timeout',
  ECONNRESET: 'connection_reset',
  EPIPE: 'connection_reset',
};

/** ssh2 marks its errors with a `level`; sockets add a `code` (both recorded as reported). */
function errorFacts(err: unknown): {
  level: string;
  code: ReportedCode | undefined;
  reason: unknown;
} {
  const e = (typeof err === 'object' && err !== null ? err : {}) as Record<string, unknown>;
  return {
    level: typeof e.level === 'string' ? e.level : '',
    code: typeof e.code === 'string' ? reportedCode(e.code) : undefined,
    reason: e.reason,
  };
}

const DEFAULT_MAX_OUTPUT = 1024 * 1024;

/** Keeps the first `max` bytes of a stream and counts the rest (never one unbounded buffer). */
function boundedSink(max: number) {
  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = 0;
  return {
    push(d: Buffer): void {
      const room = Math.max(0, max - kept);
      if (d.length <= room) {
        chunks.push(d);
        kept += d.length;
        return;
      }
      if (room > 0) chunks.push(d.subarray(0, room));
      kept += room;
      dropped += d.length - room;
    },
    bytes: (): Buffer => Buffer.concat(chunks),
    dropped: (): number => dropped,
  };
}

export function execOnce(opts: ExecOptions): Promise<ExecObservation> {
  const clock = opts.clock ?? systemClock;
  const phases: SshPhases = {};
  const out = boundedSink(opts.maxStdout ?? DEFAULT_MAX_OUTPUT);
  const err = boundedSink(opts.maxStderr ?? DEFAULT_MAX_OUTPUT);
  const obs: ExecObservation = {
    execSent: false,
    exitCode: null,
    exitSignal: null,
    channelClosed: false,
    stdout: Buffer.alloc(0),
    stderr: Buffer.alloc(0),
    stdoutDropped: 0,
    stderrDropped: 0,
    phases,
  };
  const mark = (p: SshPhaseName): void => {
    phases[p] ??= clock.now();
    opts.onPhase?.(p);
  };
  /** The first stop reason wins: later errors are consequences of it. */
  const stopWith = (localError: LocalError, errorCode?: SshErrorCode): void => {
    if (obs.localError !== undefined) return;
    obs.localError = localError;
    if (errorCode !== undefined) obs.errorCode = errorCode;
  };

  return new Promise((resolve) => {
    const conn = new Client();
    let settled = false;
    let hostKeyRejected = false;
    let timer: NodeJS.Timeout | undefined;

    const finish = (): void => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      conn.removeAllListeners();
      conn.on('error', () => undefined); // late socket errors after we stopped listening
      conn.destroy();
      mark('closed');
      obs.stdout = out.bytes();
      obs.stderr = err.bytes();
      obs.stdoutDropped = out.dropped();
      obs.stderrDropped = err.dropped();
      resolve(obs);
    };
    const cut = (localError: LocalError, errorCode?: SshErrorCode): void => {
      stopWith(localError, errorCode);
      finish();
    };
    const onAbort = (): void => cut('cancelled');

    if (opts.signal?.aborted) {
      cut('cancelled');
      return;
    }
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    if (opts.deadlineMs !== undefined) timer = setTimeout(() => cut('deadline'), opts.deadlineMs);

    const onChannel = (ch: ClientChannel): void => {
      ch.on('data', (d: Buffer) => out.push(d));
      ch.stderr.on('data', (d: Buffer) => err.push(d));
      ch.on('exit', (code: number | null, signalName?: string) => {
        if (typeof code === 'number') obs.exitCode = code;
        else obs.exitSignal = signalName ?? 'unknown';
        mark('exit_received');
      });
      ch.on('close', () => {
        obs.channelClosed = true;
        finish();
      });
    };

    conn.on('ready', () => {
      mark('authenticated');
      if (settled) return;
      if (opts.signal?.aborted) {
        cut('cancelled');
        return;
      }
      // From here on the exec request may be on the wire: treat it as sent (the safe direction).
      obs.execSent = true;
      mark('exec_sent');
      conn.exec(opts.command, (err, ch) => {
        if (settled) return;
        if (err) {
          // A channel-open failure carries the server's numeric reason: nothing was executed.
          if (typeof errorFacts(err).reason === 'number') {
            obs.execSent = false;
            cut('other', SshErrorCode.channel_open_failure);
          } else {
            cut('connection_closed', SshErrorCode.exec_failed);
          }
          return;
        }
        onChannel(ch);
        // The request (or nothing) goes on stdin, then EOF.
        ch.end(opts.stdin);
      });
    });
    conn.on('error', (err: unknown) => {
      const { level, code } = errorFacts(err);
      if (hostKeyRejected) cut('host_key_mismatch');
      else if (level === 'client-authentication') cut('ssh_auth_rejected');
      else if (level === 'client-timeout') cut('connect_timeout');
      else if (level === 'client-dns') cut('dns', code);
      else if (level === 'client-socket')
        cut((code === undefined ? undefined : SOCKET_CODES[code]) ?? 'connection_closed', code);
      else cut('other', level !== '' ? reportedCode(level) : code);
    });
    conn.on('close', () => cut('connection_closed'));

    void (async () => {
      mark('connect_started');
      let privateKey: Buffer;
      try {
        privateKey = await opts.resolveKey(opts.host.key_ref);
      } catch {
        cut('credential_unavailable');
        return;
      }
      if (settled) return;
      if (!Buffer.isBuffer(privateKey) || privateKey.length === 0) {
        cut('credential_unavailable');
        return;
      }
      mark('key_resolved');
      const config: ConnectConfig = {
        host: opts.host.host,
        port: opts.host.port,
        username: opts.host.user,
        privateKey,
        hostVerifier: pinnedHostVerifier(opts.host.host_key.fingerprint, () => {
          hostKeyRejected = true;
        }),
        // Only the pinned key and the referenced private key: no agent, no keyboard prompts.
        tryKeyboard: false,
        readyTimeout: Math.max(1000, (opts.deadlineMs ?? 20_000) + 1000),
        keepaliveInterval: 5000,
        keepaliveCountMax: 3,
      };
      try {
        conn.connect(config);
      } catch {
        // ssh2 throws synchronously for a key it cannot parse.
        cut('credential_unavailable', SshErrorCode.key_unparsable);
      }
    })();
  });
}
