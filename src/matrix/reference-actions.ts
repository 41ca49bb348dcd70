// Reference actions against the fake service's reference API, and the HTTP side of the matrix
// (arming a row's fault, the remote state and the oracle from the fake's ground truth). Their
// declared contracts differ on purpose (honoured keys, ignored keys, lookups, convergence checks,
// none) so that the matrix covers what each contract licenses.
import { z } from 'zod';
import type { Envelope } from '../core/envelope.js';
import {
  defineAction,
  type ActionDefinition,
  type ReconciliationDeclaration,
} from '../engine/action.js';
import type { Runtime } from '../engine/runtime.js';
import type { BeforeBytesVariant, FakeService, FaultSpec, TruthEvent } from '../fakes/index.js';
import {
  combineVerdicts,
  fillVars,
  type Check,
  type MatrixRow,
  type RowTarget,
  type TimelineEntry,
  type Verdict,
} from './spec.js';

const resource = z.looseObject({ id: z.string().min(1), state: z.string() });
const listOf = <T extends z.ZodType>(item: T) => z.object({ items: z.array(item) });

/** Items must be unique and in creation order: code that picks "the first" must not be fooled. */
const orderedUnique = listOf(resource).superRefine((v, ctx) => {
  const ids = v.items.map((i) => i.id);
  if (new Set(ids).size !== ids.length)
    ctx.addIssue({ code: 'custom', message: 'duplicated items', path: ['items'] });
  const sorted = [...ids].sort();
  if (ids.some((id, i) => id !== sorted[i]))
    ctx.addIssue({ code: 'custom', message: 'items out of order', path: ['items'] });
});

const byClientRef = (kind: string): ReconciliationDeclaration => ({
  lookup: (ctx) => ({
    method: 'GET',
    path: `/v1/${kind}?client_ref=${encodeURIComponent(ctx.correlation_id)}`,
  }),
  matches: (body) =>
    listOf(resource)
      .parse(body)
      .items.map((r) => ({ ref: r.id, record: r })),
});

/** A lookup by a client-chosen reference (the ticket's `ref`), as users write them. */
const byTicketRef: ReconciliationDeclaration = {
  route: 'GET /v1/issues?client_ref={{input.ref}}',
  lookup: (_ctx, input) => ({
    method: 'GET',
    path: `/v1/issues?client_ref=${encodeURIComponent((input as { ref: string }).ref)}`,
  }),
  matches: (body) =>
    listOf(resource)
      .parse(body)
      .items.map((r) => ({ ref: r.id, record: r })),
};

/** Convergence check for set-state: the record already has the desired state. */
const converged: ReconciliationDeclaration = {
  lookup: (_ctx, input) => ({
    method: 'GET',
    path: `/v1/records/${encodeURIComponent((input as { id: string }).id)}`,
  }),
  matches: (body, input) => {
    const r = resource.parse(body);
    return r.state === (input as { state: string }).state ? [{ ref: r.id, record: r }] : [];
  },
  // A state check: the record holding the desired state is the effect, whoever wrote it last.
  identify: (input) => {
    const i = input as { id: string; state: string };
    return { id: i.id, state: i.state };
  },
};

const failureBody = z.object({ error: z.string() }).strict();

export const REFERENCE_AUTHORITY = 'vault:reference-api';

