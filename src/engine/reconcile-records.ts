// The one reconciliation algorithm for destinations that answer a lookup with records: an HTTP
// action's declared lookup, and a proxied MCP tool's mapped upstream read tool. Each transport
// only builds its lookup (`httpRecordLookup`, `mcpRecordLookup`: what is checked, how it is sent
// through the transport's typed `lookup`, which records are this operation's); what follows is
// the same for both:
//
//   build ─ failed ─────────────────────────────→ not looked up (nothing learned, a person decides)
//   send ── failed / no usable records ─────────→ observation `failed`: nothing learned
//        └─ records ─ bind ─ none bound, some not → observation `ambiguous`: another's? a person
//                         ├─ one bound ───────────→ `succeeded` (reconcile-settle.ts)
//                         ├─ several bound ───────→ `duplicate_effect`, for a person
//                         └─ none ─ key honoured ─→ a retry under the same key (drive.ts)
//                                 └─ no key ──────→ still unknown: a person decides
//
// Every lookup that was sent is recorded as an observation, found or not, failed included. SSH
// markers are not records (a run's marker says started, completed or claimed): reconcile-ssh.ts.
import type { Envelope } from '../core/envelope.js';
import type { HttpFound, Looked, McpToolReply } from '../core/transport.js';
import type { OperationState } from '../core/vocabulary.js';
import type { OperationView } from '../ledger/projection.js';
import {
  httpDestination,
  LOOKUP_MAX_ANSWER_BYTES,
  type HttpDestination,
  type HttpRequestSpec,
  type McpDestination,
  type RequestContext,
} from './action.js';
import { type AnyAction, type EngineContext, unknownOutcome } from './context.js';
import { licensedAttempt } from './drive.js';
import { lookupHttp, lookupMcp } from './lookup.js';
import { bindRecords, type Binding, type LookupRecord } from './lookup-binding.js';
import { personDecides, settleFromLookup, type Reconciled } from './reconcile-settle.js';

/** Why a lookup was refused before it was sent (its credential gave nothing): no observation. */
interface NotSent {
  step: 'gate_locked' | 'credential_unavailable';
  category: 'gate_locked' | 'outcome_unknown';
  why: string;
}

/** What one lookup gave: the records it matched, why it gave no usable answer, or that it never left. */
type RecordsLooked =
  | { ok: true; records: LookupRecord[]; status: number | null }
  | { ok: false; notSent: NotSent }
  | {
      ok: false;
      status: number | null;
      /** What the lookup met, as a clause ("it answered 500 with no usable list of records"). */
      met: string;
      /** The observation's conclusion. */
      conclusion: string;
    };

/** A lookup for records, built for one operation and ready to send. */
export interface RecordLookup {
  /** What the observation says was checked (`GET /v1/charges?…`, `fs read_text_file`). */
  checked: string;
  /** The route the observation records as its request (no values), when the kind has one. */
  request?: string;
  /** Sends it once through the transport's typed lookup, with the caller's signal. */
  send(signal: AbortSignal | undefined): Promise<RecordsLooked>;
  /** Which of the records are this operation's; the rest may be another's. */
  bind(records: LookupRecord[]): Binding;
  /** Whether the idempotency key is still honoured at `checkedAt` (absent then licenses a retry). */
  keyHonoured(checkedAt: number): boolean;
  /** The action declares identifying fields (a record may be unbound for differing in them). */
  identifying?: boolean;
}

/** A lookup, or why none could be built (nothing is sent then). */
export type BuiltLookup =
  | { ok: true; lookup: RecordLookup; params: unknown }
  | {
      ok: false;
      step: 'lookup_failed' | NotSent['step'];
      category: NotSent['category'];
      why: string;
    };

/** The named arguments of `reconcileRecords`. */
export interface ReconcileRecordsOptions {
  view: OperationView;
  signal?: AbortSignal | undefined;
}

