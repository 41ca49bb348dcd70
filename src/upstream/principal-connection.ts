// One upstream whose tokens are per principal (`oauth.tokens: per_principal | token_exchange`):
// every authenticated caller gets a connection of its own, made for that caller alone (its own
// token source, its own MCP session with the upstream); the local operator (stdio, CLI, probe, an
// unauthenticated gateway) and the tool listing use the operator's own login.
// Rules:
// - The caller is read once, when the call starts (src/upstream/oauth/principal.ts); the call then
//   goes through that caller's connection only. There is no fallback to another principal's or
//   the operator's token for an authenticated caller: without its own, nothing is sent.
// - Connections are kept by principal (issuer and subject) while the gateway runs, at most `max`;
//   past it the least recently used idle one is closed (it reconnects when its caller returns).
// - A reconciliation lookup outside an authenticated call (`candor recover`) is not sent: whose
//   operation it is is not known here, and another identity's "not found" proves nothing. Inside
//   one, it is sent only when the caller is the one the operation recorded.
import { IdPrefix } from '../core/ids.js';
import type { CallFacts, UpstreamConnection } from './connection.js';
import { grantKey, type GrantPrincipal } from './oauth/port.js';
import {
  currentUpstreamPrincipal,
  grantPrincipalOf,
  type UpstreamPrincipal,
} from './oauth/principal.js';

export interface PrincipalConnectionOptions {
  /** The operator's connection: tool listings and calls of the local operator. */
  operator: UpstreamConnection;
  /**
   * A connection bound to `principal`; `latest` gives that principal's most recent presentation
   * (its current access token, for a token exchange).
   */
  open: (principal: GrantPrincipal, latest: () => UpstreamPrincipal) => UpstreamConnection;
  /** The most principals kept connected at once (default 256). */
  max?: number;
}

export function principalConnection(
  name: string,
  o: PrincipalConnectionOptions,
): UpstreamConnection {
  const max = o.max ?? 256;
  type Entry = { connection: UpstreamConnection; latest: UpstreamPrincipal; busy: number };
  const held = new Map<string, Entry>();

  function connectionFor(p: UpstreamPrincipal, principal: GrantPrincipal) {
    const key = grantKey(name, principal);
    let entry = held.get(key);
    if (entry) {
      held.delete(key);
      entry.latest = p;
    } else {
      if (held.size >= max) {
        for (const [k, e] of held)
          if (e.busy === 0) {
            held.delete(k);
            void e.connection.close().catch(() => undefined);
            break;
          }
      }
      const made: Entry = {
        connection: o.open(principal, () => made.latest),
        latest: p,
        busy: 0,
      };
      entry = made;
    }
    held.set(key, entry);
    return entry;
  }

  return {
    name,
    listTools: () => o.operator.listTools(),
    async call(tool, args, opts): Promise<CallFacts> {
      const p = currentUpstreamPrincipal();
      const principal = grantPrincipalOf(p);
      if (!p || !principal) {
        // A reconciliation lookup (an observation id) outside an authenticated call may concern
        // any caller's operation: run with the operator's token it could miss a record only that
        // caller can see and "prove" an absence. It is not sent; the caller reconciles it.
        if (opts.id.startsWith(`${IdPrefix.observation}_`))
          return { stage: 'auth', facts: { kind: 'credential', reason: 'lookup_needs_caller' } };
        return o.operator.call(tool, args, opts);
      }
      // A lookup for an operation another principal (or the local operator) made is not sent as
      // this caller: its token may not see that record, and its "not found" would prove nothing.
      if (opts.id.startsWith(`${IdPrefix.observation}_`) && opts.operation_caller !== undefined) {
        const owner = opts.operation_caller;
        if (
          owner === null ||
          owner.subject !== principal.subject ||
          (owner.issuer ?? null) !== (principal.issuer ?? null)
        )
          return { stage: 'auth', facts: { kind: 'credential', reason: 'lookup_needs_caller' } };
      }
      const entry = connectionFor(p, principal);
      entry.busy++;
      try {
        return await entry.connection.call(tool, args, opts);
      } finally {
        entry.busy--;
      }
    },
    async close() {
      const all = [...held.values()].map((e) => e.connection);
      held.clear();
      await Promise.all([o.operator.close(), ...all.map((c) => c.close())]);
    },
  };
}
