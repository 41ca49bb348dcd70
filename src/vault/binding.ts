// Credential bindings: a credential may only travel to the destinations it was bound to, so an
// agent cannot point it at another host or "try another" credential on a path it was not meant for.
//
// HTTP: the request URL is parsed with the WHATWG URL parser (the one the transport uses), which
// lower-cases scheme and host, elides default ports, converts IDN hosts to punycode and removes
// dot segments (also `%2e%2e`). The origin must equal the binding's origin exactly, and the path
// must lie under the binding's prefix on whole segments (`/v1` admits `/v1` and `/v1/x`, not
// `/v10`). URLs with user info, and paths holding an encoded slash or backslash (`%2F`, `%5C`, which
// some servers decode after routing), are refused outright.
// SSH: the inventory host reference must be equal.
import {
  fail,
  ok,
  type Binding,
  type Destination,
  type Result,
  type VaultFailure,
} from './types.js';

/** Parses `https://host[:port][/path/prefix]` or `ssh:HOST_REF`. */
export function parseBinding(spec: string): Result<Binding, VaultFailure> {
  const invalid = (why: string) =>
    fail<VaultFailure>({ code: 'invalid_binding', message: `Binding "${spec}": ${why}.` });
  if (spec.startsWith('ssh:')) {
    const hostRef = spec.slice(4);
    if (!/^[A-Za-z0-9][A-Za-z0-9._:@-]*$/.test(hostRef)) return invalid('bad SSH host reference');
    return ok({ kind: 'ssh', host_ref: hostRef });
  }
  if (!/^https?:\/\//i.test(spec)) return invalid('expected http(s)://host[/path] or ssh:HOST');
  let url: URL;
  try {
    url = new URL(spec);
  } catch {
    return invalid('not a valid URL');
  }
  if (url.username !== '' || url.password !== '') return invalid('user info is not allowed');
  if (url.search !== '' || url.hash !== '') return invalid('query and fragment are not allowed');
  if (hasEncodedSeparator(url.pathname)) return invalid('encoded slash or backslash in the path');
  return ok({ kind: 'http', origin: url.origin, path_prefix: url.pathname });
}

export function formatBinding(binding: Binding): string {
  return binding.kind === 'ssh'
    ? `ssh:${binding.host_ref}`
    : `${binding.origin}${binding.path_prefix === '/' ? '' : binding.path_prefix}`;
}

/** Whether `destination` is admitted by at least one of `bindings`. Total: never throws. */
export function bindingAdmits(bindings: readonly Binding[], destination: Destination): boolean {
  if (destination.kind === 'ssh') {
    return bindings.some((b) => b.kind === 'ssh' && b.host_ref === destination.host_ref);
  }
  let url: URL;
  try {
    url = new URL(destination.url);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return false;
  if (url.username !== '' || url.password !== '') return false;
  if (hasEncodedSeparator(url.pathname)) return false;
  return bindings.some(
    (b) => b.kind === 'http' && b.origin === url.origin && pathUnder(url.pathname, b.path_prefix),
  );
}

function pathUnder(path: string, prefix: string): boolean {
  if (prefix === '' || prefix === '/') return true;
  if (prefix.endsWith('/')) return path.startsWith(prefix);
  return path === prefix || path.startsWith(`${prefix}/`);
}

function hasEncodedSeparator(path: string): boolean {
  return /%2f|%5c/i.test(path);
}
