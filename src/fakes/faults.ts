// Fault specifications and the registry that arms them. A fault names the phase of one request at
// which the fake misbehaves. It is matched by request id (the `x-candor-call-id` or
// `x-correlation-id` header of the request equals `call_id`) or, for requests without an id, by
// method and route. Each fault fires `times` times (default once) and is then spent.
import { z } from 'zod';

/** The client-side "nothing left" variants: served by helper URLs, not by an armed fault. */
export const BeforeBytesVariant = {
  refused: 'refused',
  unresolvable: 'unresolvable',
  blackhole: 'blackhole',
} as const;
export type BeforeBytesVariant = (typeof BeforeBytesVariant)[keyof typeof BeforeBytesVariant];

export const MalformedVariant = {
  bad_status_line: 'bad_status_line',
  wrong_content_length: 'wrong_content_length',
  unframed_truncation: 'unframed_truncation',
  invalid_json: 'invalid_json',
  html_error: 'html_error',
  id_null: 'id_null',
  id_number: 'id_number',
  id_object: 'id_object',
  missing_field: 'missing_field',
  error_body_2xx: 'error_body_2xx',
  duplicated_items: 'duplicated_items',
  reordered_items: 'reordered_items',
} as const;
export type MalformedVariant = (typeof MalformedVariant)[keyof typeof MalformedVariant];

const close2 = z.enum(['fin', 'rst']);
const close3 = z.enum(['fin', 'rst', 'stall']);
const headerMap = z.record(z.string(), z.union([z.string(), z.number()]));

const matchSchema = z.strictObject({
  call_id: z.string().min(1).optional(),
  method: z.string().min(1).optional(),
  /** Exact path (no query) or a template with `:param` segments, e.g. `/v1/deployments/:id`. */
  path: z.string().startsWith('/').optional(),
});

const common = {
  /** Shorthand for `match.call_id`. */
  call_id: z.string().min(1).optional(),
  match: matchSchema.optional(),
  /** How many matching requests the fault affects; `always` never runs out. Default 1. */
  times: z.union([z.number().int().positive(), z.literal('always')]).optional(),
};

export const faultSchema = z.discriminatedUnion('phase', [
  z.strictObject({ ...common, phase: z.literal('after_request_headers'), action: close2 }),
  z.strictObject({ ...common, phase: z.literal('after_request_body'), action: close3 }),
  z.strictObject({
    ...common,
    phase: z.literal('after_commit'),
    action: z.enum(['delay', 'fin', 'rst']),
    /** For `delay`: how long the committed reply is held back. */
    delay_ms: z.number().int().nonnegative().optional(),
  }),
  z.strictObject({
    ...common,
    /**
     * The request reached the service (the proxy: written to the upstream; the fake: processed and
     * committed) and the client connection dies before any answer. The proxy still waits for the
     * upstream's answer, so the ground truth says whether it was applied.
     */
    phase: z.literal('after_forward'),
    action: close3,
  }),
  z.strictObject({
    ...common,
    phase: z.literal('during_response_body'),
    action: close3,
    /** Body bytes written before the fault (the head is always written whole). */
    at_byte: z.number().int().nonnegative(),
  }),
  z.strictObject({
    ...common,
    phase: z.literal('malformed'),
    variant: z.enum(Object.values(MalformedVariant) as [MalformedVariant, ...MalformedVariant[]]),
    /**
     * `html_error`: status of the HTML page (default 502). With `commit: false`: the status of
     * the stand-in error reply the other variants garble (default 502).
     */
    status: z.number().int().min(100).max(599).optional(),
    /** `missing_field`: which field is dropped (default `id`). */
    field: z.string().min(1).optional(),
    /**
     * Whether the request is processed (and a write committed) first. Default true. `false`: it
     * is not processed at all (nothing committed, no idempotency key taken) and the malformed
     * reply garbles a stand-in error answer.
     */
    commit: z.boolean().optional(),
  }),
  z.strictObject({
    ...common,
    phase: z.literal('status'),
    status: z.number().int().min(100).max(599),
    headers: headerMap.optional(),
    body: z.unknown().optional(),
    /** Seconds (number) or an HTTP date (string) for `Retry-After`. */
    retry_after: z.union([z.number().int().nonnegative(), z.string()]).optional(),
    /** Whether the request is processed (and a write committed) before this reply. Default false. */
    commit: z.boolean().optional(),
    /**
     * How long the reply is held back once it is ready (default 0): the answer arrives late, e.g.
     * at a gateway that was paused meanwhile. With `commit`, the key stays in progress until then.
     */
    delay_ms: z.number().int().nonnegative().optional(),
  }),
  z.strictObject({
    ...common,
    phase: z.literal('stale_socket'),
    /**
     * `reset_on_reuse` (default): the reply keeps the socket alive, then the next request on that
     * socket is answered by an RST without being read — the server "closed it just as the client
     * reused it". `fin_after_response`: FIN right after the reply, without `Connection: close`.
     */
    mode: z.enum(['reset_on_reuse', 'fin_after_response']).optional(),
  }),
]);

