// candor upstream login NAME [--as SUBJECT [--issuer URL|static]] [--config FILE] [--scope S ...] [--timeout-s N]
// candor upstream status [NAME] [--config FILE] [--json]
// OAuth for upstream MCP servers (`auth: oauth` in candor.yaml): `login` runs the authorization-
// code flow once (the URL is printed; the browser's redirect reaches a listener on 127.0.0.1, or
// the person pastes the redirected URL), and stores the tokens in the vault, bound to the upstream.
// `status` shows, per upstream, who logged in, when the token expires and which scopes it holds —
// never a token. Per-principal upstreams (`oauth.tokens: per_principal`): `login --as SUBJECT` is
// one caller's own login (the person who is SUBJECT opens the URL; the tokens are kept for that
// caller only, and refused when the authorization server says someone else logged in); `status`
// lists every principal's grant. Exit 0 ok, 1 login failed / status shows an upstream that needs a login, 2 usage,
// 3 the vault cannot be opened.
import { createInterface } from 'node:readline';
import { createRedactor } from '../../core/redact.js';
import { oauthSettings } from '../../config/upstreams.js';
import type { UpstreamConfig } from '../../config/upstream-schema.js';
import { login } from '../../upstream/oauth/login.js';
import { loginCommand } from '../../upstream/oauth/session.js';
import {
  grantKey,
  principalOfKey,
  type GrantPrincipal,
  type OAuthGrantInfo,
} from '../../upstream/oauth/port.js';
import { listOAuthGrants } from '../../vault/index.js';
import { configFrom } from '../config-ledger.js';
import { CliUsageError, Exit, parseFlags, type CommandIo } from '../io.js';
import { openVaultOrExit } from '../vault.js';

const USAGE =
  'usage: candor upstream login NAME [--as SUBJECT [--issuer URL|static]] [--config FILE] [--scope S] [--timeout-s N] | upstream status [NAME] [--config FILE] [--json]';

export async function run(args: string[], io: CommandIo): Promise<number> {
  const { flags, positional } = parseFlags(args, {
    config: 'string',
    scope: 'string',
    'timeout-s': 'string',
    as: 'string',
    issuer: 'string',
    json: 'boolean',
  });
  const [sub, name, ...rest] = positional;
  if ((sub !== 'login' && sub !== 'status') || rest.length > 0) throw new CliUsageError(USAGE);
  if (sub === 'login' && name === undefined) throw new CliUsageError(`login needs NAME (${USAGE})`);
  const loaded = await configFrom(flags);
  if (!loaded) throw new CliUsageError(`no candor.yaml here; give --config FILE (${USAGE})`);
  const upstreams = loaded.config.upstreams ?? {};
  const oauthNames = Object.keys(upstreams).filter((n) => upstreams[n]!.auth === 'oauth');
  if (name !== undefined && upstreams[name]?.auth !== 'oauth')
    throw new CliUsageError(
      `${loaded.file}: upstreams.${name}: ${upstreams[name] ? 'has no `auth: oauth`' : 'no such upstream'}${oauthNames.length ? ` (OAuth upstreams: ${oauthNames.join(', ')})` : ''}`,
    );
  if (sub === 'status' && oauthNames.length === 0) {
    if (flags.json === true) io.out('[]\n');
    else io.out('no upstream in this configuration uses auth: oauth (see docs/upstreams.md)\n');
    return Exit.ok;
  }
  if (!loaded.config.vault)
    throw new CliUsageError(
      `${loaded.file}: auth: oauth keeps its tokens in the vault; configure vault:`,
    );
  if (sub === 'status')
    return status(
      loaded.config.vault.path,
      upstreams,
      name ? [name] : oauthNames,
      flags.json === true,
      io,
    );

  const spec0 = upstreams[name!]!;
  const perPrincipal = spec0.oauth?.tokens === 'per_principal';
  if (typeof flags.issuer === 'string' && typeof flags.as !== 'string')
    throw new CliUsageError(`--issuer goes with --as SUBJECT (${USAGE})`);
  let principal: GrantPrincipal | undefined;
  if (typeof flags.as === 'string') {
    if (!perPrincipal)
      throw new CliUsageError(
        `${loaded.file}: upstreams.${name}: --as is for per-principal tokens (oauth.tokens: per_principal)`,
      );
    if (flags.as.trim() === '') throw new CliUsageError("--as takes the caller's subject");
    // The gateway's own issuer names its JWT callers; `static` names its static-token callers.
    const issuer =
      typeof flags.issuer === 'string' ? flags.issuer : loaded.config.mcp?.http?.auth?.issuer;
    if (issuer === undefined)
      throw new CliUsageError(
        `${loaded.file}: mcp.http.auth has no issuer; give --issuer URL, or --issuer static for a static token's name`,
      );
    principal = { issuer: issuer === 'static' ? null : issuer, subject: flags.as };
  }
  const timeout = typeof flags['timeout-s'] === 'string' ? Number(flags['timeout-s']) : 600;
  if (!Number.isInteger(timeout) || timeout <= 0)
    throw new CliUsageError('--timeout-s takes a whole number of seconds');
  const spec = upstreams[name!]!;
  const redactor = createRedactor();
  const opened = await openVaultOrExit('upstream login', loaded, redactor, io);
  if (!opened.ok) return opened.exit;
  const vault = opened.vault!;
  // A person may paste the redirected URL (the browser on another machine cannot reach 127.0.0.1).
  const lines = createInterface({ input: process.stdin, terminal: false });
  try {
    io.err(
      `candor upstream login ${name}: open this URL in a browser and allow access; the redirect comes back to this machine (or paste the URL the browser ends on here):\n`,
    );
    const r = await login({
      upstream: name!,
      server_url: spec.url!,
      store: vault.oauth,
      settings: oauthSettings(spec, vault),
      ...(principal ? { principal } : {}),
      ...(typeof flags.scope === 'string'
        ? { extra_scopes: flags.scope.split(/[\s,]+/).filter(Boolean) }
        : {}),
      say: (url) => io.out(`${url}\n`),
      pasted: lines,
      timeout_ms: timeout * 1000,
    });
    if (!r.ok) {
      io.err(
        `candor upstream login ${name}: ${redactor.redactString(r.problem.message)} (${r.problem.code})\n`,
      );
      return Exit.check_failed;
    }
    io.err(
      `candor upstream login ${name}: logged in${principal ? ` as ${principal.subject}` : ''}; ${describe(r.value, Date.now())}\n`,
    );
    return Exit.ok;
  } finally {
    lines.close();
    process.stdin.unref?.();
    vault.close();
  }
}

