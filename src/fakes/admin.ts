// The admin API under `/_candor/`, so a fake started by `candor fake serve` can be driven from
// another process. Admin requests are never faulted and never appear in the ground truth.
//   GET    /_candor/health
//   POST   /_candor/faults                 arm (body: a fault); before_bytes answers { url }
//   GET    /_candor/faults                 armed faults with remaining uses
//   DELETE /_candor/faults[/:id]           disarm one or all
//   GET    /_candor/truth[?call_id=]       ground truth as JSONL
//   GET    /_candor/resources/:kind        stored resources, deleted ones included
//   POST   /_candor/reset                  state, keys, faults, truth and counters (fixtures re-armed)
//   GET    /_candor/tokens                 token names, scopes, uses, expiry (never the values)
//   POST   /_candor/tokens                 add a token
//   POST   /_candor/tokens/:name/expire    expire a token now
//   PUT    /_candor/idempotency/:route     body { mode: required|honoured|ignored }
//   GET    /_candor/unreachable/:variant   { url } for refused | unresolvable | blackhole
import { z } from 'zod';
import { tokenSpecSchema, type TokenBook } from './auth.js';
import type { AdminRequest } from './connection.js';
import { parseFault, type FaultRegistry } from './faults.js';
import type { StoredResponse } from './idempotency.js';
import { IdempotencyMode, type ResourceStore } from './resources.js';
import { toJsonl, type TruthLog } from './truth.js';

export interface AdminTarget {
  faults: FaultRegistry;
  truth: TruthLog;
  resources: ResourceStore;
  tokens: TokenBook;
  setIdempotency(routeKey: string, mode: IdempotencyMode): boolean;
  unreachableUrl(variant: string): Promise<string | undefined>;
  reset(): void;
}

const modeBody = z.strictObject({
  mode: z.enum(Object.values(IdempotencyMode) as [IdempotencyMode, ...IdempotencyMode[]]),
});

export async function handleAdmin(t: AdminTarget, req: AdminRequest): Promise<StoredResponse> {
  const segs = req.path
    .split('/')
    .filter((s) => s !== '')
    .slice(1)
    .map(decodeURIComponent);
  const route = `${req.method.toUpperCase()} ${segs[0] ?? ''}`;
  const body = parseJson(req.body);
  switch (route) {
    case 'GET health':
      return json(200, { ok: true });
    case 'POST faults': {
      if (isObject(body) && body['phase'] === 'before_bytes') {
        const url = await t.unreachableUrl(String(body['variant']));
        return url === undefined
          ? json(400, {
              error: 'invalid_fault',
              message: 'variant: refused, unresolvable or blackhole',
            })
          : json(200, { url });
      }
      const parsed = parseFault(body);
      if (!parsed.ok)
        return json(400, { error: parsed.failure.code, message: parsed.failure.message });
      const armed = t.faults.arm(parsed.value);
      return json(201, { id: armed.id, remaining: armed.remaining });
    }
    case 'GET faults':
      return json(200, { faults: t.faults.list() });
    case 'DELETE faults':
      t.faults.disarm(segs[1]);
      return json(200, { ok: true });
    case 'GET truth': {
      const callId = req.query.get('call_id') ?? undefined;
      return {
        status: 200,
        headers: { 'content-type': 'application/x-ndjson' },
        body: Buffer.from(toJsonl(t.truth.query(callId))),
      };
    }
    case 'GET resources': {
      const kind = segs[1] ?? '';
      if (t.resources.spec(kind) === undefined) return json(404, { error: 'unknown_kind' });
      return json(200, { items: t.resources.all(kind) });
    }
    case 'POST reset':
      t.reset();
      return json(200, { ok: true });
    case 'GET tokens':
      return json(200, { tokens: t.tokens.list() });
    case 'POST tokens': {
      if (segs.length === 3 && segs[2] === 'expire') {
        return t.tokens.expire(segs[1] ?? '')
          ? json(200, { ok: true })
          : json(404, { error: 'unknown_token' });
      }
      const parsed = tokenSpecSchema.safeParse(body);
      if (!parsed.success) return json(400, { error: 'invalid_token_spec' });
      t.tokens.add(parsed.data);
      return json(201, { name: parsed.data.name });
    }
    case 'PUT idempotency': {
      const parsed = modeBody.safeParse(body);
      if (!parsed.success) return json(400, { error: 'invalid_mode' });
      return t.setIdempotency(segs.slice(1).join('/'), parsed.data.mode)
        ? json(200, { ok: true })
        : json(404, { error: 'unknown_route' });
    }
    case 'GET unreachable': {
      const url = await t.unreachableUrl(segs[1] ?? '');
      return url === undefined ? json(404, { error: 'unknown_variant' }) : json(200, { url });
    }
    default:
      return json(404, { error: 'not_found' });
  }
}

function json(status: number, body: unknown): StoredResponse {
  return { status, headers: {}, body };
}

function parseJson(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
