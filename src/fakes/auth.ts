// Bearer tokens for the fake API. Tokens are accepted at setup and can expire later: after a set
// number of accepted uses, or when an admin call expires them. A token is identified everywhere
// (admin API, errors) by its `name`; the token value is never echoed, logged or returned.
import { z } from 'zod';

export const tokenSpecSchema = z.strictObject({
  /** Label used by the admin API; never the secret. */
  name: z.string().min(1),
  token: z.string().min(1),
  /** `*`, `<kind>:*`, `<kind>:read`, `<kind>:write`. Default `['*']`. */
  scopes: z.array(z.string().min(1)).optional(),
  /** The token is accepted this many times, then answers 401 (expired). */
  expire_after_uses: z.number().int().nonnegative().optional(),
});
export type TokenSpec = z.input<typeof tokenSpecSchema>;

export type Access = 'read' | 'write';

export type AuthResult =
  | { ok: true; name: string }
  | { ok: false; status: 401 | 403; headers: Record<string, string>; body: { error: string } };

interface TokenState {
  spec: TokenSpec;
  uses: number;
  expired: boolean;
}

export interface TokenSummary {
  name: string;
  scopes: string[];
  uses: number;
  expired: boolean;
}

export class TokenBook {
  private byValue = new Map<string, TokenState>();

  constructor(tokens: readonly TokenSpec[] = []) {
    for (const t of tokens) this.add(t);
  }

  /** Auth is enforced only once at least one token is configured. */
  get enforced(): boolean {
    return this.byValue.size > 0;
  }

  add(spec: TokenSpec): void {
    for (const [value, state] of this.byValue)
      if (state.spec.name === spec.name) this.byValue.delete(value);
    this.byValue.set(spec.token, { spec, uses: 0, expired: false });
  }

  /** False when no token has that name. */
  expire(name: string): boolean {
    for (const state of this.byValue.values()) {
      if (state.spec.name === name) {
        state.expired = true;
        return true;
      }
    }
    return false;
  }

  list(): TokenSummary[] {
    return [...this.byValue.values()].map((s) => ({
      name: s.spec.name,
      scopes: s.spec.scopes ?? ['*'],
      uses: s.uses,
      expired: s.expired,
    }));
  }

  clear(): void {
    this.byValue.clear();
  }

  check(authorization: string | undefined, kind: string, access: Access): AuthResult {
    if (!this.enforced) return { ok: true, name: 'anonymous' };
    const m = authorization === undefined ? null : /^Bearer +(\S+)\s*$/i.exec(authorization);
    const state = m?.[1] === undefined ? undefined : this.byValue.get(m[1]);
    if (m === null) {
      // RFC 6750 §3.1: a request without credentials gets a challenge without an error code.
      return unauthorized('Bearer realm="candor-fake"', 'missing_token');
    }
    if (state === undefined)
      return unauthorized(
        challenge('invalid_token', 'The access token is invalid'),
        'invalid_token',
      );
    const limit = state.spec.expire_after_uses;
    if (state.expired || (limit !== undefined && state.uses >= limit)) {
      state.expired = true;
      return unauthorized(challenge('invalid_token', 'The access token expired'), 'token_expired');
    }
    const scopes = state.spec.scopes ?? ['*'];
    const granted = scopes.some((s) => s === '*' || s === `${kind}:*` || s === `${kind}:${access}`);
    if (!granted) {
      return {
        ok: false,
        status: 403,
        headers: {
          'www-authenticate': `${challenge('insufficient_scope', 'The token lacks the scope')}, scope="${kind}:${access}"`,
        },
        body: { error: 'insufficient_scope' },
      };
    }
    state.uses += 1;
    return { ok: true, name: state.spec.name };
  }
}

function challenge(error: string, description: string): string {
  return `Bearer realm="candor-fake", error="${error}", error_description="${description}"`;
}

function unauthorized(wwwAuthenticate: string, error: string): AuthResult {
  return {
    ok: false,
    status: 401,
    headers: { 'www-authenticate': wwwAuthenticate },
    body: { error },
  };
}