/** Reconciles an operation whose destination answers its lookup with records (see the top). */
export async function reconcileRecords(
  ctx: EngineContext,
  action: AnyAction,
  { view, signal }: ReconcileRecordsOptions,
): Promise<Reconciled> {
  const { clock, observe, load, envelopeOf } = ctx;
  const dest = action.destination;
  // HTTP is the default kind: a destination without `kind` is HTTP (action.ts).
  const http = httpDestination(dest);
  const built =
    dest.kind === 'mcp'
      ? await mcpRecordLookup(ctx, dest, view)
      : http
        ? await httpRecordLookup(ctx, action, http, view)
        : null;
  if (!built || !built.ok) {
    const why = built?.why ?? 'the action has no record lookup';
    return {
      step: built?.step ?? 'lookup_failed',
      envelope: notLookedUp(ctx, action, view, {
        category: built?.category ?? 'outcome_unknown',
        why,
      }),
    };
  }
  const { lookup, params } = built;
  const checkedAt = clock.now();
  const looked = await lookup.send(signal);
  const stateNow: OperationState = view.state ?? 'unknown';
  const request = lookup.request;
  if (!looked.ok && 'notSent' in looked) {
    // Refused before it left (as a missing credential stops an HTTP lookup being built): nothing
    // was looked at, so nothing is observed.
    const { step, category, why } = looked.notSent;
    return { step, envelope: notLookedUp(ctx, action, view, { category, why }) };
  }
  if (!looked.ok) {
    // The lookup itself failed: nothing learned, state unchanged — but it is evidence that a
    // lookup was tried (and what it met), so it is recorded too. Its verdict `failed` moves the
    // fold nowhere (core/fold.ts): an unknown operation stays unknown.
    const { status, met } = looked;
    await observe(view, {
      source: 'lookup',
      checked: lookup.checked,
      checked_at: checkedAt,
      matches: 0,
      remote_refs: [],
      conclusion: looked.conclusion,
      state_after: stateNow,
      verdict: 'failed',
      ...(request !== undefined ? { request } : {}),
      status,
    });
    const data = { lookup: { verdict: 'failed', request: request ?? lookup.checked, status, met } };
    const lead = `The lookup failed (${met}), so it learned nothing about this operation.`;
    const env = envelopeOf({
      action,
      view,
      outcome: unknownOutcome('unknown_lookup_next'),
      data,
      diagnosticsRef: null,
    });
    return { step: 'lookup_failed', lead, envelope: { ...env, message: `${lead} ${env.message}` } };
  }
  const { bound, unbound } = lookup.bind(looked.records);
  const refs = bound.map((m) => m.ref);
  const keyValid = lookup.keyHonoured(checkedAt);
  const ambiguous = refs.length === 0 && unbound.length > 0;
  const stateAfter: OperationState =
    refs.length === 1 ? 'succeeded' : refs.length >= 2 ? 'duplicate_effect_confirmed' : 'unknown';
  const conclusion =
    refs.length === 1
      ? 'one record bound to this operation: the operation took effect'
      : refs.length >= 2
        ? 'several records bound to this operation: the effect happened more than once'
        : ambiguous
          ? `${unbound.length} record(s) matched the lookup but none is bound to this operation (none carries its id, key or correlation value${lookup.identifying ? ', or its identifying fields differ or it is older than the operation' : ''}): it may be another's, so whether this operation took effect is still unknown`
          : keyValid
            ? 'no matching record; the idempotency key is still honoured, so a retry under the same key is safe'
            : 'no matching record; without an honoured idempotency key a retry could duplicate a late effect, so a person decides';
  await observe(view, {
    source: 'lookup',
    checked: lookup.checked,
    checked_at: checkedAt,
    matches: refs.length,
    remote_refs: refs,
    conclusion,
    state_after: stateAfter,
    verdict: refs.length > 0 ? 'found' : ambiguous ? 'ambiguous' : 'absent',
    ...(request !== undefined ? { request } : {}),
    status: looked.status,
    unbound: unbound.length,
  });
  if (ambiguous) {
    const found = `The lookup found ${unbound.length === 1 ? 'a record' : `${unbound.length} records`} like ${action.subject}, but none carries this operation's id, key or correlation value, so it may be another's (lookup_ambiguous)`;
    const env = personDecides(ctx, action, view, {
      escalation: {
        code: 'lookup_ambiguous',
        reason: 'records matched the lookup, but none is bound to this operation',
      },
      unbound_refs: unbound.map((m) => m.ref),
    });
    return {
      step: 'ambiguous',
      lead: `${found}.`,
      envelope: {
        ...env,
        message: `${found}; whether ${action.subject} was applied is still unknown and a person must decide.`,
      },
    };
  }
  const settled = await settleFromLookup(ctx, action, view, {
    refs,
    firstRecord: bound[0]?.record,
  });
  if (settled) return settled;
  if (keyValid) {
    return {
      step: 'absent_retried',
      envelope: await licensedAttempt(ctx, action, params, {
        view: (await load(view.operation_id))!,
        licence: {
          reason: 'response_lost_after_dispatch',
          decision: 'reconciled_absent_key_valid',
        },
        by: 'reconciliation',
        signal,
      }),
    };
  }
  return {
    step: 'absent',
    lead: `The lookup found no record of this operation, but without an idempotency key the destination still honours that does not rule out a late effect.`,
    envelope: personDecides(ctx, action, view),
  };
}

