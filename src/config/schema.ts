// The gateway configuration (`candor.yaml`): credentials by reference, destinations with their
// declared contracts, and actions that become MCP tools. Every object is strict: an unknown key is
// an error, because a typo (`idempotncy:`) must never silently weaken a contract.
import { z } from 'zod';
import { approvalsWebSchema } from './approvals-web-schema.js';
import { upstreamsSchema } from './upstream-schema.js';
import { ActionClass, valuesOf } from '../core/vocabulary.js';
import { DEFAULT_LEDGER_URL, parseLedgerUrl } from '../ledger/open.js';
import { sshConfigSchema } from './ssh-schema.js';
import { gatewayAuthSchema, isLoopbackHost } from './gateway-auth-schema.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A path on the destination's origin: one leading `/`, never `//host` (another host). */
const ORIGIN_PATH = /^\/(?!\/)/;
const ORIGIN_PATH_PROBLEM =
  'a path starts with a single "/" (a path starting "//" names another host)';

/** A JSON Schema written in YAML; converted to zod (z.fromJSONSchema) and checked at load. */
const jsonSchemaObject = z
  .record(z.string(), z.unknown())
  .describe('a JSON Schema (draft 2020-12 subset supported by zod fromJSONSchema)');

const credentialSchema = z
  .strictObject({
    ref: z
      .string()
      .regex(
        /^(env:[A-Za-z_][A-Za-z0-9_]{0,127}|vault:[A-Za-z0-9][A-Za-z0-9._-]{0,63})$/,
        'a credential reference is env:VAR or vault:NAME; the value itself never goes in this file',
      ),
    header: z
      .string()
      .regex(HEADER_TOKEN, 'not a valid HTTP header name')
      .optional()
      .describe('header that carries the credential (default authorization); env: references only'),
    scheme: z
      .enum(['Bearer', 'Basic'])
      .optional()
      .describe('authorization scheme; without one the value is sent as-is (an API key header)'),
    username: z.string().min(1).optional().describe('for scheme Basic'),
  })
  .describe('where a credential comes from and how it is presented; never its value');

const idempotencySchema = z.strictObject({
  header: z.string().regex(HEADER_TOKEN, 'not a valid HTTP header name').default('Idempotency-Key'),
  honoured: z
    .boolean()
    .describe('the destination documents and honours the key (replays instead of re-executing)'),
  retention_ms: z.number().int().positive().describe('how long the destination keeps keys'),
});

