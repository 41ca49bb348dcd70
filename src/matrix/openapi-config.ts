// `candor init --openapi SPEC`: a gateway configuration (candor.yaml) with one action per operation
// of an OpenAPI document. What the document says is copied (input from parameters and body, the
// success response, a declared idempotency header, security schemes as vault: references); what
// Candor has to guess (the action class from the method and wording, the key's retention) is marked
// as a guess in a comment; what the document cannot tell (a lookup for a write that no list
// operation can find) is a `# TODO: lookup`, and until then the action's unknown outcomes escalate.
import { Document, isMap, isScalar, isSeq } from 'yaml';
import {
  objectShapeOf,
  type ApiModel,
  type ApiOperation,
  type JsonSchema,
} from '../fakes/openapi-doc.js';
import { ActionClass, valuesOf } from '../core/vocabulary.js';

type Obj = Record<string, unknown>;
const CLASSES: readonly string[] = valuesOf(ActionClass);

/** Body fields that carry the caller's own reference; a list filtering by one can find a record. */
export const CLIENT_REF_FIELDS = [
  'client_ref',
  'clientRef',
  'client_reference',
  'clientReference',
  'external_id',
  'externalId',
  'request_id',
  'requestId',
] as const;

export interface InitOptions {
  /** The client deadline written into every action (`timeouts.total_ms`). */
  deadline_ms: number;
  /** Overrides the document's server (origin and path prefix). */
  origin?: string;
}

export interface ClassChoice {
  class: string;
  /** Why: `declared` (x-candor-class) or the guess's reason. */
  reason: string;
  guessed: boolean;
}

const WORDS: ReadonlyArray<[RegExp, string]> = [
  [/\b(delete|remove|cancel|purge|destroy)\b/i, 'destructive'],
  [/\b(permissions?|roles?|grant|revoke|acl|access)\b/i, 'permission_change'],
  [/\b(password|credentials?|secret|api ?key|rotate)\b/i, 'credential_change'],
  [/\b(pay|payment|charge|refund|transfer|purchase|order|invoice|checkout)\b/i, 'financial'],
  [/\b(notify|notification|send|email|sms|alert)\b/i, 'notify'],
  [/\b(run|exec|execute|command|restart|reboot)\b/i, 'execute'],
];

/** `x-candor-class` wins; otherwise the method and the operation's own wording decide (a guess). */
export function classFor(op: ApiOperation): ClassChoice {
  if (op.declared_class !== undefined)
    return { class: op.declared_class, reason: 'declared by x-candor-class', guessed: false };
  if (op.method === 'GET') return { class: 'read', reason: 'guessed from GET', guessed: true };
  const text = `${op.summary} ${op.description} ${op.operation_id.replace(/([a-z])([A-Z])/g, '$1 $2')}`;
  for (const [re, cls] of WORDS) {
    const m = re.exec(text);
    if (m) return { class: cls, reason: `guessed from the word "${m[0]}"`, guessed: true };
  }
  const byMethod: Record<string, string> = {
    POST: op.on_item ? 'append' : 'create',
    PUT: 'set_state',
    PATCH: 'set_state',
    DELETE: 'destructive',
  };
  return {
    class: byMethod[op.method] ?? 'execute',
    reason: `guessed from ${op.method}`,
    guessed: true,
  };
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

/** The list operation that finds records of a collection by a client-reference query field. */
export function lookupFor(
  model: ApiModel,
  op: ApiOperation,
): { list: ApiOperation; field: string; items: string } | null {
  if (op.method === 'GET' || op.body === undefined) return null;
  const { props } = objectShape(op.body);
  const field = CLIENT_REF_FIELDS.find((f) => Object.hasOwn(props, f));
  if (field === undefined) return null;
  const collection = op.on_item ? op.collection : op.path;
  for (const list of model.operations) {
    if (list.method !== 'GET' || list.on_item || list.collection !== collection) continue;
    if (!list.query_params.some((q) => q.name === field)) continue;
    const s = list.success.schema;
    if (isObj(s) && s.type === 'array') return { list, field, items: '.' };
    const arrayProp = Object.entries(objectShape(s).props).find(
      ([, p]) => isObj(p) && p.type === 'array',
    );
    if (arrayProp) return { list, field, items: arrayProp[0] };
  }
  return null;
}

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
  plans: ActionPlan[];
}

