// Builds engine ActionDefinitions from configured actions, and the checks that must pass first
// (references resolve, templates name known fields, JSON Schemas convert, paths stay under the
// destination's route prefix).
import { z } from 'zod';
import { DEFAULT_SCOPES, SENSITIVE_CLASSES } from '../approvals/policy.js';
import { SECRET_HEADERS } from '../core/fingerprint.js';
import {
  defineAction,
  isHttpAction,
  type ActionDefinition,
  type Destination,
  type HttpDestination,
} from '../engine/action.js';
import { parseCreatedAt } from '../engine/lookup-binding.js';
import { UsageError } from '../engine/runtime.js';
import type { ConfiguredAction, Problem } from './configured.js';
import type { FieldPath } from './locate.js';
import type { ActionConfig, GatewayConfig } from './schema.js';
import { buildSshActions, checkSshSection } from './ssh-actions.js';
import {
  placeholderProblem,
  placeholdersIn,
  renderBody,
  renderHeader,
  renderPath,
  type TemplateScope,
} from './template.js';

export type { ConfiguredAction, Problem } from './configured.js';

/**
 * Request headers that belong to the HTTP transport: they decide which host gets the request and
 * how its bytes are framed (so a configured one could smuggle a second request or reroute this
 * one). `Proxy-*` headers are refused as a family.
 */
const TRANSPORT_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'upgrade',
  'te',
  'trailer',
  'keep-alive',
]);

/** The authority reference of a destination without a credential. */
export const NO_CREDENTIAL = 'none';

/** Tool names the gateway itself provides; an action may not take them. */
export const BUILTIN_TOOLS = [
  'operation_status',
  'reconcile_operation',
  'list_unresolved_operations',
] as const;

/** A configured HTTP action's definition (an SSH action here is a programming error). */
export function httpDefinition(
  a: ConfiguredAction,
): ActionDefinition<unknown, unknown, HttpDestination> {
  if (!isHttpAction(a.definition))
    throw new TypeError(`${a.definition.name} is not an HTTP action`);
  return a.definition;
}

/**
 * Converted schemas by their JSON text. A generated configuration repeats the same schemas across
 * thousands of actions (Microsoft Graph: 3,600 distinct inputs in 11,400 actions), and checking a
 * configuration converts each schema once more when its actions are built; a conversion costs
 * about a millisecond. Zod schemas are immutable, so actions share one. Bounded: cleared when full.
 */
const converted = new Map<string, z.ZodType>();
const CONVERTED_MAX = 20_000;

/** The same schema object again (a configuration checked, then built): no JSON text needed. */
const convertedObjects = new WeakMap<object, z.ZodType>();

function toZod(schema: Record<string, unknown>): z.ZodType {
  const same = convertedObjects.get(schema);
  if (same !== undefined) return same;
  const key = JSON.stringify(schema);
  let out = converted.get(key);
  if (out === undefined) {
    out = z.fromJSONSchema(schema);
    if (converted.size >= CONVERTED_MAX) converted.clear();
    converted.set(key, out);
  }
  convertedObjects.set(schema, out);
  return out;
}

