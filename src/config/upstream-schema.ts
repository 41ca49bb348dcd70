// The `upstreams:` section of candor.yaml: existing MCP servers Candor proxies (DESIGN §5). Each is
// reached over stdio (`command`, `args`, `env`) or Streamable HTTP (`url`, `credential`); vault
// references in `env` are resolved at spawn time and injected only into the child's environment.
// Per tool, the configuration overrides the class the upstream's annotations suggest (they are
// hints from an untrusted server) and maps the reconciliation lookup: an upstream read tool, its
// arguments as a template over the call's input, and the rule that counts what it found.
import { z } from 'zod';
import { ActionClass, valuesOf } from '../core/vocabulary.js';

const VAULT_REF = /^vault:[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** How the lookup's answer is counted: found one, none, or two and more. */
export const matchSchema = z.discriminatedUnion('kind', [
  z
    .strictObject({ kind: z.literal('not_error') })
    .describe('one effect when the lookup answers without isError, none when it fails'),
  z
    .strictObject({
      kind: z.literal('text_equals'),
      value: z.string(),
      /** The lookup failing (isError) means "no such effect" (e.g. a file that does not exist). */
      absent_on_error: z.boolean().default(false),
    })
    .describe('one effect when the answer text equals the rendered value, else none'),
  z
    .strictObject({
      kind: z.literal('count'),
      /**
       * Dotted path to an array in structuredContent (or in the JSON of the text blocks); `$` when
       * the answer itself is the array.
       */
      array: z.string().min(1),
      /** Fields an item must have (templates over the input); every matching item is one effect. */
      where: z.record(z.string(), z.string()).default({}),
      /** The item field that names an effect (its reference); default the item's index. */
      ref: z.string().optional(),
    })
    .describe('counts the items of an array in the answer that match `where`'),
]);
export type MatchRule = z.output<typeof matchSchema>;

export const upstreamToolSchema = z.strictObject({
  class: z
    .enum(valuesOf(ActionClass))
    .optional()
    .describe("overrides the class derived from the upstream's annotations"),
  lookup: z
    .strictObject({
      tool: z.string().min(1).describe('an upstream read tool that finds the effect'),
      arguments: z.record(z.string(), z.unknown()).default({}),
      match: matchSchema,
    })
    .optional(),
  deadline_ms: z.number().int().positive().optional(),
  hidden: z.boolean().default(false).describe('not exported to the agent'),
  probe: z
    .strictObject({ arguments: z.record(z.string(), z.unknown()) })
    .optional()
    .describe(
      '`candor probe mcp`: the arguments of the probe calls (against a disposable upstream)',
    ),
});

/** One OAuth scope token (RFC 6749 §3.3: printable ASCII but space, quote and backslash). */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/**
 * `auth: oauth` upstreams: how Candor, as the OAuth client, registers and what it asks for. All
 * optional: discovery (RFC 9728, RFC 8414) finds the authorization server, and dynamic
 * registration (RFC 7591) a client, where the server offers it.
 */
export const upstreamOAuthSchema = z.strictObject({
  scopes: z
    .array(z.string().regex(SCOPE_TOKEN, 'a scope is one token without spaces or quotes'))
    .optional()
    .describe("scopes asked for at login (default: the upstream's scopes_supported)"),
  client_id: z
    .string()
    .min(1)
    .optional()
    .describe('a client registered by hand with the authorization server (a public client)'),
  client_credential: z
    .string()
    .regex(VAULT_REF, 'a client credential is referenced as vault:NAME')
    .optional()
    .describe(
      'a confidential client registered by hand: a vault `basic` credential (username = client id, value = client secret) bound to the token endpoint',
    ),
  client_metadata_url: z
    .string()
    .url()
    .refine((u) => {
      const url = new URL(u);
      return url.protocol === 'https:' && url.pathname !== '/';
    }, 'a Client ID Metadata Document URL is https with a path')
    .optional()
    .describe(
      'the URL of a Client ID Metadata Document describing Candor (used as the client id where the server supports it)',
    ),
  tokens: z
    .enum(['shared', 'per_principal', 'token_exchange'])
    .default('shared')
    .describe(
      "whose tokens a call uses: `shared` (the operator's one login), `per_principal` (each authenticated caller's own login: candor upstream login NAME --as SUBJECT), `token_exchange` (the caller's inbound token exchanged at the authorization server, RFC 8693); local callers use the operator's login",
    ),
  audience: z
    .string()
    .min(1)
    .optional()
    .describe(
      'token_exchange: the `audience` sent with the exchange, where the authorization server wants one besides the resource',
    ),
});
export type UpstreamOAuthConfig = z.output<typeof upstreamOAuthSchema>;

export const upstreamSchema = z
  .strictObject({
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    env: z
      .record(
        z.string().regex(ENV_NAME, 'environment variable names are A-Z a-z 0-9 _'),
        z.string(),
      )
      .default({})
      .describe('plain values, or vault:NAME (an ssh_secret entry bound to ssh:mcp.UPSTREAM)'),
    cwd: z.string().min(1).optional(),
    url: z.string().url().optional(),
    credential: z
      .string()
      .regex(VAULT_REF, 'a credential is referenced as vault:NAME')
      .optional()
      .describe('Streamable HTTP: a vault credential bound to the URL, sent as its header'),
    auth: z
      .enum(['oauth'])
      .optional()
      .describe(
        'Streamable HTTP: `oauth` — Candor is the OAuth client (candor upstream login NAME; tokens in the vault)',
      ),
    oauth: upstreamOAuthSchema.optional(),
    prefix: z
      .string()
      .regex(/^[a-z][a-z0-9_]{0,31}$/, 'a prefix is snake_case')
      .optional()
      .describe('prefix of the exported tool names (default: the upstream name and _)'),
    deadline_ms: z.number().int().positive().default(30_000),
    connect_timeout_ms: z.number().int().positive().default(30_000),
    max_message_bytes: z
      .number()
      .int()
      .min(65_536)
      .max(1_073_741_824)
      .default(16_777_216)
      .describe(
        'the largest message read from the upstream (one stdio line, one HTTP answer or SSE event); past it the connection is closed and the call is unknown (UPSTREAM_MESSAGE_TOO_LARGE)',
      ),
    tools: z.record(z.string(), upstreamToolSchema).default({}),
  })
  .superRefine((u, ctx) => {
    if ((u.command === undefined) === (u.url === undefined))
      ctx.addIssue({
        code: 'custom',
        message: 'an upstream has either `command` (stdio) or `url` (Streamable HTTP)',
      });
    if (u.url !== undefined && Object.keys(u.env).length > 0)
      ctx.addIssue({ code: 'custom', path: ['env'], message: '`env` is for stdio upstreams' });
    if (u.command !== undefined && u.credential !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['credential'],
        message: '`credential` is for Streamable HTTP upstreams; use `env` for stdio',
      });
    if (u.auth === 'oauth' && u.url === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['auth'],
        message: '`auth: oauth` is for Streamable HTTP upstreams (`url`)',
      });
    if (u.auth === 'oauth' && u.credential !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['credential'],
        message:
          'an `auth: oauth` upstream gets its tokens by `candor upstream login`; drop `credential`',
      });
    if (u.oauth !== undefined && u.auth !== 'oauth')
      ctx.addIssue({
        code: 'custom',
        path: ['oauth'],
        message: '`oauth:` settings need `auth: oauth`',
      });
    if (u.oauth?.audience !== undefined && u.oauth.tokens !== 'token_exchange')
      ctx.addIssue({
        code: 'custom',
        path: ['oauth', 'audience'],
        message: '`audience` is sent with a token exchange only (`tokens: token_exchange`)',
      });
    if (u.oauth?.client_id !== undefined && u.oauth.client_credential !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['oauth', 'client_credential'],
        message: 'give either `client_id` (public client) or `client_credential` (confidential)',
      });
  });

export type UpstreamConfig = z.output<typeof upstreamSchema>;

export const upstreamsSchema = z
  .record(
    z.string().regex(/^[a-z][a-z0-9_]{0,31}$/, 'upstream names are snake_case, at most 32'),
    upstreamSchema,
  )
  .optional();

/** The vault binding that an upstream's `env` secrets must carry. */
export const upstreamHostRef = (name: string): string => `mcp.${name}`;
