// The part of oidc-provider (a real OpenID Connect / OAuth 2 authorization server, used by the
// OAuth upstream test and the team gateway's test/support/oidc.ts) the tests use; the package
// ships no types.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';
  export const errors: {
    InvalidTarget: new () => Error;
    InvalidRequest: new (description?: string) => Error;
    InvalidGrant: new (description?: string) => Error;
  };
  /** The token endpoint's context, as a registered grant type's handler sees it. */
  export interface TokenContext {
    oidc: { params?: Record<string, unknown>; client?: { clientId: string } };
    body?: unknown;
  }
  interface Client {
    grantTypeAllowed(type: string): boolean;
  }
  export default class Provider {
    constructor(
      issuer: string,
      configuration: Record<string, unknown> & {
        features?: {
          resourceIndicators?: {
            enabled: boolean;
            defaultResource?: (ctx: unknown) => string;
            useGrantedResource?: () => boolean;
            getResourceServerInfo?: (ctx: unknown, resource: string) => Record<string, unknown>;
          };
          [feature: string]: unknown;
        };
        issueRefreshToken?: (ctx: unknown, client: Client) => boolean;
        findAccount?: (
          ctx: unknown,
          sub: string,
        ) => { accountId: string; claims: () => Record<string, unknown> };
      },
    );
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    on(event: string, listener: (...args: never[]) => void): this;
    /** A custom grant type at the token endpoint (e.g. RFC 8693 token exchange). */
    registerGrantType(
      name: string,
      handler: (ctx: TokenContext) => Promise<void>,
      params?: string[],
    ): void;
  }
}
