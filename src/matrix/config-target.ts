// The HTTP side of a row on the user's own actions, against the OpenAPI fake or through the proxy
// (both are the fake's sockets, faults and ground truth): create the setup record through the
// service itself, arm the row's fault by correlation id, and take the remote state and the oracle
// from the ground truth — "mutation_committed" is a committed write in the fake, and "forwarded,
// upstream answered 2xx" behind the proxy.
import { randomInt } from 'node:crypto';
import type { ActionDefinition } from '../engine/action.js';
import type { Runtime } from '../engine/runtime.js';
import type { BeforeBytesVariant, FakeService, FaultSpec } from '../fakes/index.js';
import type { ProxyService } from '../fakes/proxy.js';
import { oracle, truthTimeline } from './reference-actions.js';
import {
  combineVerdicts,
  UNIQUE_INT_MAX,
  type Check,
  type MatrixRow,
  type RowTarget,
} from './spec.js';

/** `{{name}}` substitution that keeps the value's type when the string is exactly one placeholder. */
function fill(value: unknown, vars: Record<string, unknown>): unknown {
  if (typeof value === 'string') {
    const whole = /^\{\{(\w+(?:\.\w+)?)\}\}$/.exec(value);
    if (whole && Object.hasOwn(vars, whole[1]!)) return vars[whole[1]!];
    return value.replace(/\{\{(\w+(?:\.\w+)?)\}\}/g, (m, k: string) =>
      Object.hasOwn(vars, k) ? String(vars[k]) : m,
    );
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, vars));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, vars)]));
  return value;
}

export function configTarget(actions: ReadonlyMap<string, ActionDefinition>) {
  return async function target(
    row: MatrixRow,
    cor: string,
    base: ActionDefinition,
    runtime: Runtime,
    fake: FakeService,
  ): Promise<RowTarget> {
    // Client-chosen ids of generated rows are unique to the row and the run (config-rows.ts).
    const vars: Record<string, unknown> = {
      correlation_id: cor,
      unique_int: randomInt(1, UNIQUE_INT_MAX + 1),
    };
    let setupAt = 0;
    let setupOp: string | null = null;
    if (row.setup?.action !== undefined) {
      const creator = actions.get(row.setup.action);
      if (!creator) throw new Error(`setup.action "${row.setup.action}" is no configured action`);
      const made = await runtime.run(creator, fill(row.setup.input ?? {}, vars), {
        correlationId: `${cor}.setup`,
      });
      const id =
        made.ok && made.data && typeof made.data === 'object'
          ? (made.data as Record<string, unknown>).id
          : undefined;
      if (id === undefined)
        throw new Error(
          `setup: ${row.setup.action} did not create a record (${made.category}); the row cannot run`,
        );
      vars['setup.id'] = id;
      setupOp = made.operation_id;
      setupAt = performance.timeOrigin + performance.now();
    }
    const input = fill(row.input, vars) as Record<string, unknown>;
    let action = base;
    const c = row.condition;
    // This row's faults only: a row finishing beside another must not disarm the other's.
    const armed: string[] = [];
    if ('before_bytes' in c) {
      action = {
        ...base,
        destination: {
          ...base.destination,
          origin: await fake.unreachableUrl(c.before_bytes as BeforeBytesVariant),
        },
      };
    } else if (!('none' in c)) {
      armed.push(fake.arm({ ...(c as object), call_id: cor } as FaultSpec).id);
      for (const later of row.then)
        armed.push(fake.arm({ ...later, call_id: cor } as FaultSpec).id);
    }
    let firstClaimAt = 0;
    const now = (): number => performance.timeOrigin + performance.now();
    return {
      action,
      input,
      afterFirstClaim: async () => {
        firstClaimAt = now();
        // Behind the proxy a cut-off client does not end the request: wait for the upstream.
        if ('settled' in fake) await (fake as ProxyService).settled(cor);
      },
      remote: () => remoteCheck(row, fake, cor),
      oracle: (env, final) => {
        const truth = fake.groundTruth(cor);
        // The first claim is about the requests that had arrived by then, whenever their answer
        // came (a proxied upstream may answer after the client was cut off).
        const early = new Set(
          truth.filter((t) => t.event === 'received' && t.at <= firstClaimAt).map((t) => t.request),
        );
        const first = oracle(
          truth.filter((t) => early.has(t.request)),
          env,
        );
        return final === env ? first : combineVerdicts(first, oracle(truth, final));
      },
      // The setup record's id goes into the timeline: an outside check (a service's own data
      // file) can find what a delete or an update was about.
      truthTimeline: () => [
        ...(vars['setup.id'] !== undefined
          ? [
              {
                at: setupAt,
                source: 'fake' as const,
                event: 'setup_created',
                detail: JSON.stringify({ id: vars['setup.id'], operation_id: setupOp }),
              },
            ]
          : []),
        ...truthTimeline(fake.groundTruth(cor)),
      ],
      dispose: () => {
        for (const id of armed) fake.disarm(id);
        return Promise.resolve();
      },
    };
  };
}

/** How many writes of this row the service applied, by its own ground truth. */
function remoteCheck(row: MatrixRow, fake: FakeService, cor: string): Check {
  const r = row.expect.remote;
  if (!('kind' in r) || r.count === undefined)
    return {
      ok: false,
      expected: null,
      actual: null,
      detail: 'a row on a configured action needs remote: { kind, count }',
    };
  const applied = fake.groundTruth(cor).filter((t) => t.event === 'mutation_committed').length;
  return {
    ok: applied === r.count,
    expected: { applied_writes: r.count },
    actual: { applied_writes: applied },
    ...(applied > r.count
      ? { detail: 'the service applied the write more than once (a duplicate)' }
      : {}),
  };
}
