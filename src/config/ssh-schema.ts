// The `ssh:` section of candor.yaml: an inventory of hosts (keys by vault reference, host keys
// pinned) and SSH actions whose command templates quote every substituted value for the remote
// shell. Secrets (vault values, inputs marked secret) reach a command only through `secret_env`:
// the wrapper's stdin channel, exported into the command's environment, never its argv.
import { z } from 'zod';
import { ActionClass, valuesOf } from '../core/vocabulary.js';
import { HOST_REF_PATTERN, hostKeySchema } from '../ssh/inventory.js';
import { SECRET_ENV_NAME_PATTERN } from '../ssh/wrapper.js';

const VAULT_REF = /^vault:[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** `secret_env` values: a vault entry, or exactly one input field. */
export const SECRET_ENV_SOURCE =
  /^(?:vault:[A-Za-z0-9][A-Za-z0-9._-]{0,63}|\{\{\s*input\.([A-Za-z_][A-Za-z0-9_-]*)\s*\}\})$/;

const sshHostSchema = z.strictObject({
  host: z.string().min(1).describe('DNS name or address'),
  port: z.number().int().min(1).max(65535).default(22),
  user: z.string().min(1).describe('the remote account'),
  key_ref: z
    .string()
    .regex(
      VAULT_REF,
      'an SSH key is referenced as vault:NAME (an ssh_key entry bound to ssh:HOST_REF); the key itself never goes in this file',
    ),
  host_key: hostKeySchema.describe(
    'the server key, pinned by its OpenSSH fingerprint (ssh-keygen -lf): { policy: pinned, fingerprint: SHA256:… }',
  ),
  marker_dir: z
    .string()
    .min(1)
    .optional()
    .describe(
      'remote directory of operation markers (default ${XDG_STATE_HOME:-$HOME/.local/state}/candor/ops); the remote user must own it and no one else may write it',
    ),
});

export const sshActionConfigSchema = z.strictObject({
  name: z
    .string()
    .regex(/^[a-z][a-z0-9_]{0,63}$/, 'action names are snake_case (a-z, 0-9, _), at most 64'),
  class: z.enum(valuesOf(ActionClass)),
  subject: z.string().min(1).describe('a short noun for messages, e.g. "the service"'),
  description: z.string().min(1).describe('what the tool does, for the agent'),
  title: z.string().min(1).optional(),
  host_ref: z.string().describe('a name under ssh.hosts'),
  input: z
    .record(z.string(), z.unknown())
    .default({ type: 'object', properties: {}, additionalProperties: false })
    .describe(
      'JSON Schema of the tool arguments (type: object); a property with writeOnly: true is secret',
    ),
  command: z
    .string()
    .min(1)
    .describe(
      'the remote command (sh); {{input.x}} is replaced by the value, shell-quoted, and is allowed only where a plain word goes (top level, ( … ), $( … )): never inside quotes, $\'…\', backticks, ${…}, $((…)), a comment or a here-document, after a backslash or right after $; secrets only as "$NAME" from secret_env',
    ),
  check: z
    .string()
    .min(1)
    .optional()
    .describe('set_state: a command that exits 0 exactly when the desired state holds'),
  secret_env: z
    .record(
      z
        .string()
        .regex(SECRET_ENV_NAME_PATTERN, 'an environment variable name (A-Z a-z 0-9 _, at most 64)'),
      z
        .string()
        .regex(SECRET_ENV_SOURCE, 'a secret_env value is vault:NAME or exactly "{{input.FIELD}}"'),
    )
    .optional()
    .describe('NAME: vault:ENTRY | "{{input.field}}" — exported into the command environment'),
  deadline_ms: z.number().int().positive().max(86_400_000).optional(),
  attempt_budget: z.number().int().min(1).max(10).optional(),
});

export const sshConfigSchema = z
  .strictObject({
    hosts: z.record(
      z.string().regex(HOST_REF_PATTERN, 'host refs are 1-64 of A-Z a-z 0-9 . _ - (first alnum)'),
      sshHostSchema,
    ),
    actions: z.array(sshActionConfigSchema).default([]),
    output_cap_bytes: z
      .number()
      .int()
      .positive()
      .optional()
      .describe('bytes of stdout and of stderr kept per command (default 1 MiB)'),
  })
  .describe('SSH hosts and the actions that run commands on them through the marker wrapper');

export type SshActionConfig = z.output<typeof sshActionConfigSchema>;
export type SshConfig = z.output<typeof sshConfigSchema>;
