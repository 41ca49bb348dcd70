// `candor init --openapi SPEC`: a gateway configuration (candor.yaml) with one action per operation
// of an OpenAPI document. What the document says is copied (input from parameters and body, the
// success response, the operation's server, a declared idempotency header, security schemes as
// vault: references); what Candor has to guess (the action class, the key's retention, a lookup)
// says so in a comment naming its evidence; what the document cannot tell (a lookup for a write
// nothing can find) is a `# TODO: lookup`, and until then the action's unknown outcomes escalate.
import {
  objectShapeOf,
  type ApiModel,
  type ApiOperation,
  type JsonSchema,
} from '../fakes/openapi-doc.js';
import { ActionClass, valuesOf } from '../core/vocabulary.js';
import { guessClass, type ClassChoice } from './openapi-class.js';
import { lookupFor, type LookupPlan } from './openapi-lookup.js';
import { writeYaml } from './openapi-yaml.js';

export { CLIENT_REF_FIELDS } from './openapi-lookup.js';
export type { ClassChoice } from './openapi-class.js';

type Obj = Record<string, unknown>;
const CLASSES: readonly string[] = valuesOf(ActionClass);
/** Where actions go when neither the document nor --origin names an absolute server. */
const PLACEHOLDER_ORIGIN = 'http://127.0.0.1:8080';
/** Nesting of the response schema kept in the configuration (deeper: any value is accepted). */
const RESPONSE_DEPTH = 1;
/** Nested schemas an action's input keeps (see `bounded`). */
const INPUT_SCHEMAS = 40;

export interface InitOptions {
  /** The client deadline written into every action (`timeouts.total_ms`). */
  deadline_ms: number;
  /** Overrides the document's own server (origin and path prefix); per-operation servers stay. */
  origin?: string;
  /** A line of progress for long work. */
  progress?: (line: string) => void;
}

/** `x-candor-class` wins; otherwise method, path shape and summary verb decide (a guess). */
export function classFor(op: ApiOperation): ClassChoice {
  return guessClass(op);
}

/** Where a problem in the document is: an x-candor-class that names no class. */
export function declaredClassProblem(model: ApiModel): string | null {
  for (const op of model.operations)
    if (op.declared_class !== undefined && !CLASSES.includes(op.declared_class))
      return `${model.file}: paths.${op.path}.${op.method.toLowerCase()}.x-candor-class: expected one of ${CLASSES.join(', ')}, got "${op.declared_class}"`;
  return null;
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export const objectShape = objectShapeOf;

function slug(s: string): string {
  return (
    s
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40) || 'api'
  );
}

/** `/store/order/{orderId}` → "the order". */
function subjectOf(op: ApiOperation): string {
  const fixed = op.collection.split('/').filter((s) => s !== '' && !s.startsWith('{'));
  const noun = (fixed.at(-1) ?? 'record').replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
  return `the ${noun.endsWith('ies') ? `${noun.slice(0, -3)}y` : noun.replace(/(?<!s)s$/, '')}`;
}

export interface ActionPlan {
  op: ApiOperation;
  choice: ClassChoice;
  /** The lookup found for a write, or null (the TODO comment says why not). */
  lookup: LookupPlan | null;
  /** The body field set to the operation id (the client reference a lookup finds), if any. */
  client_ref_field: string | null;
  /** Input property → where it goes: a path or query parameter, or a body field. */
  input_fields: Record<string, 'path' | 'query' | 'body'>;
  input: JsonSchema;
  action: Obj;
  comments: string[];
}

export interface InitResult {
  yaml: string;
  /** The configuration `yaml` renders (with its comments left out). */
  config: Obj;
  plans: ActionPlan[];
}

interface Target {
  origin: string;
  prefix: string;
}