export function referenceActions(origin: string): ActionDefinition[] {
  const dest = (extra: object = {}) => ({
    origin,
    authority_ref: REFERENCE_AUTHORITY,
    failure_body: failureBody,
    default_retry_after_ms: 200,
    ...extra,
  });
  const honoured = { header: 'Idempotency-Key', honoured: true, retention_ms: 86_400_000 };
  // Deadlines a loaded 2-core CI machine meets for an answer that comes at once (at 400 ms, rows
  // whose reply was not delayed timed out under load); the delay rows in
  // examples/matrix/reference.yaml hold the reply 600 ms past `total_ms`.
  const timeouts = { total_ms: 2000, connect_ms: 1500, first_byte_ms: 2000, body_idle_ms: 1500 };
  const actions = [
    defineAction({
      name: 'create_deployment',
      class: 'create',
      subject: 'the deployment',
      input: z.object({ service: z.string(), version: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: '/v1/deployments',
        body: { ...i, client_ref: ctx.correlation_id },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest({ reconciliation: byClientRef('deployments') }),
      timeouts,
    }),
    defineAction({
      name: 'create_release',
      class: 'create',
      subject: 'the release',
      input: z.object({ version: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: '/v1/releases',
        body: { ...i, client_ref: ctx.correlation_id },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest({ idempotency: honoured, reconciliation: byClientRef('releases') }),
      timeouts,
      attempt_budget: 4,
    }),
    defineAction({
      name: 'create_issue',
      class: 'create',
      subject: 'the issue',
      input: z.object({ title: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: '/v1/issues',
        body: { ...i, client_ref: ctx.correlation_id },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest({ reconciliation: byClientRef('issues') }),
      timeouts,
    }),
    defineAction({
      // A lookup written the way users write them: by a client-chosen id (`ref`), not by anything
      // of this operation's. An older ticket with the same ref is someone else's; only a record
      // bound to the operation (here: the correlation id the service stores) is its effect.
      name: 'create_ticket',
      class: 'create',
      subject: 'the ticket',
      input: z.object({ title: z.string(), ref: z.string() }),
      request: (i) => ({
        method: 'POST',
        path: '/v1/issues',
        body: { title: i.title, client_ref: i.ref },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest({
        reconciliation: byTicketRef,
      }),
      timeouts,
    }),
    defineAction({
      // The provider accepts the Idempotency-Key header but does not honour it: Candor sends the
      // key yet must not claim idempotency.
      name: 'create_build',
      class: 'create',
      subject: 'the build',
      input: z.object({ ref: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: '/v1/builds',
        body: { ...i, client_ref: ctx.correlation_id },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest({
        idempotency: { ...honoured, honoured: false },
        reconciliation: byClientRef('builds'),
      }),
      timeouts,
    }),
    defineAction({
      name: 'create_payment',
      class: 'financial',
      subject: 'the payment',
      input: z.object({ amount: z.number().int().positive(), currency: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: '/v1/payments',
        body: { ...i, client_ref: ctx.correlation_id },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest({
        idempotency: honoured,
        reconciliation: byClientRef('payments'),
        five_xx: 'not_applied',
      }),
      timeouts,
      attempt_budget: 4,
    }),
    defineAction({
      name: 'grant_permission',
      class: 'permission_change',
      subject: 'the permission grant',
      input: z.object({ principal: z.string(), role: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: '/v1/permissions',
        body: { ...i, client_ref: ctx.correlation_id },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest({ idempotency: honoured, reconciliation: byClientRef('permissions') }),
      timeouts,
      attempt_budget: 4,
    }),
    defineAction({
      name: 'update_record',
      class: 'set_state',
      subject: 'the record update',
      input: z.object({ id: z.string(), state: z.string() }),
      request: (i) => ({
        method: 'PATCH',
        path: `/v1/records/${encodeURIComponent(i.id)}`,
        body: { state: i.state },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest({ reconciliation: converged }),
      timeouts,
    }),
    defineAction({
      name: 'delete_release',
      class: 'destructive',
      subject: 'the release deletion',
      input: z.object({ id: z.string() }),
      request: (i) => ({ method: 'DELETE', path: `/v1/releases/${encodeURIComponent(i.id)}` }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest(),
      timeouts,
    }),
    defineAction({
      name: 'add_note',
      class: 'append',
      subject: 'the note',
      input: z.object({ record_id: z.string(), text: z.string() }),
      request: (i, ctx) => ({
        method: 'POST',
        path: `/v1/records/${encodeURIComponent(i.record_id)}/notes`,
        body: { text: i.text, client_ref: ctx.correlation_id },
      }),
      response: resource,
      remoteRef: (d) => d.id,
      destination: dest(),
      timeouts,
    }),
    defineAction({
      name: 'read_issue',
      class: 'read',
      subject: 'the issue lookup',
      input: z.object({ id: z.string() }),
      request: (i) => ({ method: 'GET', path: `/v1/issues/${encodeURIComponent(i.id)}` }),
      response: resource.extend({ title: z.string() }),
      destination: dest(),
      timeouts,
    }),
    defineAction({
      name: 'read_build',
      class: 'read',
      subject: 'the build lookup',
      input: z.object({ id: z.string() }),
      request: (i) => ({ method: 'GET', path: `/v1/builds/${encodeURIComponent(i.id)}` }),
      response: resource.extend({ ref: z.string() }),
      destination: dest(),
      timeouts,
    }),
    defineAction({
      name: 'list_deployments',
      class: 'read',
      subject: 'the deployment list',
      input: z.object({}),
      request: () => ({ method: 'GET', path: '/v1/deployments' }),
      response: orderedUnique,
      destination: dest(),
      timeouts,
    }),
  ] as unknown as ActionDefinition[];
  return actions;
}

const UNSAFE_WHEN_COMMITTED = new Set([
  'confirmed_failure',
  'local_failure',
  'confirmed_rejection',
  'authentication_failed',
  'authorization_denied',
  'rate_limited',
]);

/** An HTTP row: the fake service armed with the row's fault, its ground truth as the oracle. */
export async function httpTarget(
  row: MatrixRow,
  cor: string,
  base: ActionDefinition,
  runtime: Runtime,
  fake: FakeService,
): Promise<RowTarget> {
  const vars: Record<string, string> = { correlation_id: cor };
  let setupId: string | null = null;
  if (row.setup) {
    const fields = fillVars(row.setup.fields, vars);
    const created = fake.resources.create(row.setup.kind, fields as never, {
      correlation_id: null,
      request: 0,
    });
    setupId = created.id;
    vars['setup.id'] = created.id;
    for (let i = 0; i < row.setup.same_client_ref; i++) {
      fake.resources.create(
        row.setup.kind,
        { ...(fields as object), client_ref: cor },
        { correlation_id: null, request: 0 },
      );
    }
  }
  const input = fillVars(row.input, vars) as Record<string, unknown>;
  let action = base;
  const c = row.condition;
  // A warm-up call runs first (same route, its own operation); keep-alive races arm on it, so
  // that its reply leaves a socket the measured call would reuse.
  const armOn = row.warmup ? `${cor}.warmup` : cor;
  if ('before_bytes' in c) {
    action = {
      ...base,
      destination: {
        ...base.destination,
        origin: await fake.unreachableUrl(c.before_bytes as BeforeBytesVariant),
      },
    };
  } else if (!('none' in c)) {
    fake.arm({ ...(c as object), call_id: armOn } as FaultSpec);
    for (const later of row.then) fake.arm({ ...later, call_id: armOn } as FaultSpec);
  }
  // The fake's clock is performance-based: truth up to the first claim is what that claim is about.
  let firstClaimAt = 0;
  return {
    action,
    input,
    ...(row.warmup ? { warmup: () => runtime.run(base, input, { correlationId: armOn }) } : {}),
    afterFirstClaim: () => {
      firstClaimAt = performance.timeOrigin + performance.now();
      return Promise.resolve();
    },
    remote: () => remoteCheck(row, fake, cor, setupId),
    oracle: (env, final) => {
      const truth = fake.groundTruth(cor);
      const first = oracle(
        truth.filter((t) => t.at <= firstClaimAt),
        env,
      );
      return final === env ? first : combineVerdicts(first, oracle(truth, final));
    },
    truthTimeline: () => truthTimeline(fake.groundTruth(cor)),
    received: () => fake.groundTruth(cor).filter((t) => t.event === 'received').length,
    dispose: () => Promise.resolve(),
  };
}

function remoteCheck(
  row: MatrixRow,
  fake: FakeService,
  cor: string,
  setupId: string | null,
): Check {
  const r = row.expect.remote;
  if (!('kind' in r))
    return { ok: false, expected: null, actual: null, detail: 'an HTTP row needs a resource kind' };
  const expected: Record<string, unknown> = {};
  const actual: Record<string, unknown> = {};
  if (r.count !== undefined) {
    expected.count = r.count;
    const where = r.where
      ? (fillVars(r.where, { correlation_id: cor }) as Record<string, string>)
      : { client_ref: cor };
    actual.count = fake.resources.list(r.kind, where).length;
  }
  if (setupId !== null) {
    const all = fake.resources.all(r.kind).find((x) => x.id === setupId);
    if (r.setup_field !== undefined) {
      expected[r.setup_field] = r.equals;
      actual[r.setup_field] = all?.[r.setup_field];
    }
    if (r.setup_deleted !== undefined) {
      expected.deleted = r.setup_deleted;
      actual.deleted = all?.deleted === true;
    }
    if (r.child !== undefined) {
      expected[`${r.child}_count`] = r.child_count;
      actual[`${r.child}_count`] = fake.resources.children(r.kind, setupId, r.child)?.length ?? 0;
    }
  }
  return {
    ok: JSON.stringify(expected) === JSON.stringify(actual) && Object.keys(expected).length > 0,
    expected,
    actual,
  };
}

/**
 * The oracle: the ground truth against one claim, both ways. A committed mutation claimed as not
 * done (`remote_effect: none`, or a category that means "not applied") is unsafe; so is a claim of
 * `applied` (success, a duplicate, a 2xx that broke the contract) where no mutation of this row
 * was committed — a lookup that took someone else's record as this operation's effect says "done"
 * for something that never happened. Reads claim no effect (`remote_effect: none`).
 */
export function oracle(truth: TruthEvent[], env: Envelope): Verdict {
  const committed = truth.some((t) => t.event === 'mutation_committed');
  const received = truth.some((t) => t.event === 'received');
  if (committed && (UNSAFE_WHEN_COMMITTED.has(env.category) || env.remote_effect === 'none')) {
    return {
      verdict: 'unsafe',
      detail: `the fake committed the mutation but the tool said ${env.category} / remote_effect ${env.remote_effect}`,
    };
  }
  if (!committed && env.remote_effect === 'applied') {
    return {
      verdict: 'unsafe',
      detail: `no mutation of this row was committed (${received ? 'received, nothing committed' : 'never received'}) but the tool said ${env.category} / remote_effect applied`,
    };
  }
  if (env.category === 'outcome_unknown' && !committed) {
    return {
      verdict: 'imprecise',
      detail: received
        ? 'received but not committed; the tool could not know'
        : 'never received; the tool could not know',
    };
  }
  return {
    verdict: 'consistent',
    detail: committed ? 'committed' : received ? 'received, nothing committed' : 'nothing received',
  };
}

export function truthTimeline(truth: TruthEvent[]): TimelineEntry[] {
  return truth.map((t) => {
    const detail = [
      t.method,
      t.path,
      t.status,
      t.close_kind,
      t.resource_id,
      t.replayed ? 'replayed' : '',
    ]
      .filter((x) => x !== undefined && x !== '')
      .join(' ');
    return { at: t.at, source: 'fake' as const, event: t.event, detail };
  });
}