function convertProblem(schema: Record<string, unknown>): string | null {
  try {
    toZod(schema);
    return null;
  } catch (error) {
    return `not a usable JSON Schema: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** `/v1/records/{{input.id}}?x=1` lies under `/v1/records` on whole segments. */
function underPrefix(pathTemplate: string, prefix: string): boolean {
  const path = pathTemplate.split('?')[0]!.split('/');
  const want = prefix.split('/').filter((s, i) => i === 0 || s !== '');
  return want.every((seg, i) => path[i] === seg);
}

export function authorityRefOf(config: GatewayConfig, destination: string): string {
  const cred = config.destinations[destination]?.credential;
  return cred === undefined ? NO_CREDENTIAL : (config.credentials[cred]?.ref ?? NO_CREDENTIAL);
}

/** Every reference and template problem in the configuration (empty when it is usable). */
export function checkConfig(config: GatewayConfig): Problem[] {
  const out: Problem[] = [];
  const seenRefs = new Map<string, string>();
  for (const [name, c] of Object.entries(config.credentials)) {
    const at = ['credentials', name];
    const other = seenRefs.get(c.ref);
    if (other !== undefined)
      out.push({ path: [...at, 'ref'], problem: `${c.ref} is already declared as "${other}"` });
    seenRefs.set(c.ref, name);
    if (c.ref.startsWith('vault:')) {
      if (config.vault === undefined)
        out.push({ path: [...at, 'ref'], problem: 'a vault: reference needs a `vault:` section' });
      for (const k of ['header', 'scheme', 'username'] as const)
        if (c[k] !== undefined)
          out.push({
            path: [...at, k],
            problem: 'for a vault: reference the vault entry decides how it is presented',
            at: 'key',
          });
      continue;
    }
    const header = (c.header ?? 'authorization').toLowerCase();
    if (c.scheme !== undefined && header !== 'authorization')
      out.push({ path: [...at, 'header'], problem: `scheme ${c.scheme} is sent in authorization` });
    if (c.scheme === 'Basic' && c.username === undefined)
      out.push({ path: at, problem: 'scheme Basic needs a username' });
    if (c.scheme !== 'Basic' && c.username !== undefined)
      out.push({ path: [...at, 'username'], problem: 'a username is only used by scheme Basic' });
  }
  for (const [name, d] of Object.entries(config.destinations)) {
    if (d.credential !== undefined && !Object.hasOwn(config.credentials, d.credential))
      out.push({
        path: ['destinations', name, 'credential'],
        problem: `no credential named "${d.credential}" under credentials`,
      });
    if (d.failure_body !== undefined) {
      const p = convertProblem(d.failure_body);
      if (p) out.push({ path: ['destinations', name, 'failure_body'], problem: p });
    }
  }
  const names = new Set<string>();
  config.actions.forEach((a, i) => out.push(...checkAction(config, a, ['actions', i], names)));
  out.push(...checkSshSection(config, names, checkInput, BUILTIN_TOOLS));
  if (
    config.actions.length === 0 &&
    (config.ssh?.actions.length ?? 0) === 0 &&
    Object.keys(config.upstreams ?? {}).length === 0
  )
    out.push({
      path: ['actions'],
      problem: 'at least one action is needed (actions, ssh.actions or upstreams)',
    });
  out.push(...checkApprovals(config));
  return out;
}

/**
 * A typo never weakens a contract: an approval override must name a configured action or a known
 * class, and may never make a sensitive class (or an action of one) run without a person.
 */
function checkApprovals(config: GatewayConfig): Problem[] {
  const spec = config.approvals;
  if (!spec) return [];
  const out: Problem[] = [];
  for (const [cls, scope] of Object.entries(spec.classes ?? {})) {
    const at = ['approvals', 'classes', cls];
    if (!Object.hasOwn(DEFAULT_SCOPES, cls))
      out.push({
        path: at,
        problem: `unknown action class "${cls}" (one of ${Object.keys(DEFAULT_SCOPES).join(', ')})`,
        at: 'key',
      });
    else if (scope === 'auto' && SENSITIVE_CLASSES.has(cls))
      out.push({
        path: at,
        problem: `class ${cls} is sensitive and cannot be approved automatically (session or per_call)`,
      });
  }
  const byName = new Map<string, { class: string }>(
    [...config.actions, ...(config.ssh?.actions ?? [])].map((a) => [a.name, a]),
  );
  for (const [name, scope] of Object.entries(spec.actions ?? {})) {
    const at = ['approvals', 'actions', name];
    const action = byName.get(name);
    if (action === undefined)
      out.push({ path: at, problem: `no action named "${name}" under actions`, at: 'key' });
    else if (scope === 'auto' && SENSITIVE_CLASSES.has(action.class))
      out.push({
        path: at,
        problem: `action ${name} is of sensitive class ${action.class} and cannot be approved automatically`,
      });
  }
  return out;
}

/** An action's input schema: an object whose properties do not take `operation_id`. */
function checkInput(input: Record<string, unknown>, at: FieldPath): Problem[] {
  const out: Problem[] = [];
  if (input['type'] !== 'object')
    return [{ path: at, problem: 'the input schema must have type: object' }];
  const props = input['properties'];
  if (props !== undefined && (typeof props !== 'object' || props === null))
    out.push({ path: [...at, 'properties'], problem: 'properties must be an object' });
  const fields = new Set(Object.keys((props as Record<string, unknown> | undefined) ?? {}));
  if (fields.has('operation_id'))
    out.push({
      path: [...at, 'properties', 'operation_id'],
      problem: 'operation_id is reserved for retrying an operation',
      at: 'key',
    });
  const p = convertProblem(input);
  if (p) out.push({ path: at, problem: p });
  return out;
}

function checkAction(
  config: GatewayConfig,
  a: ActionConfig,
  at: FieldPath,
  names: Set<string>,
): Problem[] {
  const out: Problem[] = [];
  if ((BUILTIN_TOOLS as readonly string[]).includes(a.name))
    out.push({ path: [...at, 'name'], problem: `"${a.name}" is a built-in tool name` });
  if (names.has(a.name))
    out.push({ path: [...at, 'name'], problem: `another action is named "${a.name}"` });
  names.add(a.name);
  const dest = Object.hasOwn(config.destinations, a.destination)
    ? config.destinations[a.destination]
    : undefined;
  if (!dest)
    out.push({
      path: [...at, 'destination'],
      problem: `no destination named "${a.destination}" under destinations`,
    });

  out.push(...checkInput(a.input, [...at, 'input']));
  const fields =
    a.input['type'] === 'object'
      ? new Set(Object.keys((a.input['properties'] as Record<string, unknown> | undefined) ?? {}))
      : null;
  const rp = convertProblem(a.response);
  if (rp) out.push({ path: [...at, 'response'], problem: rp });

  const templates: Array<[FieldPath, unknown]> = [
    [[...at, 'request', 'path'], a.request.path],
    [[...at, 'request', 'body'], a.request.body],
    [[...at, 'request', 'headers'], a.request.headers],
    [[...at, 'subject_ref'], a.subject_ref],
  ];
  // The runtime hands the lookup the operation's recorded input, so lookups may use it too.
  if (a.reconcile) {
    templates.push([[...at, 'reconcile', 'path'], a.reconcile.path]);
    for (const [field, t] of Object.entries(a.reconcile.identify ?? {}))
      templates.push([[...at, 'reconcile', 'identify', field], t]);
  }
  for (const [path, template] of templates) {
    for (const name of placeholdersIn(template)) {
      const p = placeholderProblem(name, fields);
      if (p) out.push({ path, problem: p });
    }
  }
  for (const h of Object.keys(a.request.headers ?? {})) {
    const lower = h.toLowerCase();
    if (SECRET_HEADERS.has(lower) || lower === dest?.idempotency?.header.toLowerCase())
      out.push({
        path: [...at, 'request', 'headers', h],
        problem: 'credentials and idempotency keys are added by the gateway, never configured',
        at: 'key',
      });
    else if (TRANSPORT_HEADERS.has(lower) || lower.startsWith('proxy-'))
      out.push({
        path: [...at, 'request', 'headers', h],
        problem: `${h} is set by the HTTP transport (it decides where and how the request goes), never configured`,
        at: 'key',
      });
  }
  if (dest) {
    if (!underPrefix(a.request.path, dest.route_prefix))
      out.push({
        path: [...at, 'request', 'path'],
        problem: `the path must lie under the destination's route_prefix ${dest.route_prefix}`,
      });
    if (a.reconcile && !underPrefix(a.reconcile.path, dest.route_prefix))
      out.push({
        path: [...at, 'reconcile', 'path'],
        problem: `the path must lie under the destination's route_prefix ${dest.route_prefix}`,
      });
  }
  if (a.remote_ref !== undefined && a.class === 'read')
    out.push({ path: [...at, 'remote_ref'], problem: 'a read creates nothing to refer to' });
  return out;
}