function targetOf(op: ApiOperation, model: ApiModel, override: Target | undefined): Target {
  const own = op.server.url !== '' && op.server.url !== model.server;
  if (own && op.server.origin !== undefined)
    return { origin: op.server.origin, prefix: op.server.prefix };
  if (override) return override;
  return { origin: op.server.origin ?? PLACEHOLDER_ORIGIN, prefix: op.server.prefix };
}

export function planActions(model: ApiModel, options: InitOptions): InitResult {
  let override: Target | undefined;
  if (options.origin !== undefined) {
    const u = new URL(options.origin);
    override = { origin: u.origin, prefix: u.pathname.replace(/\/+$/, '') };
  }
  const api = slug(
    (model.file.split(/[\\/]/).at(-1) ?? model.title).replace(/\.(ya?ml|json)$/i, ''),
  );
  const credentials: Obj = {};
  const destinations: Obj = {};
  const credComments = new Map<string, string>();
  const destComments = new Map<string, string>();
  const plans: ActionPlan[] = [];
  // The first origin is the API's own; other origins (a per-operation server) are named by host.
  const firstOrigin = targetOf(model.operations[0]!, model, override).origin;
  const started = performance.now();
  for (const [i, op] of model.operations.entries()) {
    if (i > 0 && i % 400 === 0 && performance.now() - started > 1000)
      options.progress?.(`planned ${i} of ${model.operations.length} actions`);
    const choice = classFor(op);
    const comments: string[] = [
      `${op.method} ${op.path}: class ${choice.class} (${choice.reason}${choice.guessed ? '; a guess: set x-candor-class in the document or edit here' : ''})`,
    ];
    if (op.name_note !== null) comments.push(op.name_note);
    const target = targetOf(op, model, override);
    // Destination: one per (origin, credential, idempotency header).
    const scheme = op.security[0];
    let credential: string | undefined;
    if (scheme !== undefined) {
      credential = scheme;
      const s = model.security_schemes[scheme];
      if (credentials[scheme] === undefined) {
        // Two schemes whose names differ only in case (`bearerAuth`, `BearerAuth`) get two refs.
        const base = `vault:${api}-${slug(scheme)}`.slice(0, 66);
        const taken = new Set(Object.values(credentials).map((c) => (c as { ref: string }).ref));
        let ref = base;
        for (let n = 2; taken.has(ref); n++) ref = `${base}-${n}`;
        credentials[scheme] = { ref };
      }
      const how =
        s?.type === 'apiKey'
          ? `an API key sent in ${s.in ?? 'header'} "${s.name ?? '?'}"`
          : s?.type === 'oauth2' || s?.type === 'openIdConnect'
            ? 'an OAuth2 access token (Bearer)'
            : s?.type === 'http'
              ? `HTTP ${s.scheme ?? ''} credentials`
              : 'a credential';
      credComments.set(
        scheme,
        `${scheme}: ${how}; store it with \`candor vault set ${api}-${slug(scheme)}\` (never in this file)`,
      );
    }
    const host = target.origin === firstOrigin ? [] : [slug(new URL(target.origin).host)];
    const destName = [
      api,
      ...host,
      ...(scheme ? [slug(scheme)] : []),
      ...(op.idempotency_header ? ['keyed'] : []),
    ]
      .join('-')
      .slice(0, 64);
    if (!Object.hasOwn(destinations, destName)) {
      destinations[destName] = {
        origin: target.origin,
        ...(credential ? { credential } : {}),
        ...(op.idempotency_header
          ? {
              idempotency: {
                header: op.idempotency_header,
                honoured: true,
                retention_ms: 86_400_000,
              },
            }
          : {}),
      };
      if (host.length)
        destComments.set(
          destName,
          `the servers of ${op.method} ${op.path} (and others on this origin)`,
        );
      if (target.origin === PLACEHOLDER_ORIGIN)
        destComments.set(
          destName,
          'TODO: the document names no absolute server: set the origin (or pass --origin)',
        );
    }
    if (op.idempotency_header)
      comments.push(
        `the document declares ${op.idempotency_header}: destination ${destName} claims it is honoured (retention 24 h is a guess); \`candor matrix run\` checks the claim`,
      );
    plans.push(planOne(model, op, choice, destName, target.prefix, options, comments));
  }
  const config = {
    version: 1,
    ledger: 'sqlite:./.candor/ledger.db',
    ...(Object.keys(credentials).length ? { vault: { key_file: './.candor/vault.key' } } : {}),
    credentials,
    destinations,
    actions: plans.map((p) => p.action),
  };
  return { yaml: render(config, plans, credComments, destComments, model), config, plans };
}

