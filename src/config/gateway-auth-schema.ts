// The `mcp.http` section of candor.yaml for a gateway a team shares: where it listens, the resource
// URI it is known by (RFC 8707 / RFC 9728), who may call it (an OAuth issuer's JWT access tokens,
// static bearer tokens) and which tools each caller may use. A gateway that listens beyond loopback
// without authentication is refused unless `allow_unauthenticated: true` says so on purpose.
import { z } from 'zod';

const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
const TOKEN_REF = /^env:[A-Za-z_][A-Za-z0-9_]{0,127}$/;

const scopeList = z.array(z.string().regex(SCOPE, 'a scope is printable ASCII without spaces'));

const staticTokenSchema = z
  .strictObject({
    name: z
      .string()
      .regex(NAME, 'a token name is 1-128 of A-Z a-z 0-9 . _ @ -')
      .describe('the subject this token stands for (recorded as the caller)'),
    sha256: z
      .string()
      .regex(SHA256_HEX, 'sha256 is the token hash as 64 lowercase hex digits')
      .optional()
      .describe('SHA-256 of the token (hex); the token itself never goes in this file'),
    ref: z
      .string()
      .regex(TOKEN_REF, 'a token reference is env:VAR (the variable holds the token)')
      .optional()
      .describe('where the token is kept instead of a hash: env:VAR'),
    scopes: scopeList.default([]).describe('scopes this token grants'),
  })
  .superRefine((t, ctx) => {
    if ((t.sha256 === undefined) === (t.ref === undefined))
      ctx.addIssue({
        code: 'custom',
        path: ['sha256'],
        message: 'a static token has exactly one of sha256 (its hash) or ref (env:VAR)',
      });
  });

const accessRuleSchema = z
  .strictObject({
    tools: z
      .array(z.string().min(1))
      .min(1)
      .describe('tool names this rule grants ("*": every configured tool)'),
    scopes: scopeList
      .optional()
      .describe('the caller must hold every one of these scopes (from its token)'),
    claims: z
      .record(z.string().min(1), z.union([z.string(), z.number(), z.boolean()]))
      .optional()
      .describe('the token must carry each claim with this value (an array claim must contain it)'),
    subjects: z
      .array(z.string().min(1))
      .optional()
      .describe('the caller is one of these subjects (sub, or a static token name)'),
  })
  .describe('grants tools to callers that meet every condition given');

export const gatewayAuthSchema = z
  .strictObject({
    issuer: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe(
        'OAuth 2.1 authorization server whose JWT access tokens are accepted (its metadata names the JWKS)',
      ),
    jwks_uri: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe('the issuer JWKS, when its metadata cannot be read at start'),
    audience: z
      .string()
      .min(1)
      .optional()
      .describe("the token's aud must name this (default: the gateway's resource URI)"),
    scopes: scopeList
      .default([])
      .describe('scopes every caller needs (advertised in the metadata and the 401 challenge)'),
    algorithms: z
      .array(z.string().min(1))
      .optional()
      .describe('signature algorithms accepted (default RS256, PS256, ES256, EdDSA)'),
    clock_tolerance_s: z.number().int().min(0).max(300).default(30),
    static_tokens: z.array(staticTokenSchema).default([]),
    access: z
      .array(accessRuleSchema)
      .optional()
      .describe(
        'per-caller tool access; when present, a tool no rule grants the caller is authorization_denied',
      ),
  })
  .superRefine((a, ctx) => {
    if (a.issuer === undefined && a.static_tokens.length === 0)
      ctx.addIssue({
        code: 'custom',
        path: ['issuer'],
        message: 'auth needs an issuer (JWT access tokens) or static_tokens, or both',
      });
    if (a.jwks_uri !== undefined && a.issuer === undefined)
      ctx.addIssue({ code: 'custom', path: ['jwks_uri'], message: 'jwks_uri needs issuer' });
  });

export type GatewayAuthConfig = z.output<typeof gatewayAuthSchema>;
export type AccessRule = z.output<typeof accessRuleSchema>;
export type StaticTokenConfig = z.output<typeof staticTokenSchema>;

/** Hosts that stay on this machine: binding there needs no authentication. */
export function isLoopbackHost(host: string): boolean {
  return host === '127.0.0.1' || host === 'localhost' || host === '::1' || host === '[::1]';
}
