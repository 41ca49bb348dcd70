// Upstream MCP servers from `upstreams:` (upstream-schema.ts): their connections, the MCP
// transport over them, and one proxied action per listed tool, namespaced and carrying the
// class and reconciliation lookup the configuration (or, failing that, the annotations) gives.
import { z } from 'zod';
import type { McpToolReply, McpPrepared, Transport } from '../core/transport.js';
import type { ActionClass } from '../core/vocabulary.js';
import { defineAction, type McpDestination, type McpReconciliation } from '../engine/action.js';
import { mcpTransport } from '../upstream/adapter.js';
import { compileInputSchema } from '../upstream/input-schema.js';
import {
  upstreamConnection,
  type UpstreamConnection,
  type UpstreamEndpoint,
  type UpstreamTool,
} from '../upstream/connection.js';
import {
  authorizedFetch,
  authFactsOf,
  tokenSource,
  type TokenSource,
} from '../upstream/oauth/session.js';
import type { OAuthSettings } from '../upstream/oauth/port.js';
import { discover } from '../upstream/oauth/discovery.js';
import { exchangeSource } from '../upstream/oauth/exchange.js';
import { principalConnection } from '../upstream/principal-connection.js';
import type { Vault } from '../vault/index.js';
import type { ConfiguredAction } from './actions.js';
import type { GatewayConfig } from './schema.js';
import { renderBody } from './template.js';
import { upstreamHostRef, type MatchRule, type UpstreamConfig } from './upstream-schema.js';

export interface StartedUpstreams {
  connections: Map<string, UpstreamConnection>;
  transport: Transport<McpPrepared>;
  actions: ConfiguredAction[];
  /** Annotation changes seen since the first listing, one line each (also logged). */
  relist(): Promise<string[]>;
  close(): Promise<void>;
}

export type UpstreamsResult =
  { ok: true; value: StartedUpstreams | undefined } | { ok: false; message: string };

/**
 * Connects every configured upstream and lists its tools. An upstream that cannot be started or
 * listed stops the gateway at start (an environment problem, named with the upstream).
 */
