// One line naming who asked for an operation, the same in `candor ops show` and the web view.
import type { Caller } from './caller.js';

/** `alice (token; client ci-app; issuer https://idp; scopes a b)`. */
export function callerText(c: Caller): string {
  const parts = [c.kind === 'local' ? 'local user' : 'token'];
  if (c.client_id) parts.push(`client ${c.client_id}`);
  if (c.issuer) parts.push(`issuer ${c.issuer}`);
  if (c.scopes.length > 0) parts.push(`scopes ${c.scopes.join(' ')}`);
  return `${c.subject} (${parts.join('; ')})`;
}
