// Input checks for stored credentials. A value that could smuggle a header line, or that is too
// short for the redactor to protect (MIN_SECRET_LENGTH, core/redact.ts), is refused at the door.
import {
  CREDENTIAL_NAME,
  fail,
  isSshCredentialType,
  MIN_SECRET_LENGTH,
  ok,
  type Binding,
  type CredentialType,
  type Result,
  type VaultFailure,
} from './types.js';

const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers a credential must not replace: routing, framing and hop-by-hop headers. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'cookie',
  'set-cookie',
]);
const PRIVATE_KEY_PEM =
  /^-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----\r?\n[\s\S]+\r?\n-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----\s*$/;

export interface CredentialInput {
  name: string;
  type: CredentialType;
  secret: string;
  bindings: Binding[];
  username?: string | undefined;
  header_name?: string | undefined;
}

export function validateCredential(input: CredentialInput): Result<void, VaultFailure> {
  const bad = (code: 'invalid_name' | 'invalid_value' | 'invalid_binding', message: string) =>
    fail<VaultFailure>({ code, message });
  if (!CREDENTIAL_NAME.test(input.name)) {
    return bad('invalid_name', 'Credential names are 1-64 of A-Z a-z 0-9 . _ - (first alnum).');
  }
  if (input.bindings.length === 0) {
    return bad('invalid_binding', `Credential "${input.name}" needs at least one binding.`);
  }
  const sshBindings = input.bindings.filter((b) => b.kind === 'ssh').length;
  const wantSsh = isSshCredentialType(input.type);
  if (sshBindings !== (wantSsh ? input.bindings.length : 0)) {
    return bad(
      'invalid_binding',
      wantSsh
        ? `An ${input.type} credential takes only ssh:HOST bindings.`
        : `A ${input.type} credential takes only http(s) bindings.`,
    );
  }
  const secret = input.secret;
  if (secret.length < MIN_SECRET_LENGTH) {
    return bad(
      'invalid_value',
      `The value must have at least ${MIN_SECRET_LENGTH} characters (shorter ones cannot be redacted).`,
    );
  }
  if (input.type === 'ssh_secret') {
    // Carried in a shell-quoted export on the wrapper's stdin: anything but NUL survives.
    return secret.includes('\0')
      ? bad('invalid_value', 'An ssh_secret value must not contain a NUL character.')
      : ok(undefined);
  }
  if (wantSsh) {
    return PRIVATE_KEY_PEM.test(secret)
      ? ok(undefined)
      : bad('invalid_value', 'An ssh_key value must be an unencrypted PEM/OpenSSH private key.');
  }
  // Header values: no control characters (a CR/LF would inject a header) and no edge whitespace.
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(secret) || secret.trim() !== secret) {
    return bad('invalid_value', 'The value must not contain control characters or edge spaces.');
  }
  if (input.type === 'basic') {
    const user = input.username ?? '';
    // eslint-disable-next-line no-control-regex
    if (user === '' || user.includes(':') || /[\x00-\x1f\x7f]/.test(user)) {
      return bad('invalid_value', 'A basic credential needs a username without ":".');
    }
  }
  if (input.type === 'api_key' && input.header_name !== undefined) {
    const h = input.header_name;
    if (!HEADER_TOKEN.test(h) || RESERVED_HEADERS.has(h.toLowerCase())) {
      return bad('invalid_value', `"${h}" cannot carry an API key.`);
    }
  }
  return ok(undefined);
}