export async function startUpstreams(
  config: GatewayConfig,
  options: { vault?: Vault; onSecret?: (s: string) => void; log?: (line: string) => void } = {},
): Promise<UpstreamsResult> {
  const specs = Object.entries(config.upstreams ?? {});
  if (specs.length === 0) return { ok: true, value: undefined };
  const log = options.log ?? (() => undefined);
  const connections = new Map<string, UpstreamConnection>();
  const listings = new Map<string, Map<string, UpstreamTool>>();
  // OAuth upstreams: one token source each for the life of the gateway (refreshes are shared).
  const sources = new Map<string, TokenSource>();
  for (const [name, spec] of specs) {
    if (spec.auth !== 'oauth' || spec.url === undefined) continue;
    if (!options.vault)
      return {
        ok: false,
        message: `upstreams.${name}: auth: oauth keeps its tokens in the vault, and no vault: is configured`,
      };
    sources.set(
      name,
      tokenSource({
        upstream: name,
        server_url: spec.url,
        store: options.vault.oauth,
        settings: oauthSettings(spec, options.vault),
        log,
      }),
    );
  }
  for (const [name, spec] of specs) {
    const operator = upstreamConnection(
      name,
      () => endpointOf(name, spec, options, sources.get(name)),
      {
        log,
        connect_timeout_ms: spec.connect_timeout_ms,
        max_message_bytes: spec.max_message_bytes,
        // A restarted upstream may be a different build: its annotations are compared again.
        onReopen: () => void relistOne(name).catch(() => undefined),
      },
    );
    const mode = spec.auth === 'oauth' ? (spec.oauth?.tokens ?? 'shared') : 'shared';
    connections.set(
      name,
      mode === 'shared' || !options.vault
        ? operator
        : perPrincipal(name, spec, mode, operator, options.vault, options.onSecret, log),
    );
  }
  const actions: ConfiguredAction[] = [];
  for (const [name, spec] of specs) {
    let tools: UpstreamTool[];
    try {
      tools = await connections.get(name)!.listTools();
    } catch (error) {
      await Promise.all([...connections.values()].map((c) => c.close()));
      const auth = authFactsOf(error);
      if (auth)
        return {
          ok: false,
          message: `upstreams.${name}: not authorized (${auth.kind === 'credential' ? auth.reason : `HTTP ${auth.status}${auth.error ? ` ${auth.error}` : ''}`}); a person must log in: candor upstream login ${name}`,
        };
      const code = (error as { code?: unknown } | null)?.code;
      return {
        ok: false,
        message: `upstreams.${name}: cannot start and list the upstream's tools (${typeof code === 'string' || typeof code === 'number' ? String(code) : 'no answer'})`,
      };
    }
    listings.set(name, new Map(tools.map((t) => [t.name, t])));
    for (const tool of tools) {
      const a = proxiedAction(name, spec, tool);
      if (a) actions.push(a);
    }
  }
  /** Annotation changes of one upstream since its first listing, each logged once. */
  const reported = new Set<string>();
  async function relistOne(name: string): Promise<string[]> {
    const changes: string[] = [];
    const before = listings.get(name);
    if (!before) return changes;
    for (const t of await connections.get(name)!.listTools()) {
      const was = before.get(t.name);
      const a = JSON.stringify(annotationsOf(was));
      const b = JSON.stringify(annotationsOf(t));
      if (!was || a === b) continue;
      const line = `upstream ${name}: the annotations of ${t.name} changed from ${a} to ${b}; the class in use stays as at start (tools.${t.name}.class in the configuration decides)`;
      changes.push(line);
      if (!reported.has(line)) {
        reported.add(line);
        log(line);
      }
    }
    return changes;
  }
  const transport = mcpTransport({
    upstreams: connections,
    outputSchemaOf: (u, t) => listings.get(u)?.get(t)?.outputSchema,
  });
  return {
    ok: true,
    value: {
      connections,
      transport,
      actions,
      async relist() {
        const changes: string[] = [];
        for (const name of connections.keys()) changes.push(...(await relistOne(name)));
        return changes;
      },
      async close() {
        await Promise.all([...connections.values()].map((c) => c.close()));
      },
    },
  };
}

const annotationsOf = (t: UpstreamTool | undefined) => ({
  readOnlyHint: t?.annotations?.readOnlyHint ?? null,
  destructiveHint: t?.annotations?.destructiveHint ?? null,
  idempotentHint: t?.annotations?.idempotentHint ?? null,
});

/**
 * The OAuth settings of an upstream as the OAuth client takes them: a configured confidential
 * client is a vault `basic` credential (username = client id) released for the token endpoint.
 */
export function oauthSettings(spec: UpstreamConfig, vault: Vault): OAuthSettings {
  const cfg = spec.oauth;
  const ref = cfg?.client_credential;
  return {
    ...(cfg?.scopes ? { scopes: cfg.scopes } : {}),
    ...(cfg?.client_id ? { client_id: cfg.client_id } : {}),
    ...(cfg?.client_metadata_url ? { client_metadata_url: cfg.client_metadata_url } : {}),
    ...(ref
      ? {
          client_credential: async (tokenEndpoint: string) => {
            const name = ref.slice('vault:'.length);
            const r = await vault.resolve(name, { kind: 'http', url: tokenEndpoint });
            if (!r.ok) return { ok: false as const, message: r.failure.message };
            const v = r.value;
            const basic =
              v.kind === 'http_header' && v.header_value.startsWith('Basic ')
                ? Buffer.from(v.header_value.slice(6), 'base64').toString('utf8')
                : '';
            const colon = basic.indexOf(':');
            if (colon <= 0)
              return {
                ok: false as const,
                message: `"${name}" must be a basic credential (username = client id, value = client secret)`,
              };
            return {
              ok: true as const,
              client_id: basic.slice(0, colon),
              client_secret: basic.slice(colon + 1),
            };
          },
        }
      : {}),
  };
}

/**
 * An OAuth upstream with per-principal tokens: each authenticated caller's calls go through a
 * connection made with that caller's own token source (its login, or its exchanged token).
 */