const destinationSchema = z.strictObject({
  origin: z
    .string()
    .regex(/^https?:\/\/[^/?#@\s]+$/, 'an origin is http(s)://host[:port] with no path')
    .describe('where requests go'),
  credential: z.string().optional().describe('a name under `credentials`'),
  route_prefix: z
    .string()
    .startsWith('/')
    .default('/')
    .describe(
      'the credential is bound to origin + this prefix; every action path must lie under it',
    ),
  idempotency: idempotencySchema.optional(),
  five_xx: z
    .enum(['unknown', 'not_applied'])
    .default('unknown')
    .describe('what a 5xx means here: unknown (default) or documented "not applied"'),
  failure_body: jsonSchemaObject
    .optional()
    .describe('the documented "not applied" failure body, as a JSON Schema'),
});

const methodSchema = z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

const requestSchema = z.strictObject({
  method: methodSchema,
  path: z
    .string()
    .regex(ORIGIN_PATH, ORIGIN_PATH_PROBLEM)
    .describe('path and query; {{input.x}}, {{operation_id}}, {{correlation_id}} are URL-encoded'),
  headers: z
    .record(z.string().regex(HEADER_TOKEN, 'not a valid HTTP header name'), z.string())
    .optional(),
  body: z
    .unknown()
    .optional()
    .describe('JSON body template; a string that is exactly one placeholder keeps the value type'),
});

const reconcileSchema = z
  .strictObject({
    method: methodSchema.default('GET'),
    path: z
      .string()
      .regex(ORIGIN_PATH, ORIGIN_PATH_PROBLEM)
      .describe('lookup path; placeholders as in request.path (the recorded input is available)'),
    shape: z
      .enum(['list', 'one'])
      .default('list')
      .describe(
        'list: the body holds the matching records at `items`; one: a get-by-id, the body is the record and 404 means absent',
      ),
    items: z
      .string()
      .min(1)
      .default('items')
      .describe('dot path of the array of matching records; `.` when the body is the array'),
    ref: z
      .string()
      .min(1)
      .default('id')
      .describe('field of each record that is its remote reference'),
    identify: z
      .record(z.string().min(1), z.string())
      .refine(
        (v) => Object.keys(v).length > 0,
        'identify names at least one field (or leave it out)',
      )
      .optional()
      .describe(
        "the action's identifying fields: record field (dot path) -> template; a record whose fields ALL equal counts as this operation's (unless older than it, see created_at)",
      ),
    created_at: z
      .string()
      .min(1)
      .optional()
      .describe(
        "the record field with its creation time (ISO 8601 or epoch seconds/ms); a record older than the operation is not this operation's",
      ),
    max_answer_bytes: z
      .number()
      .int()
      .min(1024)
      .max(268_435_456)
      .default(4_194_304)
      .describe(
        "the largest lookup answer read (bytes, default 4 MiB); past it reading stops and the lookup learned nothing (the action's timeouts bound its time)",
      ),
  })
  .describe(
    "a read that finds the records this operation created; a record counts as this operation's only when it carries the operation's id, idempotency key or correlation value, or matches every `identify` field",
  );

const timeoutsSchema = z.strictObject({
  connect_ms: z.number().int().positive().optional(),
  write_ms: z.number().int().positive().optional(),
  first_byte_ms: z.number().int().positive().optional(),
  body_idle_ms: z.number().int().positive().optional(),
  total_ms: z.number().int().positive().optional(),
});

export const actionConfigSchema = z.strictObject({
  name: z
    .string()
    .regex(/^[a-z][a-z0-9_]{0,63}$/, 'action names are snake_case (a-z, 0-9, _), at most 64'),
  class: z.enum(valuesOf(ActionClass)),
  subject: z.string().min(1).describe('a short noun for messages, e.g. "the record"'),
  description: z.string().min(1).describe('what the tool does, for the agent'),
  title: z.string().min(1).optional(),
  destination: z.string().describe('a name under `destinations`'),
  request: requestSchema,
  input: jsonSchemaObject
    .default({ type: 'object', properties: {}, additionalProperties: false })
    .describe('JSON Schema of the tool arguments (type: object)'),
  response: jsonSchemaObject
    .default({})
    .describe('JSON Schema of a successful response body; a body that breaks it is malformed'),
  remote_ref: z
    .string()
    .min(1)
    .optional()
    .describe('field of the response that is the target-assigned id'),
  subject_ref: z.string().min(1).optional().describe('template, e.g. "record:{{input.id}}"'),
  openapi_operation_id: z
    .string()
    .min(1)
    .optional()
    .describe('the OpenAPI operationId this action was generated from (metadata only)'),
  reconcile: reconcileSchema.optional(),
  timeouts: timeoutsSchema.optional(),
  attempt_budget: z.number().int().min(1).max(10).optional(),
});

/** `scheme://host[:port]` exactly as a browser sends it in `Origin` (http or https, no path). */
function isOrigin(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.origin === value;
  } catch {
    return false;
  }
}

/** An IANA time zone name the runtime knows (Intl), e.g. `Europe/Berlin`, or `UTC`. */
function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

const policyFilesSchema = z
  .array(z.string().min(1))
  .min(1)
  .describe('Cedar policy files, relative to this file');

const policySchema = z
  .union([
    policyFilesSchema,
    z.strictObject({
      files: policyFilesSchema,
      zone: z
        .string()
        .refine(isTimeZone, 'not a time zone name (e.g. UTC, Europe/Berlin)')
        .default('UTC')
        .describe('time zone of context.time (hour, weekday, date) and of `window: day`'),
      totals: z
        .record(
          z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, 'total names are snake_case'),
          z.strictObject({
            argument: z.string().min(1).describe('the numeric (integer) argument summed'),
            actions: z
              .array(z.string().min(1))
              .min(1)
              .optional()
              .describe('actions counted (default: every action with that argument)'),
            per: z
              .enum(['principal', 'session', 'action'])
              .default('principal')
              .describe('whose operations are counted: the same caller, session or action'),
            window: z
              .string()
              .regex(
                /^(day|[1-9][0-9]{0,5}[smhd])$/,
                'a window is `day` (since midnight in the zone) or a duration such as 30m, 24h, 7d',
              )
              .describe('day, or a rolling duration (s, m, h, d)'),
          }),
        )
        .default({})
        .describe('rolling totals in context.totals.NAME {count, sum}; unknown outcomes count'),
    }),
  ])
  .describe(
    'Cedar policies decided before every attempt (docs/policy.md): a list of files, or { files, zone, totals }',
  );