function dig(value: unknown, dotPath: string): unknown {
  // `.` is the body itself: services whose list answers are bare arrays.
  if (dotPath === '.') return value;
  let v = value;
  for (const part of dotPath.split('.')) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

function refOf(record: unknown, field: string): string | null {
  const v = dig(record, field);
  return typeof v === 'string' || typeof v === 'number' ? String(v) : null;
}

/** Builds the engine's actions; call only with a configuration that passed checkConfig. */
export function buildActions(config: GatewayConfig): ConfiguredAction[] {
  return [...buildHttpActions(config), ...buildSshActions(config)];
}

function buildHttpActions(config: GatewayConfig): ConfiguredAction[] {
  return config.actions.map((a) => {
    const dest = config.destinations[a.destination]!;
    const method = a.request.method;
    const route = a.request.path
      .split('?')[0]!
      .replace(/\{\{\s*(?:input\.)?([\w.-]+)\s*\}\}/g, '{$1}');
    const destination: Destination = {
      origin: dest.origin,
      authority_ref: authorityRefOf(config, a.destination),
      route_template: route,
      five_xx: dest.five_xx,
    };
    if (dest.idempotency) destination.idempotency = { ...dest.idempotency };
    if (dest.failure_body) destination.failure_body = toZod(dest.failure_body);
    const lookup = a.reconcile;
    if (lookup) {
      const identify = lookup.identify;
      const createdAt = lookup.created_at;
      destination.reconciliation = {
        shape: lookup.shape,
        route: `${lookup.method} ${lookup.path}`,
        maxAnswerBytes: lookup.max_answer_bytes,
        lookup: (ctx, input) => ({
          method: lookup.method,
          path: renderPath(lookup.path, { ...ctx, input }),
        }),
        matches(body) {
          // A get-by-id answers with the record itself.
          const items = lookup.shape === 'one' ? [body] : dig(body, lookup.items);
          if (!Array.isArray(items))
            throw new TypeError(`lookup body has no array at "${lookup.items}"`);
          return items.map((record: unknown) => {
            const ref = refOf(record, lookup.ref);
            if (ref === null) throw new TypeError(`a looked-up record has no "${lookup.ref}"`);
            return { ref, record };
          });
        },
        ...(identify
          ? {
              identify: (input: unknown, ctx: Omit<TemplateScope, 'input'>) =>
                Object.fromEntries(
                  Object.entries(identify).map(([field, t]) => {
                    const scope = { ...ctx, input };
                    // A missing value identifies nothing: rule b then does not apply.
                    for (const name of placeholdersIn(t))
                      if (renderHeader(`{{${name}}}`, scope) === '')
                        throw new TypeError(`identify.${field}: ${name} has no value`);
                    return [field, renderHeader(t, scope)];
                  }),
                ),
            }
          : {}),
        ...(createdAt !== undefined
          ? { createdAt: (record: unknown) => parseCreatedAt(dig(record, createdAt)) }
          : {}),
      };
    }
    const request = (input: unknown, ctx: Omit<TemplateScope, 'input'>) => {
      const scope: TemplateScope = { ...ctx, input };
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(a.request.headers ?? {}))
        headers[k.toLowerCase()] = renderHeader(v, scope);
      return {
        method,
        path: renderPath(a.request.path, scope),
        ...(a.request.headers ? { headers } : {}),
        ...(a.request.body !== undefined ? { body: renderBody(a.request.body, scope) } : {}),
      };
    };
    const remoteRefField = a.remote_ref;
    const subjectRef = a.subject_ref;
    const definition = defineAction<unknown, unknown>({
      name: a.name,
      class: a.class,
      subject: a.subject,
      input: toZod(a.input),
      response: toZod(a.response),
      request,
      ...(remoteRefField !== undefined
        ? { remoteRef: (data: unknown) => refOf(data, remoteRefField) }
        : {}),
      ...(subjectRef !== undefined
        ? {
            subjectRef: (input: unknown) =>
              renderHeaderSafe(subjectRef, {
                input,
                operation_id: '',
                correlation_id: '',
                idempotency_key: null,
              }),
          }
        : {}),
      destination,
      ...(a.timeouts ? { timeouts: stripUndefined(a.timeouts) } : {}),
      ...(a.attempt_budget !== undefined ? { attempt_budget: a.attempt_budget } : {}),
    });
    return { definition, description: a.description, title: a.title, input_schema: a.input };
  });
}

function renderHeaderSafe(template: string, scope: TemplateScope): string | null {
  try {
    return renderHeader(template, scope);
  } catch (error) {
    if (error instanceof UsageError) return null;
    throw error;
  }
}

function stripUndefined<T extends object>(o: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]: Exclude<T[K], undefined>;
  };
}