function perPrincipal(
  name: string,
  spec: UpstreamConfig,
  mode: 'per_principal' | 'token_exchange',
  operator: UpstreamConnection,
  vault: Vault,
  onSecret: ((s: string) => void) | undefined,
  log: (line: string) => void,
): UpstreamConnection {
  const settings = oauthSettings(spec, vault);
  let found: ReturnType<typeof discover> | null = null;
  const discovered = () => {
    found ??= discover(spec.url!).then((r) => {
      if (!r.ok) found = null;
      return r;
    });
    return found;
  };
  return principalConnection(name, {
    operator,
    open: (principal, latest) => {
      const source =
        mode === 'per_principal'
          ? tokenSource({
              upstream: name,
              server_url: spec.url!,
              store: vault.oauth,
              settings,
              principal,
              log,
            })
          : exchangeSource({
              upstream: name,
              store: vault.oauth,
              settings,
              discovered,
              subjectToken: () => latest().subject_token,
              audience: spec.oauth?.audience,
              onSecret,
              log,
            });
      return upstreamConnection(
        name,
        () =>
          Promise.resolve({
            kind: 'http' as const,
            url: spec.url!,
            headers: {},
            fetch: authorizedFetch(source),
          }),
        {
          log,
          connect_timeout_ms: spec.connect_timeout_ms,
          max_message_bytes: spec.max_message_bytes,
        },
      );
    },
  });
}

async function endpointOf(
  name: string,
  spec: UpstreamConfig,
  options: { vault?: Vault; onSecret?: (s: string) => void },
  source?: TokenSource,
): Promise<UpstreamEndpoint> {
  if (spec.url !== undefined && source) {
    // The token is added per request by the fetch (and handed to the redactor by the vault).
    return { kind: 'http', url: spec.url, headers: {}, fetch: authorizedFetch(source) };
  }
  if (spec.url !== undefined) {
    const headers: Record<string, string> = {};
    if (spec.credential) {
      const r = await options.vault?.resolve(spec.credential.slice('vault:'.length), {
        kind: 'http',
        url: spec.url,
      });
      if (!r?.ok || r.value.kind !== 'http_header')
        throw Object.assign(new Error('credential unavailable'), {
          code: 'credential_unavailable',
        });
      options.onSecret?.(r.value.header_value);
      headers[r.value.header_name] = r.value.header_value;
    }
    return { kind: 'http', url: spec.url, headers };
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(spec.env)) {
    if (!v.startsWith('vault:')) {
      env[k] = v;
      continue;
    }
    const r = await options.vault?.resolve(v.slice('vault:'.length), {
      kind: 'ssh',
      host_ref: upstreamHostRef(name),
    });
    if (!r?.ok || r.value.kind !== 'ssh_secret_value')
      throw Object.assign(new Error('secret unavailable'), { code: 'credential_unavailable' });
    options.onSecret?.(r.value.value);
    env[k] = r.value.value;
  }
  return {
    kind: 'stdio',
    // `node` is the Node.js running Candor: MCP clients often start the gateway with a PATH that
    // has no `node` on it (a GUI app's environment, a version manager's shims).
    command: spec.command === 'node' ? process.execPath : spec.command!,
    args: spec.args,
    env,
    ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
  };
}

/**
 * The class an upstream tool's annotations suggest. MCP's defaults are pessimistic (a tool that
 * says nothing may be destructive and is not idempotent), and so is this.
 */
export function classFromAnnotations(t: UpstreamTool): ActionClass {
  const a = t.annotations ?? {};
  if (a.readOnlyHint === true) return 'read';
  if (a.destructiveHint !== false) return 'destructive';
  if (a.idempotentHint === true) return 'set_state';
  return 'create';
}

const exportedName = (prefix: string, tool: string): string =>
  `${prefix}${tool.toLowerCase().replace(/[^a-z0-9_]/g, '_')}`;

