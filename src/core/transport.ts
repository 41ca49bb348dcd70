// The transport port: how the engine hands one prepared request to whatever carries it (HTTP on
// undici, a command over SSH, a `tools/call` to an upstream MCP server) and gets back what
// happened — evidence for classify(), never a verdict. Two members carry bytes: `dispatch` (an
// attempt) and `lookup` (reconciliation looking at the destination), each typed per transport so
// the engine reads what came back without casts. Adapters live in their own folders
// (src/http/adapter.ts, src/ssh/adapter.ts, src/upstream/adapter.ts) and import only core; the
// engine sees this port alone. The promises every adapter keeps are proved by one shared suite
// (test/transport.case.ts) run over each of them and over the scripted transport of the fakes.
import type { Evidence } from './evidence.js';
import type { ActionClass } from './vocabulary.js';

/** Per-phase limits of one HTTP exchange. */
export interface HttpTimeouts {
  connect_ms: number;
  /** From handing over the request head until the body is fully written. */
  write_ms: number;
  /** From the request being written until the response head arrives. */
  first_byte_ms: number;
  /** Longest silence while the response body streams. */
  body_idle_ms: number;
  /** The whole attempt, connect to last body byte. */
  total_ms: number;
}

/** An HTTP request ready to leave: credentials already in its headers. */
export interface HttpPrepared {
  kind: 'http';
  /** The attempt id (or the observation id of a lookup): it marks the request for phase tracking. */
  id: string;
  /** `http://host:port` */
  origin: string;
  method: string;
  /** Path and query, relative to the origin. */
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** Overrides of the adapter's default timeouts. */
  timeouts?: Partial<HttpTimeouts>;
  /**
   * True: any pooled keep-alive connection will do (reads, lookups, writes under an honoured
   * idempotency key, whose stale-socket reset is retried under the same key). False (other
   * writes): only a connection that answered moments ago, well within the server's announced
   * keep-alive time; otherwise a fresh one.
   */
  reuse_connection: boolean;
  /**
   * A cap on the answer's body: reading stops past it, the connection is closed and the reply
   * flagged `over_limit` (lookups). Without it the adapter keeps 4 MiB and drains the rest.
   */
  max_body_bytes?: number;
}

/**
 * An HTTP lookup: a request that only reads, with a bound on its answer.
 */
export interface HttpLookupPrepared extends Omit<HttpPrepared, 'max_body_bytes'> {
  /** Reading stops past this many bytes; the lookup then failed (`over_limit`). */
  max_body_bytes: number;
  /**
   * A get-by-id lookup: its 404 says "no such record" (`absent`). For a list lookup a 404 is no
   * answer at all (`failed`): the list itself is missing.
   */
  absent_on_404: boolean;
}

/** What an HTTP lookup found: a 2xx answer, complete and within its limit, for the engine to read. */
export interface HttpFound {
  status: number;
  body: Uint8Array;
}

/** An SSH command run under the marker protocol (one attempt of an operation). */
export interface SshRunPrepared {
  kind: 'ssh';
  op: 'run';
  id: string;
  host_ref: string;
  command: string;
  /** The action class decides how the command runs (raw, converge, marker). */
  family: ActionClass;
  operation_id: string;
  deadline_ms: number;
  /** set_state: the convergence check. */
  check?: string;
  /** Secret environment for the command and the check (never on a command line). */
  secret_env?: Record<string, string>;
}

/** Reads the remote marker of an operation (an SSH reconciliation lookup). */
export interface SshMarkerPrepared {
  kind: 'ssh';
  op: 'marker';
  id: string;
  host_ref: string;
  operation_id: string;
}

/** Runs a set_state action's convergence check alone (an SSH reconciliation lookup). */
export interface SshCheckPrepared {
  kind: 'ssh';
  op: 'check';
  id: string;
  host_ref: string;
  check: string;
  deadline_ms: number;
  secret_env?: Record<string, string>;
}

/** What an SSH operation's remote marker says about it (the data of a marker lookup). */
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

/** What an attempt hands the SSH transport; marker reads and checks are lookups. */
export type SshPrepared = SshRunPrepared;

/** The two SSH lookups: the operation's marker, or a set_state action's convergence check. */
export type SshLookupPrepared = SshMarkerPrepared | SshCheckPrepared;

/**
 * What an SSH lookup found: a marker the command left (any state but absent: an absent marker is
 * the lookup's `absent`), with the recorded stdout of a completed run; or a convergence check that
 * passed (a failing check is `absent`: the desired state is not there).
 */
export type SshFound =
  | {
      op: 'marker';
      marker: Exclude<MarkerState, { state: 'absent' }>;
      stdout: string;
      stdout_truncated?: { kept_bytes: number; dropped_bytes: number };
    }
  | { op: 'check'; check_status: 0 };

/**
 * One `tools/call` to an upstream MCP server (an attempt, or a reconciliation lookup through a
 * mapped read tool). The upstream's own secrets live in its child environment or connection
 * headers, never in the request.
 */
export interface McpPrepared {
  kind: 'mcp';
  id: string;
  /** The upstream's name in the configuration. */
  upstream: string;
  /** The upstream's own tool name (not the namespaced one Candor exports). */
  tool: string;
  arguments: Record<string, unknown>;
  deadline_ms: number;
  /**
   * On a reconciliation lookup: who the operation recorded as its caller (null: the local operator
   * or an older record). An upstream whose tokens are per caller sends the lookup only as that
   * caller, since another identity's "not found" proves nothing.
   */
  operation_caller?: { issuer: string | null; subject: string } | null;
}