/** The read's parameter the caller-chosen id fills (get-by-id), if any. */
function lookupIdParam(l: LookupPlan): string | undefined {
  return l.id_input !== undefined ? l.read.path_params.at(-1)?.name : undefined;
}

/** Input names the gateway itself uses: a parameter or field with one is renamed. */
const RESERVED_INPUT = new Set(['operation_id']);

function planOne(
  model: ApiModel,
  op: ApiOperation,
  choice: ClassChoice,
  destination: string,
  prefix: string,
  options: InitOptions,
  comments: string[],
): ActionPlan {
  const properties: Obj = {};
  const required: string[] = [];
  const fields: ActionPlan['input_fields'] = {};
  /** The input name a parameter or field gets: its own, or `where_name` when taken. */
  const add = (
    name: string,
    schema: unknown,
    req: boolean,
    where: 'path' | 'query' | 'body',
  ): string => {
    let input = name;
    if (
      Object.hasOwn(properties, input) ||
      RESERVED_INPUT.has(input) ||
      !/^[A-Za-z_][\w]*$/.test(input)
    ) {
      input = `${where}_${name.replace(/\W+/g, '_')}`;
      for (let n = 2; Object.hasOwn(properties, input); n++)
        input = `${where}_${name.replace(/\W+/g, '_')}_${n}`;
      comments.push(
        `${where} ${where === 'body' ? 'field' : 'parameter'} "${name}" is input "${input}" (its own name is taken or not a template name); it is still sent as "${name}"`,
      );
    }
    properties[input] = schema;
    fields[input] = where;
    if (req) required.push(input);
    return input;
  };
  const template = (input: string): string => `{{input.${input}}}`;
  let path = op.path;
  const pathInputs = new Map<string, string>();
  for (const p of op.path_params) {
    const input = add(p.name, p.schema, true, 'path');
    pathInputs.set(p.name, input);
    path = path.replace(`{${p.name}}`, template(input));
  }
  const query: string[] = [];
  const skippedQuery: string[] = [];
  for (const q of op.query_params) {
    // An optional query parameter cannot be templated (a missing value would leave `x=`).
    if (q.required) {
      const input = add(q.name, q.schema, true, 'query');
      query.push(`${encodeURIComponent(q.name)}=${template(input)}`);
    } else skippedQuery.push(q.name);
  }
  if (skippedQuery.length)
    comments.push(
      `optional query parameters not exposed to the agent: ${skippedQuery.slice(0, 12).join(', ')}${skippedQuery.length > 12 ? `, … (${skippedQuery.length} in all)` : ''}`,
    );
  if (op.header_params.length)
    comments.push(`header parameters not sent: ${op.header_params.map((h) => h.name).join(', ')}`);
  const write = choice.class !== 'read';
  let found = write ? lookupFor(model, op) : 'a read needs no lookup';
  if (typeof found !== 'string') {
    const plan = found;
    const unknown = plan.read.path_params
      .map((p) => p.name)
      .filter((n) => !op.path_params.some((w) => w.name === n) && n !== lookupIdParam(plan));
    if (unknown.length)
      found = `${plan.read.name} could find the record, but needs ${unknown.join(', ')}, which this operation does not take`;
  }
  const lookup = typeof found === 'string' ? null : found;
  const { props, required: bodyRequired } = objectShape(op.body);
  const body: Obj = {};
  let bodyWhole: string | undefined;
  if (op.body !== undefined && Object.keys(props).length === 0) {
    // Not an object with properties: the agent passes the whole body.
    bodyWhole = add('body', op.body, true, 'body');
  }
  const ref = lookup?.client_ref;
  for (const [name, schema] of Object.entries(props)) {
    if (ref && !ref.under_metadata && name === ref.field) {
      body[name] = '{{operation_id}}';
      continue;
    }
    if (ref?.under_metadata && name === 'metadata') {
      body[name] = { [ref.field]: '{{operation_id}}' };
      comments.push(
        `body field "metadata" is set by Candor (metadata.${ref.field} = the operation id); the agent cannot set other metadata`,
      );
      continue;
    }
    body[name] = template(add(name, schema, bodyRequired.includes(name), 'body'));
  }
  const request: Obj = {
    method: op.method,
    path: prefix + path + (query.length ? `?${query.join('&')}` : ''),
  };
  if (bodyWhole !== undefined) request.body = template(bodyWhole);
  else if (op.body !== undefined) request.body = body;
  const input = bounded(
    {
      type: 'object',
      properties,
      ...(required.length ? { required } : {}),
      additionalProperties: false,
    },
    INPUT_SCHEMAS,
  );
  if (input.properties !== properties)
    comments.push(
      `the input schema is cut to about ${INPUT_SCHEMAS} nested schemas (what lies deeper is checked by the service, not by Candor)`,
    );
  const response = shallow(op.success.schema ?? {}, RESPONSE_DEPTH);
  const hasId = Object.hasOwn(objectShape(op.success.schema).props, 'id');
  const action: Obj = {
    name: op.name,
    openapi_operation_id: op.operation_id,
    class: choice.class,
    subject: subjectOf(op),
    description: (op.summary.trim() || op.description.trim() || `${op.method} ${op.path}`).slice(
      0,
      1000,
    ),
    destination,
    request,
    input,
    response,
    ...(write && hasId ? { remote_ref: 'id' } : {}),
  };
  if (lookup) {
    const readPrefix =
      lookup.read.server.url === op.server.url ? prefix : lookup.read.server.prefix;
    // The caller-chosen id travels under the input name its body field got.
    const idTemplate = lookup.id_input !== undefined ? body[lookup.id_input] : undefined;
    const fix = (t: string): string =>
      lookup.id_input !== undefined && typeof idTemplate === 'string'
        ? t.replaceAll(`{{input.${lookup.id_input}}}`, idTemplate)
        : t;
    // The read's other path parameters come from the write's own (`/orgs/{org}/…`).
    const lookupPath = fix(readPrefix + lookup.path).replace(/\{([^{}]+)\}/g, (m, n: string) => {
      const input = pathInputs.get(n);
      return input !== undefined ? template(input) : m;
    });
    const identify = lookup.identify
      ? Object.fromEntries(Object.entries(lookup.identify).map(([k, v]) => [k, fix(v)]))
      : undefined;
    action.reconcile = {
      method: 'GET',
      path: lookupPath,
      shape: lookup.kind,
      ...(lookup.kind === 'list' ? { items: lookup.items ?? '.' } : {}),
      ref: lookup.ref,
      ...(identify ? { identify } : {}),
      ...(lookup.created_at ? { created_at: lookup.created_at } : {}),
    };
    comments.push(`lookup (a guess): ${lookup.reason}`);
  } else if (write) {
    comments.push(
      `TODO: lookup — ${typeof found === 'string' ? found : ''}; until a \`reconcile:\` is added, an unknown outcome escalates to a person`,
    );
  }
  action.timeouts = { total_ms: options.deadline_ms };
  return {
    op,
    choice,
    lookup,
    client_ref_field: ref?.field ?? (lookup ? (lookup.id_input ?? null) : null),
    input_fields: fields,
    input,
    action,
    comments,
  };
}