export const configSchema = z.strictObject({
  version: z.literal(1).optional(),
  ledger: z
    .string()
    .min(1)
    .superRefine((url, ctx) => {
      const parsed = parseLedgerUrl(url);
      if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.failure.message });
    })
    .default(DEFAULT_LEDGER_URL)
    .describe('sqlite:PATH, memory: or postgres://…'),
  vault: z
    .strictObject({
      path: z.string().min(1).optional(),
      key_file: z.string().min(1),
    })
    .optional()
    .describe('the encrypted credential store used by vault: references'),
  credentials: z
    .record(
      z.string().regex(NAME, 'credential names are 1-64 of A-Z a-z 0-9 . _ -'),
      credentialSchema,
    )
    .default({}),
  destinations: z
    .record(
      z.string().regex(NAME, 'destination names are 1-64 of A-Z a-z 0-9 . _ -'),
      destinationSchema,
    )
    .default({}),
  actions: z.array(actionConfigSchema).default([]),
  ssh: sshConfigSchema.optional(),
  upstreams: upstreamsSchema,
  fleet: z
    .strictObject({
      /** How long a heartbeat keeps this gateway's ownership lease (renewed every third). */
      lease_ms: z.number().int().min(1_000).max(3_600_000).default(30_000),
      /** At start, settle the operations of gateways whose lease has lapsed. */
      recover_on_start: z.boolean().default(true),
      /** Then every N ms (0: never); on PostgreSQL also at once when another gateway releases its lease. */
      sweep_every_ms: z.number().int().min(0).default(60_000),
    })
    .optional()
    .describe('several gateways on one ledger: ownership leases and takeover of dead owners'),
  telemetry: z
    .strictObject({
      /** OTLP/HTTP collector base URL; spans go to URL/v1/traces, metrics to URL/v1/metrics. */
      otlp: z.url({ protocol: /^https?$/ }).optional(),
      /** How often metrics are exported (default 60 s; a last export happens at shutdown). */
      metrics_interval_ms: z.number().int().min(100).max(86_400_000).optional(),
    })
    .optional()
    .describe('OpenTelemetry: spans per operation call and attempt, counters'),
  approvals: z
    .strictObject({
      /**
       * Who answers: MCP elicitation when the client supports it (else the console), the
       * `candor approve` console, or a terminal prompt on the gateway's own TTY.
       */
      approver: z.enum(['elicitation', 'console', 'terminal']).default('elicitation'),
      /** Scope per action class: auto, session or per_call (sensitive classes can never be auto). */
      classes: z.record(z.string(), z.enum(['auto', 'session', 'per_call'])).optional(),
      /** Scope per action name; wins over the class. */
      actions: z.record(z.string(), z.enum(['auto', 'session', 'per_call'])).optional(),
      per_call_ttl_ms: z.number().int().positive().optional(),
      /**
       * How long a call waits for a person before it returns `approval_pending` (default 10 s, below
       * common client timeouts); the card stays open and a later call with the same operation_id
       * proceeds once it is approved.
       */
      wait_ms: z.number().int().nonnegative().optional(),
      /** Queue directory of the console approver (default ./.candor/approvals). */
      dir: z.string().min(1).optional(),
      /** POSTs each pending approval, signed (src/approvals/webhook.ts), to a team channel or pager. */
      webhook: z
        .strictObject({
          url: z.url({ protocol: /^https?$/ }),
          /** env:VAR holding the HMAC-SHA-256 secret the receiver verifies with. */
          secret: z
            .string()
            .regex(/^env:[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'the secret is env:VAR (never the value)'),
          /** A Slack-compatible body (`text`) beside the card fields. */
          slack: z.boolean().default(false),
          attempts: z.number().int().min(1).max(10).default(4),
          timeout_ms: z.number().int().min(100).max(60_000).default(5_000),
          max_answer_bytes: z.number().int().min(256).max(1_048_576).default(65_536),
        })
        .optional(),
      /** Four-eyes: the caller that asked for a call cannot approve it (web page and console). */
      four_eyes: z.boolean().default(false),
      /** Sign-in of the approvals page in `candor ui` (OpenID or per-approver tokens). */
      web: approvalsWebSchema.optional(),
    })
    // Elicitation asks the agent's own client: under four-eyes that is the caller approving itself.
    .refine((a) => !(a.four_eyes && a.approver === 'elicitation'), {
      path: ['four_eyes'],
      message:
        "four_eyes needs a person other than the caller to answer: set approver: console (the approvals page and `candor approve`) or terminal; elicitation asks the caller's own client",
    })
    .optional()
    .describe('human approvals before actions run; absent: every action runs without a prompt'),
  policy: policySchema.optional(),
  mcp: z
    .strictObject({
      http: z
        .strictObject({
          /**
           * Origins a browser may call the Streamable HTTP endpoint from, besides loopback ones
           * (which are always admitted); any other `Origin` gets 403.
           */
          allowed_origins: z
            .array(
              z.string().refine(isOrigin, {
                message:
                  'not an origin: write scheme://host[:port] with no path, e.g. https://app.example.com',
              }),
            )
            .default([]),
          /** Address the HTTP gateway listens on (default 127.0.0.1: this machine only). */
          host: z.string().min(1).default('127.0.0.1'),
          /**
           * The URL clients reach the MCP endpoint at (behind a proxy, the public one): the OAuth
           * resource URI (RFC 8707) tokens must name; default the address it listens at.
           */
          public_url: z
            .url({ protocol: /^https?$/ })
            .refine(
              (u) => !u.includes('#') && !u.includes('?'),
              'a resource URI has no query or fragment',
            )
            .optional(),
          /** Inbound authentication: Candor as an OAuth 2.1 resource server (docs/team-gateway.md). */
          auth: gatewayAuthSchema.optional(),
          /** Listen beyond loopback with no authentication at all: anyone who reaches it may call every tool. */
          allow_unauthenticated: z.boolean().default(false),
        })
        .superRefine((h, ctx) => {
          if (!isLoopbackHost(h.host) && !h.auth && !h.allow_unauthenticated)
            ctx.addIssue({
              code: 'custom',
              path: ['host'],
              message: `listening on ${h.host} (beyond this machine) needs auth (issuer or static_tokens), or allow_unauthenticated: true to accept anyone who can reach it`,
            });
        })
        .optional(),
    })
    .optional()
    .describe('the MCP gateway itself: the HTTP transport'),
  audit: z
    .strictObject({
      /** The auditor's public key (`candor audit keygen --kind seal` prints it): diagnostics are sealed to it. */
      seal_to: z.string().startsWith('candor-seal-pk-v1:').optional(),
      /** File holding the log's signing key (`candor audit keygen --kind log`): enables checkpoints. */
      log_key_file: z.string().min(1).optional(),
      /** Checkpoint after this many records (also at session end and before sensitive actions). */
      checkpoint_every: z.number().int().positive().default(1000),
      /** A `candor witness serve` URL that cosigns each checkpoint (needs log_key_file, witness_key). */
      witness_url: z.url().optional(),
      /** The witness's verifier key (`candor audit keygen --kind witness` prints it): only valid cosignatures by it are stored. */
      witness_key: z.string().min(1).optional(),
      /** true: a sensitive action waits for a cosignature and is held (gate_locked, nothing sent) without one. */
      witness_required: z.boolean().default(false),
      /** How long a sensitive action waits for the witness when witness_required (milliseconds). */
      witness_wait_ms: z.number().int().positive().max(300_000).default(10_000),
      /** Limit on one witness request, its answer included (milliseconds). */
      witness_timeout_ms: z.number().int().positive().max(60_000).default(5_000),
      /** Largest witness answer read (bytes); a larger one is cut off and the checkpoint stored unwitnessed. */
      witness_max_answer_bytes: z.number().int().min(1024).max(16_777_216).default(65_536),
    })
    .superRefine((a, ctx) => {
      if (a.witness_url && !a.witness_key)
        ctx.addIssue({
          code: 'custom',
          path: ['witness_url'],
          message: 'witness_url needs witness_key: a witness is trusted only through its key',
        });
      if (a.witness_url && !a.log_key_file)
        ctx.addIssue({
          code: 'custom',
          path: ['witness_url'],
          message: 'witness_url needs log_key_file: only signed checkpoints can be witnessed',
        });
      if (a.witness_required && !a.witness_url)
        ctx.addIssue({
          code: 'custom',
          path: ['witness_required'],
          message: 'witness_required needs witness_url and witness_key',
        });
    })
    .optional()
    .describe('tamper evidence: sealed diagnostics and signed checkpoints'),
});

export type GatewayConfig = z.output<typeof configSchema>;
export type ActionConfig = z.output<typeof actionConfigSchema>;
export type DestinationConfig = GatewayConfig['destinations'][string];
export type CredentialConfig = GatewayConfig['credentials'][string];

/** JSON Schema (draft 2020-12) of candor.yaml, for editors and `candor schema config`. */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(configSchema, { target: 'draft-2020-12', io: 'input' });
  return { $id: 'urn:candor:schema:config:v1', title: 'Candor gateway configuration', ...schema };
}