export type FaultSpec = z.input<typeof faultSchema>;
export type Fault = z.output<typeof faultSchema>;
export type FaultPhase = Fault['phase'];

export interface ArmedFault {
  readonly id: string;
  readonly fault: Fault;
  /** Remaining uses; `always` never runs out. */
  remaining: number | 'always';
  fired: number;
}

export interface RequestKey {
  callIds: readonly string[];
  method: string;
  path: string;
}

export class FaultRegistry {
  private armed: ArmedFault[] = [];
  private counter = 0;

  arm(fault: Fault): ArmedFault {
    this.counter += 1;
    const entry: ArmedFault = {
      id: `fault_${String(this.counter).padStart(4, '0')}`,
      fault,
      remaining: fault.times ?? 1,
      fired: 0,
    };
    this.armed.push(entry);
    return entry;
  }

  list(): readonly ArmedFault[] {
    return this.armed;
  }

  disarm(id?: string): void {
    this.armed = id === undefined ? [] : this.armed.filter((a) => a.id !== id);
  }

  /**
   * The fault for this request, consumed by one use. Faults armed by request id win over faults
   * matched by route; among equals the earliest armed wins.
   */
  take(key: RequestKey): ArmedFault | undefined {
    const byId = this.armed.find(
      (a) => a.remaining !== 0 && idOf(a.fault) !== undefined && matches(a.fault, key),
    );
    const hit =
      byId ??
      this.armed.find(
        (a) => a.remaining !== 0 && idOf(a.fault) === undefined && matches(a.fault, key),
      );
    if (!hit) return undefined;
    if (hit.remaining !== 'always') hit.remaining -= 1;
    hit.fired += 1;
    return hit;
  }
}

function idOf(f: Fault): string | undefined {
  return f.call_id ?? f.match?.call_id;
}

function matches(f: Fault, key: RequestKey): boolean {
  const id = idOf(f);
  if (id !== undefined && !key.callIds.includes(id)) return false;
  const m = f.match;
  if (m?.method !== undefined && m.method.toUpperCase() !== key.method.toUpperCase()) return false;
  if (m?.path !== undefined && !pathMatches(m.path, key.path)) return false;
  // A fault with neither id nor route would hit every request: refuse that silently-broad arming.
  return id !== undefined || m?.method !== undefined || m?.path !== undefined;
}

/** `/v1/deployments/:id` matches `/v1/deployments/dep_0001`; a plain path matches exactly. */
export function pathMatches(template: string, path: string): boolean {
  const t = template.split('/');
  const p = path.split('/');
  if (t.length !== p.length) return false;
  return t.every((seg, i) => (seg.startsWith(':') ? (p[i] ?? '') !== '' : seg === p[i]));
}

export type FaultParse =
  | { ok: true; value: Fault; failure?: never }
  | { ok: false; failure: { code: 'invalid_fault'; message: string }; value?: never };

/** Validates a fault from outside (admin API, matrix files). It must name a request id or a route. */
export function parseFault(input: unknown): FaultParse {
  const parsed = faultSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join('.') ?? '';
    return {
      ok: false,
      failure: {
        code: 'invalid_fault',
        message: `${where === '' ? '' : `${where}: `}${issue?.message ?? 'invalid'}`,
      },
    };
  }
  const f = parsed.data;
  if (idOf(f) === undefined && f.match?.method === undefined && f.match?.path === undefined) {
    return {
      ok: false,
      failure: {
        code: 'invalid_fault',
        message: 'a fault needs call_id, match.method or match.path',
      },
    };
  }
  if (f.call_id !== undefined && f.match?.call_id !== undefined && f.call_id !== f.match.call_id) {
    return {
      ok: false,
      failure: { code: 'invalid_fault', message: 'call_id and match.call_id differ' },
    };
  }
  return { ok: true, value: f };
}
