// Which OAuth client Candor is towards an upstream's authorization server, in this order:
//   1. a client configured by hand (`oauth.client_id`, or `oauth.client_credential`: a vault
//      `basic` credential whose username is the client id), because a person chose it;
//   2. the client already held with that issuer (clients are kept per issuer);
//   3. a Client ID Metadata Document URL (`oauth.client_metadata_url`) where the server
//      advertises `client_id_metadata_document_supported` (the 2026-07-28 profile prefers it);
//   4. dynamic client registration (RFC 7591) as a native application with a loopback redirect
//      (RFC 8252 §7.3: the port is chosen at login, the server must accept any);
//   else a person must register one: the problem says how.
import {
  registerClient,
  type OAuthClientInformationMixed,
  type FetchLike,
} from '@modelcontextprotocol/client';
import type { Discovered } from './discovery.js';
import type { OAuthClient, OAuthSettings, OAuthStore } from './port.js';
import { codeOf } from './discovery.js';
import { problem, type OAuthResult } from './problem.js';

/** The redirect URI registered for Candor: loopback, any port (RFC 8252 §7.3). */
export const LOOPBACK_REDIRECT = 'http://127.0.0.1/callback';

export interface ClientDeps {
  store: OAuthStore;
  fetchFn?: FetchLike;
  /** Where a person configures a client by hand, for messages (`upstreams.NAME.oauth`). */
  where: string;
}

/** The client's information as the SDK's token helpers take it. */
export function clientInformation(c: OAuthClient): OAuthClientInformationMixed {
  return {
    client_id: c.client_id,
    ...(c.client_secret ? { client_secret: c.client_secret } : {}),
    ...(c.token_endpoint_auth_method
      ? { token_endpoint_auth_method: c.token_endpoint_auth_method }
      : {}),
  };
}

/** The configured client, or null when none is configured; a vault failure is a problem. */
export async function configuredClient(
  issuer: string,
  tokenEndpoint: string,
  cfg: OAuthSettings | undefined,
  deps: ClientDeps,
): Promise<OAuthResult<OAuthClient | null>> {
  if (cfg?.client_id !== undefined)
    return {
      ok: true,
      value: {
        issuer,
        client_id: cfg.client_id,
        how: 'registered',
        redirect_uris: [LOOPBACK_REDIRECT],
        token_endpoint_auth_method: 'none',
        client_secret: null,
      },
    };
  if (cfg?.client_credential === undefined) return { ok: true, value: null };
  const r = await cfg.client_credential(tokenEndpoint);
  if (!r.ok) return problem('client_credential', `${deps.where}.client_credential: ${r.message}`);
  return {
    ok: true,
    value: {
      issuer,
      client_id: r.client_id,
      how: 'registered',
      redirect_uris: [LOOPBACK_REDIRECT],
      token_endpoint_auth_method: 'client_secret_basic',
      client_secret: r.client_secret,
    },
  };
}

/** The client to log in with: configured, held, by metadata document, or registered now. */
export async function obtainClient(
  d: Discovered,
  cfg: OAuthSettings | undefined,
  scope: string | undefined,
  deps: ClientDeps,
): Promise<OAuthResult<OAuthClient>> {
  const configured = await configuredClient(d.issuer, d.metadata.token_endpoint, cfg, deps);
  if (!configured.ok) return configured;
  if (configured.value) return { ok: true, value: configured.value };

  const held = await deps.store.client(d.issuer);
  if (!held.ok) return problem('vault', held.failure.message);
  const cimd = cfg?.client_metadata_url;
  const cimdSupported = d.metadata.client_id_metadata_document_supported === true;
  // A held client stays in use unless it is a metadata document other than the configured one.
  if (held.value && !(held.value.how === 'metadata_document' && held.value.client_id !== cimd))
    return { ok: true, value: held.value };

  let client: OAuthClient;
  if (cimd !== undefined && cimdSupported) {
    client = {
      issuer: d.issuer,
      client_id: cimd,
      how: 'metadata_document',
      redirect_uris: [LOOPBACK_REDIRECT],
      token_endpoint_auth_method: 'none',
      client_secret: null,
    };
  } else if (d.metadata.registration_endpoint) {
    try {
      const info = await registerClient(d.issuer, {
        metadata: d.metadata,
        clientMetadata: {
          client_name: 'Candor',
          redirect_uris: [LOOPBACK_REDIRECT],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
          // A loopback redirect: a native application (RFC 8252, OpenID Connect registration).
          application_type: 'native',
        },
        ...(scope !== undefined ? { scope } : {}),
        ...(deps.fetchFn ? { fetchFn: deps.fetchFn } : {}),
      });
      client = {
        issuer: d.issuer,
        client_id: info.client_id,
        how: 'registered',
        redirect_uris: info.redirect_uris ?? [LOOPBACK_REDIRECT],
        token_endpoint_auth_method: info.token_endpoint_auth_method ?? 'none',
        client_secret: info.client_secret ?? null,
      };
    } catch (error) {
      const status = (error as { status?: unknown }).status;
      return problem(
        'registration_rejected',
        `the authorization server ${d.issuer} refused dynamic client registration (${typeof status === 'number' ? `HTTP ${status}` : codeOf(error)}); register a client by hand and set ${deps.where}.client_id`,
      );
    }
  } else {
    return problem(
      'no_client',
      `the authorization server ${d.issuer} offers no dynamic client registration${cimdSupported ? ` (it accepts Client ID Metadata Documents: set ${deps.where}.client_metadata_url)` : ''}; register a client by hand (redirect URI ${LOOPBACK_REDIRECT}) and set ${deps.where}.client_id`,
    );
  }
  const saved = await deps.store.saveClient(client);
  if (!saved.ok) return problem('vault', saved.failure.message);
  return { ok: true, value: client };
}
