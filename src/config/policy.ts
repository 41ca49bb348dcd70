// The `policy:` section of candor.yaml wired to src/policy: the normalised spec, the actions the
// policies are checked against (configured and upstream ones, with the resource each reaches), and
// the decider the runtime consults before every attempt.
import type { LedgerStore } from '../ledger/store.js';
import {
  createPolicyDecider,
  loadPolicyOrThrow,
  type PolicyAction,
  type PolicySpec,
} from '../policy/index.js';
import type { PolicyPort } from '../engine/ports.js';
import type { ConfiguredAction } from './actions.js';
import type { GatewayConfig } from './schema.js';

/** The `policy:` section as one shape, or null when the configuration has none. */
export function policySpecOf(config: GatewayConfig): PolicySpec | null {
  const p = config.policy;
  if (!p) return null;
  if (Array.isArray(p)) return { files: p, zone: 'UTC', totals: {} };
  return { files: p.files, zone: p.zone, totals: p.totals };
}

/** Each action with its input schema and the resource (destination, SSH host, upstream) it reaches. */
export function policyActions(
  config: GatewayConfig,
  actions: readonly ConfiguredAction[],
): PolicyAction[] {
  const http = new Map(config.actions.map((a) => [a.name, a.destination]));
  return actions.map((a) => {
    const d = a.definition.destination as {
      kind?: string;
      host_ref?: string;
      upstream?: string;
      origin?: string;
    };
    const resource =
      d.kind === 'ssh'
        ? { kind: 'ssh', name: d.host_ref ?? '' }
        : d.kind === 'mcp'
          ? { kind: 'mcp', name: d.upstream ?? '' }
          : { kind: 'http', name: http.get(a.definition.name) ?? d.origin ?? '' };
    return { name: a.definition.name, input_schema: a.input_schema, resource };
  });
}

/**
 * The runtime's policy port, or null without a `policy:` section. Throws one line naming the file
 * and place (`FILE:LINE:COL`) when a policy file does not parse or does not validate.
 */
export function configPolicy(
  loaded: { file: string; config: GatewayConfig; actions: readonly ConfiguredAction[] },
  ledger: LedgerStore,
  upstreamActions: readonly ConfiguredAction[] = [],
): PolicyPort | null {
  const spec = policySpecOf(loaded.config);
  if (!spec) return null;
  const actions = policyActions(loaded.config, [...loaded.actions, ...upstreamActions]);
  return createPolicyDecider({ loaded: loadPolicyOrThrow(spec, actions, loaded.file), ledger });
}
