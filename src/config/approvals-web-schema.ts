// The `approvals.web` section of candor.yaml: how approvers sign in to the approvals page of
// `candor ui` (src/web/approvals.ts) — OpenID Connect (authorization code + PKCE) against the team's
// issuer, and/or per-approver tokens for small setups — and who among the signed-in may decide.
import { z } from 'zod';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
const ENV_REF = /^env:[A-Za-z_][A-Za-z0-9_]{0,127}$/;

const approverTokenSchema = z
  .strictObject({
    name: z
      .string()
      .regex(NAME, 'an approver name is 1-128 of A-Z a-z 0-9 . _ @ -')
      .describe('the approver this token stands for (recorded on every decision)'),
    sha256: z
      .string()
      .regex(SHA256_HEX, 'sha256 is the token hash as 64 lowercase hex digits')
      .optional()
      .describe('SHA-256 of the token (hex); the token itself never goes in this file'),
    ref: z
      .string()
      .regex(ENV_REF, 'a token reference is env:VAR (the variable holds the token)')
      .optional()
      .describe('where the token is kept instead of a hash: env:VAR'),
  })
  .superRefine((t, ctx) => {
    if ((t.sha256 === undefined) === (t.ref === undefined))
      ctx.addIssue({
        code: 'custom',
        path: ['sha256'],
        message: 'an approver token has exactly one of sha256 (its hash) or ref (env:VAR)',
      });
  });

export const approvalsWebSchema = z
  .strictObject({
    issuer: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe('OpenID issuer approvers sign in with (authorization code + PKCE)'),
    client_id: z.string().min(1).optional().describe("the approvals page's client at the issuer"),
    client_secret: z
      .string()
      .regex(ENV_REF, 'the client secret is env:VAR (never the value)')
      .optional()
      .describe('env:VAR holding the client secret (absent: a public client, PKCE only)'),
    redirect_uri: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe(
        "the callback registered at the issuer (default: this view's own URL + /approvals/callback)",
      ),
    scopes: z.array(z.string().min(1)).default(['openid']),
    approvers: z
      .strictObject({
        subjects: z.array(z.string().min(1)).optional(),
        claims: z
          .record(z.string().min(1), z.union([z.string(), z.number(), z.boolean()]))
          .optional(),
      })
      .optional()
      .describe(
        'who may decide once signed in: any of these subjects, or an ID token carrying every claim (absent: anyone the issuer signs in)',
      ),
    tokens: z.array(approverTokenSchema).default([]).describe('per-approver tokens'),
  })
  .superRefine((w, ctx) => {
    if (w.issuer === undefined && w.tokens.length === 0)
      ctx.addIssue({
        code: 'custom',
        path: ['issuer'],
        message: 'approvals.web needs an issuer (OpenID sign-in) or tokens, or both',
      });
    if (w.issuer !== undefined && w.client_id === undefined)
      ctx.addIssue({ code: 'custom', path: ['client_id'], message: 'issuer needs client_id' });
  });

export type ApprovalsWebConfig = z.output<typeof approvalsWebSchema>;