/**
 * The response schema down to `depth` levels of nesting; deeper values are accepted as they come.
 * A shallower contract only ever calls fewer bodies malformed, never a good body malformed.
 */
export function shallow(schema: unknown, depth: number): JsonSchema {
  if (!isObj(schema)) return {};
  if (depth <= 0) {
    return typeof schema.type === 'string' || Array.isArray(schema.type)
      ? { type: structuredClone(schema.type) }
      : {};
  }
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === 'properties' && isObj(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([n, s]) => [n, shallow(s, depth - 1)]));
    else if ((k === 'items' || k === 'additionalProperties') && isObj(v))
      out[k] = shallow(v, depth - 1);
    else if ((k === 'allOf' || k === 'anyOf' || k === 'oneOf') && Array.isArray(v))
      out[k] = v.map((s) => shallow(s, depth));
    else if (k === 'description' || k === 'title' || k === 'default' || k === 'example') continue;
    else out[k] = structuredClone(v);
  }
  return out;
}

/** Keywords that say something to a person, kept only on the input's own properties when cut. */
const NOTES = new Set(['description', 'title', 'default', 'example', 'examples']);
/** The deepest level `bounded` keeps. */
const CUT_MAX = 6;

/** Subschemas of a schema, each one level deeper: properties, items, union branches. */
function forEachChild(schema: Obj, f: (child: unknown) => void): void {
  for (const k of ['properties', 'patternProperties']) {
    const v = schema[k];
    if (isObj(v)) for (const c of Object.values(v)) f(c);
  }
  for (const k of ['items', 'additionalProperties']) if (isObj(schema[k])) f(schema[k]);
  for (const k of ['allOf', 'anyOf', 'oneOf', 'prefixItems']) {
    const v = schema[k];
    if (Array.isArray(v)) v.forEach(f);
  }
}