export function planActions(model: ApiModel, options: InitOptions): InitResult {
  const base = new URL(options.origin ?? model.server ?? 'http://127.0.0.1:8080');
  const origin = base.origin;
  const prefix = base.pathname.replace(/\/+$/, '');
  const api = slug(
    (model.file.split(/[\\/]/).at(-1) ?? model.title).replace(/\.(ya?ml|json)$/i, ''),
  );
  const credentials: Obj = {};
  const destinations: Obj = {};
  const credComments = new Map<string, string>();
  const plans: ActionPlan[] = [];
  for (const op of model.operations) {
    const choice = classFor(op);
    const comments: string[] = [
      `${op.method} ${op.path}: class ${choice.class} (${choice.reason}${choice.guessed ? '; a guess: set x-candor-class in the document or edit here' : ''})`,
    ];
    // Destination: one per (credential, idempotency header) pair, all on the same origin.
    const scheme = op.security[0];
    let credential: string | undefined;
    if (scheme !== undefined) {
      credential = scheme;
      const s = model.security_schemes[scheme];
      credentials[scheme] = { ref: `vault:${api}-${slug(scheme)}`.slice(0, 70) };
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
    const destName = [
      api,
      ...(scheme ? [slug(scheme)] : []),
      ...(op.idempotency_header ? ['keyed'] : []),
    ]
      .join('-')
      .slice(0, 64);
    if (!Object.hasOwn(destinations, destName)) {
      destinations[destName] = {
        origin,
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
    }
    if (op.idempotency_header)
      comments.push(
        `the document declares ${op.idempotency_header}: destination ${destName} claims it is honoured (retention 24 h is a guess); \`candor matrix run\` checks the claim`,
      );
    plans.push(planOne(model, op, choice, destName, prefix, options, comments));
  }
  const config = {
    version: 1,
    ledger: 'sqlite:./.candor/ledger.db',
    ...(Object.keys(credentials).length ? { vault: { key_file: './.candor/vault.key' } } : {}),
    credentials,
    destinations,
    actions: plans.map((p) => p.action),
  };
  return { yaml: render(config, plans, credComments, model), plans };
}

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
  const add = (name: string, schema: unknown, req: boolean, where: 'path' | 'query' | 'body') => {
    if (Object.hasOwn(properties, name) || name === 'operation_id') return false;
    properties[name] = schema;
    fields[name] = where;
    if (req) required.push(name);
    return true;
  };
  for (const p of op.path_params) add(p.name, p.schema, true, 'path');
  const query: string[] = [];
  const skippedQuery: string[] = [];
  for (const q of op.query_params) {
    // An optional query parameter cannot be templated (a missing value would leave `x=`).
    if (q.required && add(q.name, q.schema, true, 'query')) query.push(q.name);
    else skippedQuery.push(q.name);
  }
  if (skippedQuery.length)
    comments.push(`optional query parameters not exposed to the agent: ${skippedQuery.join(', ')}`);
  if (op.header_params.length)
    comments.push(`header parameters not sent: ${op.header_params.map((h) => h.name).join(', ')}`);
  const found = lookupFor(model, op);
  const { props, required: bodyRequired } = objectShape(op.body);
  const body: Obj = {};
  let bodyWhole = false;
  if (op.body !== undefined && Object.keys(props).length === 0) {
    // Not an object with properties: the agent passes the whole body.
    add('body', op.body, true, 'body');
    bodyWhole = true;
  }
  for (const [name, schema] of Object.entries(props)) {
    if (found && name === found.field) {
      body[name] = '{{operation_id}}';
      continue;
    }
    if (add(name, schema, bodyRequired.includes(name), 'body')) body[name] = `{{input.${name}}}`;
    else comments.push(`body field "${name}" clashes with a parameter and is not sent`);
  }
  const path =
    prefix +
    op.path.replace(/\{([^}]+)\}/g, (_, n: string) => `{{input.${n}}}`) +
    (query.length ? `?${query.map((q) => `${q}={{input.${q}}}`).join('&')}` : '');
  const request: Obj = { method: op.method, path };
  if (bodyWhole) request.body = '{{input.body}}';
  else if (op.body !== undefined) request.body = body;
  const input: JsonSchema = {
    type: 'object',
    properties,
    ...(required.length ? { required } : {}),
    additionalProperties: false,
  };
  const response = op.success.schema ?? {};
  const write = choice.class !== 'read';
  const hasId = Object.hasOwn(objectShape(response).props, 'id');
  const action: Obj = {
    name: op.name,
    class: choice.class,
    subject: subjectOf(op),
    description: (op.summary || op.description || `${op.method} ${op.path}`).trim(),
    destination,
    request,
    input,
    response,
    ...(write && hasId ? { remote_ref: 'id' } : {}),
  };
  if (write && found) {
    action.reconcile = {
      method: 'GET',
      path: `${prefix}${found.list.path}?${found.field}={{operation_id}}`,
      items: found.items,
      ref: 'id',
    };
    comments.push(
      `lookup: ${found.list.name} finds the record by ${found.field} (set to the operation id on every request)`,
    );
  } else if (write) {
    comments.push(
      'TODO: lookup — no list operation finds this record by a client reference; until a `reconcile:` is added, an unknown outcome escalates to a person',
    );
  }
  action.timeouts = { total_ms: options.deadline_ms };
  return {
    op,
    choice,
    client_ref_field: found?.field ?? null,
    input_fields: fields,
    input,
    action,
    comments,
  };
}