/** The named arguments of `notLookedUp`. */
export interface NotLookedUpOptions {
  category: 'gate_locked' | 'outcome_unknown';
  why: string;
}

/** The envelope for a lookup that was not sent: nothing learned, the operation as it was. */
export function notLookedUp(
  ctx: EngineContext,
  action: AnyAction,
  view: OperationView,
  { category, why }: NotLookedUpOptions,
): Envelope {
  return {
    ...personDecides(ctx, action, view),
    category,
    message: `The lookup was not sent (${why}); whether ${action.subject} was applied is still unknown and a person must decide.`,
  };
}

/** A user callback's records: a throw or a non-list means "no usable answer", never an escape. */
function recordsOf(read: () => LookupRecord[] | null): LookupRecord[] | null {
  try {
    const records = read();
    return Array.isArray(records) ? records : null;
  } catch {
    return null;
  }
}

/**
 * An HTTP action's declared lookup: the request its `lookup` builds, with the credential resolved
 * now (a locked vault sends nothing), read by its `matches` and bound by lookup-binding.ts.
 */
async function httpRecordLookup(
  ctx: EngineContext,
  action: AnyAction,
  dest: HttpDestination,
  view: OperationView,
): Promise<BuiltLookup> {
  const { options, ids, redactor, paramsOf } = ctx;
  const lookup = dest.reconciliation!;
  const requestCtx: RequestContext = {
    operation_id: view.operation_id,
    correlation_id: view.correlation_id ?? view.operation_id,
    idempotency_key: view.idempotency_key,
  };
  const params = await paramsOf(view.operation_id);
  let spec: HttpRequestSpec;
  try {
    spec = lookup.lookup(requestCtx, params);
  } catch {
    return {
      ok: false,
      step: 'lookup_failed',
      category: 'outcome_unknown',
      why: 'the lookup could not be built',
    };
  }
  const cred = await options.credentials.resolve(dest.authority_ref, {
    origin: dest.origin,
    path: spec.path,
  });
  if (!cred.ok) {
    const locked = cred.failure.code === 'locked';
    return {
      ok: false,
      step: locked ? 'gate_locked' : 'credential_unavailable',
      category: locked ? 'gate_locked' : 'outcome_unknown',
      why: locked ? 'the vault is locked' : 'credential unavailable',
    };
  }
  for (const s of cred.secrets) redactor.addSecret(s);
  const method = spec.method.toUpperCase();
  const maxAnswerBytes = lookup.maxAnswerBytes ?? LOOKUP_MAX_ANSWER_BYTES;
  const read = (looked: Looked<HttpFound>): RecordsLooked => {
    if (looked.verdict === 'absent')
      return { ok: true, records: [], status: looked.evidence.status ?? null };
    if (looked.verdict === 'found') {
      const records = recordsOf(() =>
        lookup.matches(JSON.parse(Buffer.from(looked.found.body).toString('utf8')), params),
      );
      if (records) return { ok: true, records, status: looked.found.status };
    }
    const status = looked.verdict === 'found' ? looked.found.status : (looked.status ?? null);
    if (looked.verdict === 'failed' && looked.over_limit === true)
      return {
        ok: false,
        status,
        met: `it answered ${status ?? '?'} with a body over the limit of ${maxAnswerBytes} bytes`,
        conclusion: `lookup_answer_too_large: the lookup answered ${status ?? '?'} with a body over the limit of ${maxAnswerBytes} bytes, cut off there: nothing learned`,
      };
    return status === null
      ? {
          ok: false,
          status,
          met: `it got no answer (${looked.evidence.phase})`,
          conclusion: 'the lookup got no answer: nothing learned',
        }
      : {
          ok: false,
          status,
          met: `it answered ${status} with no usable list of records`,
          conclusion: `the lookup answered ${status} with no usable list of records: nothing learned`,
        };
  };
  return {
    ok: true,
    params,
    lookup: {
      checked: `${method} ${spec.path}`,
      request: lookup.route ?? `${method} ${spec.path.split('?')[0]!}`,
      send: async (signal) =>
        read(
          await lookupHttp(
            ctx,
            {
              kind: 'http',
              id: ids.mint('obs'),
              origin: dest.origin,
              method,
              path: spec.path,
              headers: {
                accept: 'application/json',
                'x-correlation-id': `${requestCtx.correlation_id}.lookup`,
                ...(spec.headers ?? {}),
                ...cred.headers,
              },
              ...(action.timeouts ? { timeouts: action.timeouts } : {}),
              reuse_connection: true,
              // Bounded like every answer read from outside: a huge body costs the cap, not its length.
              max_body_bytes: maxAnswerBytes,
              // A get-by-id that says "no such record": a negative observation, like an empty list.
              absent_on_404: lookup.shape === 'one',
            },
            signal,
          ),
        ),
      bind: (records) =>
        bindRecords(lookup, records, requestCtx, { input: params, openedAt: view.opened_at }),
      identifying: lookup.identify !== undefined,
      keyHonoured: (checkedAt) =>
        dest.idempotency?.honoured === true &&
        view.opened_at !== null &&
        checkedAt - view.opened_at < dest.idempotency.retention_ms,
    },
  };
}