/** Schemas per level, counting down to `CUT_MAX + 1` levels (`counts[0]`: the schema itself). */
function countLevels(schema: unknown, level: number, counts: number[]): void {
  if (!isObj(schema) || level > CUT_MAX) return;
  counts[level] = (counts[level] ?? 0) + 1;
  forEachChild(schema, (c) => countLevels(c, level + 1, counts));
}

/**
 * The schema down to `depth` levels (a property, an array's items and each branch of a union are
 * one level deeper): below it, only the type and enum stay; past the top level, notes go.
 */
function cut(schema: unknown, depth: number, top: boolean): JsonSchema {
  if (!isObj(schema)) return {};
  if (depth <= 0) {
    const out: JsonSchema = {};
    if (typeof schema.type === 'string' || Array.isArray(schema.type)) out.type = schema.type;
    if (Array.isArray(schema.enum)) out.enum = schema.enum;
    return out;
  }
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(schema)) {
    if (!top && NOTES.has(k)) continue;
    if ((k === 'properties' || k === 'patternProperties') && isObj(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([n, s]) => [n, cut(s, depth - 1, false)]));
    else if ((k === 'items' || k === 'additionalProperties') && isObj(v))
      out[k] = cut(v, depth - 1, false);
    else if (
      (k === 'allOf' || k === 'anyOf' || k === 'oneOf' || k === 'prefixItems') &&
      Array.isArray(v)
    )
      out[k] = v.map((s) => cut(s, depth - 1, false));
    else out[k] = v;
  }
  return out;
}

/**
 * An action's input schema within `budget` schemas (the input's parameters and body fields and
 * every schema nested in them): unchanged when it fits; otherwise cut at the deepest level that
 * fits, and never above the parameters and fields themselves, which keep their type, enum and
 * description. A looser input only lets the service, not Candor, refuse a bad nested value —
 * which the outcome then says (rejected) — while a schema of thousands of nodes (Microsoft
 * Graph's bodies) is sent to the agent with every tool list and converted for every action.
 */