async function status(
  path: string | undefined,
  upstreams: Record<string, UpstreamConfig>,
  names: string[],
  json: boolean,
  io: CommandIo,
): Promise<number> {
  const listed = await listOAuthGrants(path ? { path } : {});
  if (!listed.ok) {
    io.err(`candor upstream status: ${listed.failure.message}\n`);
    return Exit.environment;
  }
  const byKey = new Map(listed.value.map((g) => [g.key, g]));
  const now = Date.now();
  let needsLogin = false;
  type Row = {
    upstream: string;
    principal: GrantPrincipal | null;
    state: string;
    grant: OAuthGrantInfo | null;
  };
  const rowOf = (n: string, principal: GrantPrincipal | null, g: OAuthGrantInfo | undefined) => {
    const current = g !== undefined && g.server_url === upstreams[n]!.url;
    const state = !current ? 'not_logged_in' : g.login_required ? 'login_required' : 'logged_in';
    if (state !== 'logged_in') needsLogin = true;
    return { upstream: n, principal, state, grant: current ? g : null };
  };
  const rows: Row[] = [];
  for (const n of names) {
    // The operator's own login (the tool listing, local calls), then every principal's.
    rows.push(rowOf(n, null, byKey.get(grantKey(n))));
    if ((upstreams[n]!.oauth?.tokens ?? 'shared') !== 'per_principal') continue;
    for (const g of listed.value) {
      const of = principalOfKey(g.key);
      if (of?.upstream === n && of.principal) rows.push(rowOf(n, of.principal, g));
    }
  }
  if (json) {
    io.out(
      `${JSON.stringify(
        rows.map((r) => ({
          upstream: r.upstream,
          principal: r.principal,
          state: r.state,
          ...(r.grant
            ? {
                issuer: r.grant.issuer,
                resource: r.grant.resource,
                client_id: r.grant.client_id,
                scopes: r.grant.scope.split(' ').filter(Boolean),
                step_up_scopes: (r.grant.step_up_scope ?? '').split(' ').filter(Boolean),
                expires_at:
                  r.grant.expires_at === null ? null : new Date(r.grant.expires_at).toISOString(),
                refreshable: r.grant.has_refresh_token,
                login_required: r.grant.login_required,
              }
            : {}),
        })),
        null,
        2,
      )}\n`,
    );
  } else {
    for (const r of rows) {
      const who = r.principal
        ? ` as ${r.principal.subject} (${r.principal.issuer ?? 'static token'})`
        : '';
      const login = loginCommand(r.upstream, r.principal ?? undefined);
      io.out(
        r.grant
          ? `${r.upstream}${who}: ${r.state === 'logged_in' ? 'logged in' : `LOGIN REQUIRED (${r.grant.login_required}): ${login}`}; ${describe(r.grant, now)}\n`
          : `${r.upstream}${who}: not logged in: ${login}\n`,
      );
    }
  }
  return needsLogin ? Exit.check_failed : Exit.ok;
}

/** Expiry, scopes and issuer in one line; never a token. */
function describe(g: OAuthGrantInfo, now: number): string {
  const expiry =
    g.expires_at === null
      ? 'no expiry given'
      : g.expires_at > now
        ? `token expires ${new Date(g.expires_at).toISOString()} (in ${Math.round((g.expires_at - now) / 1000)} s)`
        : `token expired ${new Date(g.expires_at).toISOString()}`;
  const scopes = g.scope ? `scopes: ${g.scope}` : 'scopes: (none stated)';
  const stepUp = g.step_up_scope
    ? `; the upstream asked for: ${g.step_up_scope} (log in again to grant it)`
    : '';
  return `${expiry}${g.has_refresh_token ? ', refreshable' : ', no refresh token'}; ${scopes}; issuer ${g.issuer}${stepUp}`;
}
