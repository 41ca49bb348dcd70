// The per-caller access rules in front of the approval gate: a caller that is not granted an action
// is refused before any approval card or byte (`authorization_denied`, recorded on the operation).
// Consulted before every attempt, so continuing another caller's operation is checked too.
import type { AccessRule } from '../config/gateway-auth-schema.js';
import type { Gate } from '../engine/ports.js';
import { accessRefusal } from './access.js';
import { currentPrincipal } from './context.js';

export function accessGate(inner: Gate, rules: readonly AccessRule[]): Gate {
  return {
    async check(ctx) {
      const who = currentPrincipal();
      // Outside an authenticated request (stdio, the operator's own recovery) the rules do not apply.
      if (who) {
        const reason = accessRefusal(rules, ctx.action, who);
        if (reason !== null) return { decision: 'unauthorized', reason };
      }
      return inner.check(ctx);
    },
    ...(inner.locked ? { locked: inner.locked.bind(inner) } : {}),
  };
}