/**
 * A proxied MCP tool's mapped upstream read tool (e.g. `read_text_file {path}` for `write_file`),
 * called through the same transport as the attempts; the configured rule counts the effects its
 * answer shows, each of them this operation's. Upstream MCP servers honour no idempotency key, so
 * an absent effect never licenses a retry: a person (or the agent, knowingly) decides.
 */
async function mcpRecordLookup(
  ctx: EngineContext,
  dest: McpDestination,
  view: OperationView,
): Promise<BuiltLookup> {
  const { ids, paramsOf } = ctx;
  const lookup = dest.reconciliation!;
  const params = await paramsOf(view.operation_id);
  let args: Record<string, unknown>;
  try {
    args = lookup.arguments(params);
  } catch {
    return {
      ok: false,
      step: 'lookup_failed',
      category: 'outcome_unknown',
      why: 'its arguments could not be built',
    };
  }
  const read = (looked: Looked<McpToolReply>): RecordsLooked => {
    if (looked.verdict === 'absent') return { ok: true, records: [], status: null };
    const e = looked.evidence;
    // The upstream's credential gave no token (a locked vault, no login, a lookup that must run
    // as the operation's caller): the adapter refused it before sending anything.
    if (looked.verdict === 'failed' && e.phase === 'not_sent') {
      if (e.blocked === 'gate_locked')
        return {
          ok: false,
          notSent: { step: 'gate_locked', category: 'gate_locked', why: 'the vault is locked' },
        };
      if (e.local_error === 'credential_unavailable' || e.error_code !== undefined)
        return {
          ok: false,
          notSent: {
            step: 'credential_unavailable',
            category: 'outcome_unknown',
            why: `credential unavailable${e.error_code ? `: ${e.error_code}` : ''}`,
          },
        };
    }
    const records =
      looked.verdict === 'found' ? recordsOf(() => lookup.matches(looked.found, params)) : null;
    if (records) return { ok: true, records, status: null };
    return looked.verdict === 'found'
      ? {
          ok: false,
          status: null,
          met: `${lookup.tool} answered with no usable list of effects`,
          conclusion: `the lookup tool ${lookup.tool} answered with no usable list of effects: nothing learned`,
        }
      : {
          ok: false,
          status: null,
          met: `it got no answer (${looked.evidence.phase}${looked.evidence.error_code ? `, ${looked.evidence.error_code}` : ''})`,
          conclusion: 'the lookup got no answer: nothing learned',
        };
  };
  return {
    ok: true,
    params,
    lookup: {
      checked: `${dest.upstream} ${lookup.tool}`,
      send: async (signal) =>
        read(
          await lookupMcp(
            ctx,
            {
              kind: 'mcp',
              id: ids.mint('obs'),
              upstream: dest.upstream,
              tool: lookup.tool,
              arguments: args,
              deadline_ms: dest.deadline_ms,
              operation_caller:
                view.caller && view.caller.kind === 'token'
                  ? { issuer: view.caller.issuer ?? null, subject: view.caller.subject }
                  : null,
            },
            signal,
          ),
        ),
      // The configured rule counts only this operation's effects: every one it names is bound.
      bind: (records) => ({ bound: records, unbound: [] }),
      keyHonoured: () => false,
    },
  };
}