/** Leaf maps and lists of scalars read best on one line; nesting stays in block style. */
function compact(node: unknown): void {
  if (isMap(node) || isSeq(node)) {
    const items = isMap(node) ? node.items.map((p) => p.value) : node.items;
    items.forEach(compact);
    node.flow = items.every(
      (v) => isScalar(v) || ((isMap(v) || isSeq(v)) && v.flow === true && v.items.length <= 3),
    );
    if (node.flow && JSON.stringify(node.toJSON()).length > 90) node.flow = false;
  }
}

function render(
  config: Obj,
  plans: ActionPlan[],
  credComments: Map<string, string>,
  model: ApiModel,
): string {
  const doc = new Document(config, { aliasDuplicateObjects: false });
  const base = model.file.split(/[\\/]/).at(-1) ?? model.file;
  doc.commentBefore = [
    ` Generated by \`candor init --openapi ${base}\` from "${model.title}": one action per operation.`,
    ' Check every comment marked "a guess" or TODO before an agent uses these tools.',
    ' Credentials are vault: references; the values never go in this file.',
    ' Next: candor matrix generate --openapi SPEC --config THIS_FILE --out matrix.yaml',
  ].join('\n');
  const creds = doc.get('credentials', true);
  if (isMap(creds))
    for (const pair of creds.items) {
      const name = isScalar(pair.key) ? String(pair.key.value) : '';
      const c = credComments.get(name);
      if (c !== undefined && isScalar(pair.key)) pair.key.commentBefore = ` ${c}`;
    }
  const actions = doc.get('actions', true);
  if (isSeq(actions))
    actions.items.forEach((item, i) => {
      const plan = plans[i];
      if (!plan || !isMap(item)) return;
      item.commentBefore = plan.comments.map((c) => ` ${c}`).join('\n');
      for (const pair of item.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : '';
        if (['request', 'timeouts', 'reconcile'].includes(key) && isMap(pair.value)) {
          const v = pair.value;
          v.flow = v.items.every((p) => isScalar(p.value) || key !== 'request');
        }
        if (['input', 'response'].includes(key)) compact(pair.value);
      }
    });
  return doc.toString({ lineWidth: 100 });
}