function bounded(input: JsonSchema, budget: number): JsonSchema {
  const props = isObj(input.properties) ? input.properties : {};
  const counts: number[] = [];
  for (const s of Object.values(props)) countLevels(s, 0, counts);
  let total = 0;
  let depth = -1;
  for (const [level, n] of counts.entries()) {
    total += n;
    if (total > budget) break;
    depth = level;
  }
  // Every level within the budget, and nothing deeper than the count looked: unchanged.
  if (depth === counts.length - 1 && depth < CUT_MAX) return input;
  const keep = Math.max(1, depth);
  return {
    ...input,
    properties: Object.fromEntries(Object.entries(props).map(([n, s]) => [n, cut(s, keep, true)])),
  };
}

/** Longest one-line form of a schema map or list (`{ type: string }`). */
const ONE_LINE_MAX = 90;

/**
 * Leaf maps and lists of a schema read best on one line (`{ type: string }`): those whose items
 * are scalars or one-line collections of at most 3 items, within 90 characters of JSON; nesting
 * stays in block style. The memo holds each collection's JSON length, or -1 when it is not one line.
 */
function oneLine(v: Obj | unknown[], memo: WeakMap<object, number>): boolean {
  return jsonLength(v, memo) >= 0;
}

function jsonLength(v: Obj | unknown[], memo: WeakMap<object, number>): number {
  const known = memo.get(v);
  if (known !== undefined) return known;
  const entries: Array<[string | undefined, unknown]> = Array.isArray(v)
    ? v.map((x) => [undefined, x])
    : Object.entries(v);
  let length = 2 + Math.max(0, entries.length - 1);
  for (const [k, x] of entries) {
    if (k !== undefined) length += JSON.stringify(k).length + 1;
    if (typeof x === 'object' && x !== null) {
      const inner = x as Obj | unknown[];
      const n = jsonLength(inner, memo);
      const size = Array.isArray(inner) ? inner.length : Object.keys(inner).length;
      if (n < 0 || size > 3) return remember(memo, v, -1);
      length += n;
    } else length += JSON.stringify(x)?.length ?? 0;
    if (length > ONE_LINE_MAX) return remember(memo, v, -1);
  }
  return remember(memo, v, length);
}

function remember(memo: WeakMap<object, number>, v: object, n: number): number {
  memo.set(v, n);
  return n;
}

function render(
  config: Obj,
  plans: ActionPlan[],
  credComments: Map<string, string>,
  destComments: Map<string, string>,
  model: ApiModel,
): string {
  const base = model.file.split(/[\\/]/).at(-1) ?? model.file;
  const header = [
    `Generated by \`candor init --openapi ${base}\` from "${model.title}": one action per operation.`,
    'Check every comment marked "a guess" or TODO before an agent uses these tools.',
    'Credentials are vault: references; the values never go in this file.',
    'Next: candor matrix generate --openapi SPEC --config THIS_FILE --out matrix.yaml',
  ];
  const memo = new WeakMap<object, number>();
  return writeYaml(config, header, {
    flowRule: (v, path) => {
      if (path[0] !== 'actions' || path.length < 3) return false;
      const key = path[2]!;
      if (path.length === 3 && !Array.isArray(v)) {
        if (key === 'timeouts' || key === 'reconcile') return true;
        if (key === 'request')
          return Object.values(v).every((x) => typeof x !== 'object' || x === null);
      }
      return (key === 'input' || key === 'response') && oneLine(v, memo);
    },
    commentOf: (path) => {
      if (path.length !== 2) return undefined;
      const [section, name] = path as [string, string];
      if (section === 'credentials') return lines(credComments.get(name));
      if (section === 'destinations') return lines(destComments.get(name));
      if (section === 'actions') return plans[Number(name)]?.comments;
      return undefined;
    },
  });
}

const lines = (c: string | undefined): string[] | undefined => (c === undefined ? undefined : [c]);
