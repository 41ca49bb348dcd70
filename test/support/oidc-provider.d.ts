// The few parts of oidc-provider (which ships no types) that test/support/oidc.ts uses.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';
  export const errors: { InvalidTarget: new () => Error };
  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    on(event: string, listener: (...args: unknown[]) => void): this;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
  }
}