/**
 * What an upstream answered to a `tools/call`: the result as received (text and structured content
 * kept), for the engine to redact and hand on as the envelope's `data`.
 */
export interface McpToolReply {
  content: unknown[];
  structuredContent?: unknown;
  isError: boolean;
}

/** Everything the engine can hand to a transport, tagged by the transport kind. */
export type Prepared = HttpPrepared | SshPrepared | McpPrepared;

export type TransportKind = Prepared['kind'];

/** How a response body was delimited; `close` means only the connection's end framed it. */
export type Framing = 'length' | 'chunked' | 'close' | 'none';

/**
 * A request/response transport's answer as received, for the engine's contract check and the
 * attempt record. Fields are present as far as they arrived (a cut response has a status and no
 * complete body).
 */
export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body?: Uint8Array;
  framing?: Framing;
  /** The body went past the request's `max_body_bytes` and was cut off there (`body` is its start). */
  over_limit?: boolean;
}

export interface Phases {
  started_at: number;
  request_sent_at?: number;
  headers_at?: number;
  finished_at: number;
}

/** Protected diagnostics of one exchange: plain data, redacted and possibly sealed before storage. */
export type Diagnostics = Record<string, unknown>;

export interface Dispatched {
  evidence: Evidence;
  /**
   * Structured data the transport already read (an SSH command's exit status and stdout, a
   * marker, a check status), or null. A request/response transport answers with `reply` instead,
   * which the engine checks against the action's response contract.
   */
  data: unknown;
  /** Set by request/response transports (HTTP) on every dispatch, even when nothing came back. */
  reply?: Reply;
  diagnostics: Diagnostics;
  phases: Phases;
}

/**
 * What a lookup learned about the destination. `found` and `absent` are the destination's own
 * answer; `failed` means nothing was learned (no answer, an unreadable one, a refusal) and says
 * nothing about the operation. Every variant carries the lookup's own evidence and true phases.
 */
export type Looked<F> =
  | { verdict: 'found'; found: F; evidence: Evidence; phases: Phases }
  | { verdict: 'absent'; evidence: Evidence; phases: Phases }
  | {
      verdict: 'failed';
      evidence: Evidence;
      phases: Phases;
      /** The status the destination answered with, when a whole answer (or its cut start) came. */
      status?: number;
      /** The answer went past the lookup's `max_body_bytes` and was cut off there. */
      over_limit?: true;
      /** The far side refused the lookup by name (an SSH wrapper's `marker_unsafe`, …). */
      refusal?: string;
    };

/** Each transport's lookup request and what it finds, by kind. */
export interface Lookups {
  http: { prepared: HttpLookupPrepared; found: HttpFound };
  ssh: { prepared: SshLookupPrepared; found: SshFound };
  /** A mapped upstream read tool; what it found is read by the configured rule. */
  mcp: { prepared: McpPrepared; found: McpToolReply };
}

export type LookupPrepared = Lookups[TransportKind]['prepared'];

export interface DispatchOptions {
  /** The caller's signal: aborting it cancels the exchange (evidence `cancelled`). */
  signal?: AbortSignal | undefined;
}

/** One transport: dispatches prepared requests of its kind and reports evidence. */
export interface Transport<P extends Prepared = Prepared> {
  readonly kind: P['kind'];
  /** Never throws for a failed exchange: failure is evidence. */
  dispatch(prepared: P, options: DispatchOptions): Promise<Dispatched>;
  /**
   * Looks at the destination for reconciliation. Never throws for a failed exchange: it is a
   * `failed` lookup with its evidence. Aborting the signal ends it as `failed`, evidence
   * `cancelled`.
   */
  lookup(
    prepared: Lookups[P['kind']]['prepared'],
    options: DispatchOptions,
  ): Promise<Looked<Lookups[P['kind']]['found']>>;
  /**
   * What else identifies the request on this transport (where it runs, what checks it), bound into
   * the request fingerprint next to the generic request line. Absent: the request line alone.
   */
  binding?(prepared: P): Record<string, unknown>;
  /** Releases what the transport holds (pooled connections); called by `runtime.close()`. */
  close?(): Promise<void>;
}

/** The transports of a runtime, by kind. */
export interface Transports {
  http?: Transport<HttpPrepared>;
  ssh?: Transport<SshPrepared>;
  mcp?: Transport<McpPrepared>;
}

/**
 * An HTTP exchange read as a lookup: a complete 2xx answer is `found`, a complete 404 of a
 * get-by-id is `absent`, anything else `failed` (with the status when a whole answer, or the cut
 * start of one past the limit, came). Pure, shared by the HTTP adapter and transports that wrap or
 * script it, so that every HTTP lookup is read the same way.
 */
export function readHttpLookup(prepared: HttpLookupPrepared, d: Dispatched): Looked<HttpFound> {
  const reply = d.reply;
  const tooLarge = reply?.over_limit === true;
  const complete = d.evidence.phase === 'response_complete';
  const status = complete || tooLarge ? reply?.status : undefined;
  const base = { evidence: d.evidence, phases: d.phases };
  if (complete && status === 404 && prepared.absent_on_404) return { verdict: 'absent', ...base };
  if (complete && status !== undefined && status >= 200 && status < 300)
    return { verdict: 'found', found: { status, body: reply?.body ?? new Uint8Array(0) }, ...base };
  return {
    verdict: 'failed',
    ...base,
    ...(status !== undefined ? { status } : {}),
    ...(tooLarge ? { over_limit: true as const } : {}),
  };
}
