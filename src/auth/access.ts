// Per-caller tool access (`mcp.http.auth.access` in candor.yaml). With rules configured, a tool is
// granted only by a rule that names it (or `*`) and whose every condition the caller meets; a call
// outside them is refused as `authorization_denied` before anything is sent. Without rules every
// authenticated caller may use every tool.
import type { AccessRule } from '../config/gateway-auth-schema.js';
import type { Principal } from './resource-server.js';

function claimHolds(
  claims: Readonly<Record<string, unknown>>,
  name: string,
  want: unknown,
): boolean {
  const have = claims[name];
  if (Array.isArray(have)) return have.includes(want);
  if (name === 'scope' && typeof have === 'string' && typeof want === 'string')
    return have.split(' ').includes(want);
  return have === want;
}

function ruleGrants(rule: AccessRule, tool: string, who: Principal): boolean {
  if (!rule.tools.includes(tool) && !rule.tools.includes('*')) return false;
  if (rule.scopes && !rule.scopes.every((s) => who.caller.scopes.includes(s))) return false;
  if (rule.subjects && !rule.subjects.includes(who.caller.subject)) return false;
  if (rule.claims && !Object.entries(rule.claims).every(([k, v]) => claimHolds(who.claims, k, v)))
    return false;
  return true;
}

/** Null when `who` may call `tool`; else why not, in one sentence naming the caller. */
export function accessRefusal(
  rules: readonly AccessRule[] | undefined,
  tool: string,
  who: Principal,
): string | null {
  if (rules === undefined) return null;
  if (rules.some((r) => ruleGrants(r, tool, who))) return null;
  return `caller ${who.caller.subject} is not granted the tool ${tool} by this gateway's access rules`;
}