function proxiedAction(
  upstream: string,
  spec: UpstreamConfig,
  tool: UpstreamTool,
): ConfiguredAction | null {
  const t = spec.tools[tool.name];
  if (t?.hidden) return null;
  const cls = t?.class ?? classFromAnnotations(tool);
  const name = exportedName(spec.prefix ?? `${upstream}_`, tool.name);
  if (!/^[a-z][a-z0-9_]{0,63}$/.test(name)) return null;
  const destination: McpDestination = {
    kind: 'mcp',
    upstream,
    tool: tool.name,
    authority_ref: `mcp:${upstream}`,
    route_template: `${upstream}/${tool.name}`,
    deadline_ms: t?.deadline_ms ?? spec.deadline_ms,
    ...(t?.lookup ? { reconciliation: reconciliationOf(t.lookup) } : {}),
  };
  // The upstream's own inputSchema, compiled once: arguments that break it are never sent.
  const check = compileInputSchema(tool.inputSchema);
  const definition = defineAction<Record<string, unknown>, McpToolReply | null, McpDestination>({
    name,
    class: cls,
    // A read is named as itself ("Found: fs/read_text_file answered"), a write by its effect.
    subject: cls === 'read' ? `${upstream}/${tool.name}` : `the effect of ${upstream}/${tool.name}`,
    input: z.record(z.string(), z.unknown()).superRefine((args, ctx) => {
      const problem = check(args);
      if (problem) ctx.addIssue({ code: 'custom', path: problem.path, message: problem.message });
    }),
    request: (input) => ({ arguments: input }),
    response: z.any(),
    destination,
  });
  return {
    definition,
    description:
      `${tool.description ?? tool.title ?? tool.name} (proxied from the upstream MCP server "${upstream}"; ` +
      `its answer is in data: { content, structuredContent, isError }).`,
    title: tool.title,
    input_schema: { ...tool.inputSchema, type: 'object' },
  };
}

function reconciliationOf(lookup: {
  tool: string;
  arguments: Record<string, unknown>;
  match: MatchRule;
}): McpReconciliation {
  const scope = (input: unknown) => ({
    input,
    operation_id: '',
    correlation_id: '',
    idempotency_key: null,
  });
  return {
    tool: lookup.tool,
    arguments: (input) => renderBody(lookup.arguments, scope(input)) as Record<string, unknown>,
    matches: (reply, input) => countMatches(lookup.match, reply, input, scope),
  };
}

function countMatches(
  rule: MatchRule,
  reply: McpToolReply,
  input: unknown,
  scope: (input: unknown) => Parameters<typeof renderBody>[1],
): Array<{ ref: string; record: unknown }> | null {
  if (rule.kind === 'not_error') return reply.isError ? [] : [{ ref: 'found', record: reply }];
  if (rule.kind === 'text_equals' && reply.isError) return rule.absent_on_error ? [] : null;
  if (reply.isError) return null;
  if (rule.kind === 'text_equals') {
    const want = renderBody(rule.value, scope(input));
    return textOf(reply) === want ? [{ ref: 'found', record: reply }] : [];
  }
  let root: unknown = reply.structuredContent;
  if (root === undefined) {
    try {
      root = JSON.parse(textOf(reply));
    } catch {
      return null;
    }
  }
  let items: unknown = root;
  for (const part of rule.array === '$' ? [] : rule.array.split('.')) {
    if (items === null || typeof items !== 'object') return null;
    items = (items as Record<string, unknown>)[part];
  }
  if (!Array.isArray(items)) return null;
  const where = Object.entries(rule.where).map(([k, v]) => [k, renderBody(v, scope(input))]);
  const out: Array<{ ref: string; record: unknown }> = [];
  items.forEach((item: unknown, i) => {
    // Without `where`, every item is one effect (a lookup that already filters by the input).
    const rec = (item !== null && typeof item === 'object' ? item : {}) as Record<string, unknown>;
    if (!where.every(([k, v]) => rec[k as string] === v)) return;
    const ref = rule.ref !== undefined ? rec[rule.ref] : undefined;
    out.push({ ref: typeof ref === 'string' ? `${ref}#${i}` : String(i), record: item });
  });
  return out;
}

const textOf = (reply: McpToolReply): string =>
  reply.content
    .filter((c): c is { type: 'text'; text: string } => {
      const x = c as { type?: unknown; text?: unknown };
      return x.type === 'text' && typeof x.text === 'string';
    })
    .map((c) => c.text)
    .join('');
