// SSH actions from candor.yaml: the checks that must pass at load (host refs resolve, templates
// name known fields in safe places, secrets reach a command only through secret_env) and the
// engine's SSH action definitions built from them.
import { z } from 'zod';
import { defineSshAction } from '../engine/ssh-action.js';
import type { ConfiguredAction, Problem } from './configured.js';
import type { FieldPath } from './locate.js';
import type { GatewayConfig } from './schema.js';
import { SECRET_ENV_SOURCE, type SshActionConfig } from './ssh-schema.js';
import { commandPlaceholders, renderCommand, valueText } from './ssh-template.js';

const VAULT_PLACEHOLDER = /\{\{\s*vault\b/;

/** Input fields a secret_env entry carries (`NAME: "{{input.field}}"`), by variable name. */
function inputBindings(a: SshActionConfig): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, source] of Object.entries(a.secret_env ?? {})) {
    const field = SECRET_ENV_SOURCE.exec(source)?.[1];
    if (field !== undefined) out.set(name, field);
  }
  return out;
}

/** `vault:` references of secret_env, by variable name. */
export function vaultBindings(a: SshActionConfig): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, source] of Object.entries(a.secret_env ?? {}))
    if (source.startsWith('vault:')) out.set(name, source);
  return out;
}

function propertiesOf(input: Record<string, unknown>): Record<string, unknown> {
  const props = input['properties'];
  return props !== null && typeof props === 'object' ? (props as Record<string, unknown>) : {};
}

/** Top-level input fields marked secret: `writeOnly: true` (JSON Schema's mark for passwords). */
function writeOnlyFields(input: Record<string, unknown>): Set<string> {
  const out = new Set<string>();
  for (const [k, v] of Object.entries(propertiesOf(input)))
    if (v !== null && typeof v === 'object' && (v as Record<string, unknown>)['writeOnly'] === true)
      out.add(k);
  return out;
}

/** Every problem of the `ssh:` section (empty when usable); `names` are the action names so far. */
export function checkSshSection(
  config: GatewayConfig,
  names: Set<string>,
  checkInput: (input: Record<string, unknown>, at: FieldPath) => Problem[],
  reserved: readonly string[],
): Problem[] {
  const ssh = config.ssh;
  if (!ssh) return [];
  const out: Problem[] = [];
  if (Object.keys(ssh.hosts).length > 0 && config.vault === undefined)
    out.push({ path: ['ssh'], problem: 'SSH keys are vault: references: add a `vault:` section' });
  ssh.actions.forEach((a, i) => {
    const at: FieldPath = ['ssh', 'actions', i];
    if (reserved.includes(a.name))
      out.push({ path: [...at, 'name'], problem: `"${a.name}" is a built-in tool name` });
    if (names.has(a.name))
      out.push({ path: [...at, 'name'], problem: `another action is named "${a.name}"` });
    names.add(a.name);
    if (!Object.hasOwn(ssh.hosts, a.host_ref))
      out.push({
        path: [...at, 'host_ref'],
        problem: `no host named "${a.host_ref}" under ssh.hosts`,
      });
    out.push(...checkInput(a.input, [...at, 'input']));
    const fields = new Set(Object.keys(propertiesOf(a.input)));
    const secret = writeOnlyFields(a.input);
    for (const [name, field] of inputBindings(a)) {
      secret.add(field);
      if (!fields.has(field))
        out.push({
          path: [...at, 'secret_env', name],
          problem: `{{input.${field}}}: the input schema has no property "${field}"`,
        });
    }
    const carried = new Set(inputBindings(a).values());
    for (const field of writeOnlyFields(a.input))
      if (!carried.has(field))
        out.push({
          path: [...at, 'input', 'properties', field],
          problem: `"${field}" is secret (writeOnly): pass it in secret_env (NAME: "{{input.${field}}}") and use "$NAME" in the command`,
          at: 'key',
        });
    const templates: Array<['command' | 'check', string | undefined]> = [
      ['command', a.command],
      ['check', a.check],
    ];
    for (const [key, template] of templates) {
      if (template === undefined) continue;
      const path: FieldPath = [...at, key];
      if (VAULT_PLACEHOLDER.test(template))
        out.push({
          path,
          problem: `a vault value never goes in the ${key} text (it would be on a command line): bind it in secret_env and use "$NAME"`,
        });
      for (const p of commandPlaceholders(template)) {
        const field = p.name.split('.')[1];
        if (!p.name.startsWith('input.') || field === undefined)
          out.push({
            path,
            problem: `{{${p.name}}}: unknown placeholder (an SSH ${key} uses input.FIELD only)`,
          });
        else if (!fields.has(field))
          out.push({ path, problem: `{{${p.name}}}: the input schema has no property "${field}"` });
        else if (secret.has(field))
          out.push({
            path,
            problem: `{{${p.name}}}: "${field}" is secret and would be on a command line; bind it in secret_env and use "$NAME"`,
          });
        else if (p.unsafe !== null)
          out.push({
            path,
            problem: `{{${p.name}}} ${p.unsafe} (character ${p.at + 1} of the ${key}): the shell would not read the value as one quoted word; put the placeholder where a plain word goes, outside quotes, backticks, \${…}, $((…)) and comments and not right after $ (it is quoted for you)`,
          });
      }
    }
    if (a.class === 'set_state' && a.check === undefined)
      out.push({ path: [...at, 'class'], problem: 'a set_state action needs a check command' });
  });
  return out;
}

/** The configured SSH actions; call only with a configuration that passed checkConfig. */
export function buildSshActions(config: GatewayConfig): ConfiguredAction[] {
  return (config.ssh?.actions ?? []).map((a) => {
    const env = [...inputBindings(a)];
    const refs = Object.fromEntries(vaultBindings(a));
    const check = a.check;
    const definition = defineSshAction<unknown>({
      name: a.name,
      class: a.class,
      subject: a.subject,
      input: z.fromJSONSchema(a.input),
      host_ref: a.host_ref,
      command: (input) => renderCommand(a.command, input),
      ...(check !== undefined ? { check: (input: unknown) => renderCommand(check, input) } : {}),
      ...(env.length > 0
        ? {
            secret_env: (input: unknown) => {
              const out: Record<string, string> = {};
              for (const [name, field] of env) {
                const v = (input as Record<string, unknown> | null)?.[field];
                if (v !== undefined && v !== null) out[name] = valueText(v);
              }
              return out;
            },
          }
        : {}),
      ...(Object.keys(refs).length > 0 ? { secret_refs: refs } : {}),
      ...(a.deadline_ms !== undefined ? { deadline_ms: a.deadline_ms } : {}),
      ...(a.attempt_budget !== undefined ? { attempt_budget: a.attempt_budget } : {}),
    });
    return {
      definition: definition,
      description: a.description,
      title: a.title,
      input_schema: a.input,
    };
  });
}
