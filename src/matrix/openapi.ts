// The matrix generator: an OpenAPI 3.0/3.1 document in, a failure matrix out (`candor matrix
// generate --openapi SPEC`). Every operation gets authentication, authorisation and malformed-response
// rows; mutating operations also get every timeout phase. Expectations follow Candor's own rules for
// each operation's declared contract (classify() on the evidence each condition produces), so the
// output is a starting point a person edits — remote-state expectations are marked TODO.
import type { z } from 'zod';
import { Document, isMap, isScalar, isSeq, LineCounter, parseDocument } from 'yaml';
import type { Node, YAMLMap } from 'yaml';
import { nextActionFor } from '../agent/scripted.js';
import { classify, type Classification } from '../core/classify.js';
import type { Envelope } from '../core/envelope.js';
import type { Evidence, ResolvedContract } from '../core/evidence.js';
import { retryOf } from '../core/rule-table.js';
import { ActionClass, valuesOf } from '../core/vocabulary.js';
import {
  actionName,
  HTTP_METHODS,
  snakeCase,
  uniqueName,
  type ActionName,
} from '../fakes/openapi-doc.js';
import type { matrixSchema, rowSchema } from './spec.js';

export type GeneratedMatrix = z.input<typeof matrixSchema>;
type Row = z.input<typeof rowSchema>;
type Obj = Record<string, unknown>;

export interface SpecOperation {
  /** The action name (operationId in snake_case, shortened or made up as init does): the row's `operation`. */
  operation: string;
  /** operationId as written, or the name made from method and path when there is none. */
  operation_id: string;
  /** Why `operation` is not simply the operationId in snake_case (null: it is). */
  name_note: string | null;
  method: string;
  path: string;
  contract: ResolvedContract;
  /** Resource kind (last fixed path segment before the first parameter) and child collection. */
  kind: string;
  child: string | null;
  /** Whether the operation acts on an existing resource (a path parameter names it). */
  on_resource: boolean;
  input: Obj;
  /** For set_state: the field the operation changes, its new and its previous value. */
  changes: { field: string; to: unknown; from: unknown } | null;
  /** A field the success response must carry (`id` when it is required): the missing-field row. */
  required_field: string;
  /** The success answer has no body (204, or a 2xx without content): no body rows. */
  no_body: boolean;
}

export type GenerateResult =
  | {
      ok: true;
      value: { matrix: GeneratedMatrix; yaml: string; operations: SpecOperation[] };
      failure?: never;
    }
  | { ok: false; failure: { code: 'invalid_spec'; message: string }; value?: never };

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
const CLASS_BY_METHOD: Readonly<Record<string, ActionClass>> = {
  POST: 'create',
  PUT: 'set_state',
  PATCH: 'set_state',
  DELETE: 'destructive',
};
const CLASSES = valuesOf(ActionClass);

class SpecError extends Error {}
type Deref = (value: unknown, where: string) => unknown;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export { snakeCase };

export function generateMatrixFromOpenApi(text: string, file: string): GenerateResult {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  if (doc.errors.length) {
    const err = doc.errors[0]!;
    const pos = lines.linePos(err.pos[0]);
    const message = `${file}:${pos.line}:${pos.col}: ${err.message.split('\n')[0] ?? ''}`;
    return { ok: false, failure: { code: 'invalid_spec', message } };
  }
  try {
    const operations = readOperations(doc.toJS() as unknown);
    const matrix = matrixFor(operations, file);
    return { ok: true, value: { matrix, yaml: render(matrix, operations, file), operations } };
  } catch (e) {
    if (!(e instanceof SpecError)) throw e;
    return { ok: false, failure: { code: 'invalid_spec', message: `${file}: ${e.message}` } };
  }
}

// ---- reading the spec -------------------------------------------------------------------------

function readOperations(root: unknown): SpecOperation[] {
  if (!isObj(root)) throw new SpecError('(root): expected an OpenAPI document (a mapping)');
  const version = root.openapi;
  if (version === undefined)
    throw new SpecError(
      `openapi: missing${root.swagger !== undefined ? ' (Swagger 2.0 is not supported)' : ''}`,
    );
  if (typeof version !== 'string' || !/^3\.[01]\./.test(version))
    throw new SpecError(`openapi: expected 3.0.x or 3.1.x, got ${JSON.stringify(version)}`);
  if (!isObj(root.paths)) throw new SpecError('paths: missing or not a mapping');
  const deref: Deref = (v, where) => resolveRef(root, v, where);
  const found: Array<{ op: Obj; method: string; path: string; where: string; params: Obj[] }> = [];
  for (const [path, item] of Object.entries(root.paths)) {
    const where = `paths.${path}`;
    if (!path.startsWith('/')) throw new SpecError(`${where}: a path must start with "/"`);
    if (!isObj(item)) throw new SpecError(`${where}: expected a path item (a mapping)`);
    if (item.$ref !== undefined)
      throw new SpecError(`${where}.$ref: path item references are not supported`);
    const shared = paramsOf(item.parameters, `${where}.parameters`, deref);
    for (const m of METHODS) {
      const op = item[m];
      if (op === undefined) continue;
      const w = `${where}.${m}`;
      if (!isObj(op)) throw new SpecError(`${w}: expected an operation (a mapping)`);
      const own = paramsOf(op.parameters, `${w}.parameters`, deref);
      // Operation parameters override path-item ones with the same name and location.
      const key = (p: Obj): string => `${String(p.in)}:${String(p.name).toLowerCase()}`;
      const merged = new Map([...shared, ...own].map((p) => [key(p), p]));
      found.push({ op, method: m.toUpperCase(), path, where: w, params: [...merged.values()] });
    }
  }
  if (found.length === 0) throw new SpecError('paths: no operations');
  const named = namesOf(found);
  const ids = new Set(found.map((f) => f.op.operationId).filter((id) => typeof id === 'string'));
  return found.map((f, i) => operationOf(f, named[i]!, ids, deref));
}

/**
 * Action names as `candor init --openapi` gives them (fakes/openapi-doc.ts): long operationIds
 * shortened deterministically, a missing one named from method and path, a clash renamed in the
 * same order as init (path order, then GET, POST, PUT, PATCH, DELETE, then the methods init leaves
 * out), so that the rows name the actions init wrote.
 */
function namesOf(
  found: Array<{ op: Obj; method: string; path: string; where: string }>,
): ActionName[] {
  const rank = (m: string): number => {
    const i = (HTTP_METHODS as readonly string[]).indexOf(m);
    return i >= 0
      ? i
      : HTTP_METHODS.length + METHODS.indexOf(m.toLowerCase() as (typeof METHODS)[number]);
  };
  const pathOrder = new Map<string, number>();
  for (const f of found) if (!pathOrder.has(f.path)) pathOrder.set(f.path, pathOrder.size);
  const order = found
    .map((f, i) => i)
    .sort(
      (a, b) =>
        pathOrder.get(found[a]!.path)! - pathOrder.get(found[b]!.path)! ||
        rank(found[a]!.method) - rank(found[b]!.method),
    );
  const out: ActionName[] = [];
  const taken = new Map<string, { method: string; path: string }>();
  for (const i of order) {
    const f = found[i]!;
    const id: unknown = f.op.operationId;
    if (id !== undefined && typeof id !== 'string')
      throw new SpecError(`${f.where}.operationId: expected a string, got ${JSON.stringify(id)}`);
    let given = actionName(f.method, f.path, id);
    const clash = taken.get(given.name);
    if (clash !== undefined) given = uniqueName(given, f.method, f.path, clash);
    taken.set(given.name, f);
    out[i] = given;
  }
  return out;
}

function resolveRef(root: Obj, value: unknown, where: string, depth = 0): unknown {
  if (!isObj(value) || typeof value.$ref !== 'string') return value;
  const ref = value.$ref;
  if (!ref.startsWith('#/'))
    throw new SpecError(
      `${where}.$ref: only references inside the document are supported, got "${ref}"`,
    );
  if (depth > 16) throw new SpecError(`${where}.$ref: reference cycle at "${ref}"`);
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const seg = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    node = isObj(node) ? node[seg] : undefined;
  }
  if (node === undefined) throw new SpecError(`${where}.$ref: "${ref}" points nowhere`);
  return resolveRef(root, node, where, depth + 1);
}

function paramsOf(list: unknown, where: string, deref: Deref): Obj[] {
  if (list === undefined) return [];
  if (!Array.isArray(list)) throw new SpecError(`${where}: expected a list`);
  return list.map((raw, i) => {
    const p = deref(raw, `${where}.${i}`);
    if (!isObj(p) || typeof p.name !== 'string' || typeof p.in !== 'string')
      throw new SpecError(`${where}.${i}: a parameter needs "name" and "in"`);
    return p;
  });
}

function operationOf(
  f: { op: Obj; method: string; path: string; where: string; params: Obj[] },
  named: ActionName,
  ids: Set<unknown>,
  deref: Deref,
): SpecOperation {
  const declared = f.op['x-candor-action-class'];
  if (declared !== undefined && !CLASSES.includes(declared as ActionClass))
    throw new SpecError(
      `${f.where}.x-candor-action-class: expected one of ${CLASSES.join(', ')}, got ${JSON.stringify(declared)}`,
    );
  const actionClass = (declared as ActionClass | undefined) ?? CLASS_BY_METHOD[f.method] ?? 'read';
  const lookup = f.op['x-candor-lookup'];
  if (lookup !== undefined) {
    const target = isObj(lookup) ? (lookup.operationId ?? lookup.path) : lookup;
    if (typeof target !== 'string')
      throw new SpecError(
        `${f.where}.x-candor-lookup: expected an operationId, {operationId, match} or {path}`,
      );
    if (
      isObj(lookup) && lookup.operationId === undefined ? !target.startsWith('/') : !ids.has(target)
    )
      throw new SpecError(`${f.where}.x-candor-lookup: names no operation or path "${target}"`);
  }
  const honoured = f.params.some(
    (p) => p.in === 'header' && String(p.name).toLowerCase() === 'idempotency-key',
  );
  const segments = f.path.split('/').filter((s) => s !== '');
  const isParam = (s: string): boolean => s.startsWith('{');
  const firstParam = segments.findIndex(isParam);
  const fixed = (list: string[]): string[] => list.filter((s) => !isParam(s) && !/^v\d+$/.test(s));
  const before = fixed(firstParam < 0 ? segments : segments.slice(0, firstParam));
  const after = firstParam < 0 ? [] : fixed(segments.slice(firstParam + 1));
  const pathParams = segments.filter(isParam).map((s) => s.slice(1, -1));
  const onResource = pathParams.length > 0;
  const input: Obj = {};
  // The last path parameter names the resource the row's `setup` creates; others need a value.
  pathParams.forEach(
    (p, i) => (input[p] = i === pathParams.length - 1 ? '{{setup.id}}' : `TODO-${p}`),
  );
  for (const p of f.params)
    if (p.in === 'query' && p.required === true)
      input[String(p.name)] = sample(deref(p.schema, f.where), p.example);
  const { fields, props } = bodyFields(f.op.requestBody, `${f.where}.requestBody`, deref);
  Object.assign(input, fields);
  const field = Object.keys(fields)[0];
  const changes =
    actionClass === 'set_state' && onResource && field !== undefined
      ? { field, to: fields[field], from: previous(fields[field], props[field], field) }
      : null;
  return {
    operation: named.name,
    operation_id: named.operation_id,
    name_note: named.note,
    method: f.method,
    path: f.path,
    contract: {
      action_class: actionClass,
      idempotency_honoured: honoured,
      reconciliation: lookup !== undefined,
      five_xx: 'unknown',
      default_retry_after_ms: 1000,
    },
    kind: before.at(-1) ?? after.at(-1) ?? 'resources',
    child: onResource ? (after.at(-1) ?? null) : null,
    on_resource: onResource,
    input,
    changes,
    required_field: requiredField(f.op.responses, `${f.where}.responses`, deref),
    no_body: noBody(f.op.responses),
  };
}

/** The first documented 2xx is 204 No Content (a 2xx without documented content may still have one). */
function noBody(raw: unknown): boolean {
  const responses = isObj(raw) ? raw : {};
  return Object.keys(responses).find((k) => /^2(\d\d|XX)$/i.test(k)) === '204';
}

/** Rows about a response body: they need one (a 204 has nothing to cut or break). */
export const isBodyCase = (suffix: string): boolean =>
  suffix.startsWith('body-cut-') || suffix === 'invalid-json' || suffix.startsWith('missing-');

/** Placeholder input from the JSON request body: required properties, or all when none are. */
function bodyFields(raw: unknown, where: string, deref: Deref): { fields: Obj; props: Obj } {
  const schema = jsonSchemaOf(raw, where, deref);
  if (!isObj(schema) || !isObj(schema.properties)) return { fields: {}, props: {} };
  const required = Array.isArray(schema.required) ? schema.required.map(String) : [];
  const names = required.length > 0 ? required : Object.keys(schema.properties).slice(0, 6);
  const props = Object.fromEntries(
    names.map((n) => [n, deref((schema.properties as Obj)[n], `${where}.content`)]),
  );
  return {
    fields: Object.fromEntries(names.map((n) => [n, uniqueOr(n, props[n], sample(props[n]))])),
    props,
  };
}

/**
 * Field names of the value a client chooses to identify the record it sends: its own id, not a
 * reference to another record (`petId`, `order_id` must name records that exist).
 */
export const CLIENT_ID =
  /^(id|uuid|key|ref|slug|code|username|external_id|externalId|client_ref|clientRef)$/;

/**
 * A client-chosen string id without an example gets a value unique to the row and the run
 * (`{{correlation_id}}` is filled when the row runs): with one sample id for every row, a lookup by
 * id finds the records of other rows. Only where the schema leaves the text free.
 */
function uniqueOr(name: string, schemaRaw: unknown, sampled: unknown): unknown {
  const s = isObj(schemaRaw) ? schemaRaw : {};
  const free = !['enum', 'const', 'format', 'pattern', 'example', 'examples', 'default'].some(
    (k) => s[k] !== undefined,
  );
  const fits = typeof s.maxLength !== 'number' || s.maxLength >= name.length + 72;
  return CLIENT_ID.test(name) && s.type === 'string' && free && fits
    ? `${name}-{{correlation_id}}`
    : sampled;
}

/**
 * `id` when the first 2xx JSON response requires it, else its first required property. For a list
 * (`{ items: [...] }`) the fake drops the field from the first item, so the item schema decides.
 */
function requiredField(raw: unknown, where: string, deref: Deref): string {
  const responses = isObj(raw) ? raw : {};
  const code = Object.keys(responses).find((k) => /^2(\d\d|XX)$/i.test(k));
  let schema = code === undefined ? undefined : jsonSchemaOf(responses[code], where, deref);
  const items =
    isObj(schema) && isObj(schema.properties) ? deref(schema.properties.items, where) : undefined;
  if (isObj(items) && items.type === 'array') schema = deref(items.items, where);
  const required =
    isObj(schema) && Array.isArray(schema.required) ? schema.required.map(String) : [];
  return required.includes('id') ? 'id' : (required[0] ?? 'id');
}

function jsonSchemaOf(raw: unknown, where: string, deref: Deref): unknown {
  const holder = deref(raw, where);
  const content = isObj(holder) && isObj(holder.content) ? holder.content : {};
  const media = Object.entries(content).find(([t]) => /json/i.test(t))?.[1];
  return isObj(media) ? deref(media.schema, `${where}.content`) : undefined;
}

const PLACEHOLDER: Readonly<Record<string, unknown>> = { integer: 1, number: 1, boolean: true };

function sample(schemaRaw: unknown, example?: unknown): unknown {
  const s = isObj(schemaRaw) ? schemaRaw : {};
  const examples: unknown[] = Array.isArray(s.examples) ? s.examples : [];
  const choices: unknown[] = Array.isArray(s.enum) ? s.enum : [];
  const value = example ?? s.example ?? examples[0] ?? s.default ?? choices[0];
  if (value !== undefined) return value;
  const type: unknown = Array.isArray(s.type) ? (s.type as unknown[])[0] : s.type;
  if (type === 'array') return [];
  if (type === 'object') return {};
  return PLACEHOLDER[String(type)] ?? 'example';
}

/** A value different from the new one, for the resource the row sets up before a set_state call. */
function previous(to: unknown, prop: unknown, field: string): unknown {
  const choices: unknown[] = isObj(prop) && Array.isArray(prop.enum) ? prop.enum : [];
  const other = choices.find((v) => v !== to);
  if (other !== undefined) return other;
  if (typeof to === 'number') return to + 1;
  if (typeof to === 'boolean') return !to;
  return `previous-${typeof to === 'string' ? to : field}`;
}

// ---- conditions and expectations ----------------------------------------------------------------

export interface ConditionCase {
  suffix: string;
  title: string;
  condition: Obj;
  /** What the transport observes under this condition. */
  evidence: Evidence;
  /** The fake's ground truth: whether a write is committed before the fault. */
  commits: boolean;
}

export const when = (
  suffix: string,
  title: string,
  condition: Obj,
  evidence: Evidence,
  commits: boolean,
): ConditionCase => ({ suffix, title, condition, evidence, commits });
export const sent = (local_error: Evidence['local_error']): Evidence => ({
  phase: 'request_sent',
  local_error,
});
const cut = (action: 'fin' | 'rst'): ConditionCase =>
  when(
    `body-cut-${action}`,
    `response body cut by ${action.toUpperCase()} at byte 5`,
    { phase: 'during_response_body', action, at_byte: 5 },
    {
      phase: 'response_cut',
      status: 200,
      local_error: `connection_${action === 'fin' ? 'closed' : 'reset'}`,
    },
    true,
  );
const answer = (status: number, extra: Partial<Evidence> = {}): Evidence => ({
  phase: 'response_complete',
  status,
  ...extra,
});
const violated = (suffix: string, title: string, fault: Obj): ConditionCase =>
  when(
    suffix,
    title,
    { phase: 'malformed', ...fault },
    answer(200, { contract_check: 'violated' }),
    true,
  );

/** Every timeout phase: only for mutating operations (a read is simply read again). */
export const PHASE_CASES: readonly ConditionCase[] = [
  when(
    'before-bytes',
    'connection refused before any byte left',
    { before_bytes: 'refused' },
    { phase: 'not_sent', local_error: 'connect_refused' },
    false,
  ),
  when(
    'after-headers-rst',
    'RST after the request headers',
    { phase: 'after_request_headers', action: 'rst' },
    sent('connection_reset'),
    false,
  ),
  when(
    'after-body-fin',
    'FIN after the request body, before the commit',
    { phase: 'after_request_body', action: 'fin' },
    sent('connection_closed'),
    false,
  ),
  when(
    'after-commit-delay',
    'committed, reply delayed past the client deadline',
    { phase: 'after_commit', action: 'delay', delay_ms: 2600 },
    sent('deadline'),
    true,
  ),
  cut('fin'),
  cut('rst'),
];

const EXPIRED = { 'www-authenticate': 'Bearer error="invalid_token"' };

/** For every operation: authentication, authorisation and responses that break the contract. */
export const commonCases = (op: SpecOperation): ConditionCase[] => [
  when(
    'expired-token',
    '401 with WWW-Authenticate',
    { phase: 'status', status: 401, headers: EXPIRED, body: { error: 'token_expired' } },
    answer(401, { www_authenticate: true }),
    false,
  ),
  when(
    'denied',
    '403 forbidden',
    { phase: 'status', status: 403, body: { error: 'forbidden' } },
    answer(403),
    false,
  ),
  violated('invalid-json', 'invalid JSON body', { variant: 'invalid_json' }),
  violated(
    `missing-${op.required_field.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`,
    `response without its ${op.required_field}`,
    { variant: 'missing_field', field: op.required_field },
  ),
  violated('html-200', 'HTML error page with a 200 status', { variant: 'html_error', status: 200 }),
];

const NORMAL_ANSWER = answer(200, { contract_check: 'valid' });
const REASON_LOOKUP_NONE =
  'the lookup found no record, but without an honoured idempotency key a late commit cannot be ruled out: a person decides';
const REASON_NO_LOOKUP =
  'the action has neither a lookup nor an honoured idempotency key, so only a person can establish the remote state';

export interface Expectation {
  c: Classification;
  next: ReturnType<typeof nextActionFor>;
  final: { category: Classification['category']; retry?: Classification['retry'] } | undefined;
  unknownReason: string | undefined;
  /** Whether the write ends up applied (once) after the engine and the scripted agent are done. */
  committed: boolean;
}

/** What Candor's rules say a row under `cc` ends with, for an action with contract `ctr`. */
export function expectationFor(ctr: ResolvedContract, cc: ConditionCase): Expectation {
  const write = ctr.action_class !== 'read';
  let c: Classification = classify(cc.evidence, ctr);
  let committed = write && cc.commits;
  // The engine repeats on its own what the contract licenses (a read, or an honoured key); the
  // fault fires once, so the repeat gets the normal answer (a replay, for an honoured key).
  if (c.category === 'outcome_unknown' && c.retry === 'allowed') {
    c = classify(NORMAL_ANSWER, ctr);
    committed = write;
  }
  // The scripted agent's policy reads only `ok` and `retry` from the envelope.
  const next = nextActionFor({ ok: c.category === 'succeeded', retry: c.retry } as Envelope);
  let final: Expectation['final'];
  let unknownReason: string | undefined;
  if (next === 'retry_same_operation') {
    final = { category: c.category }; // only not-sent failures get here: the origin stays unreachable
  } else if (next === 'reconcile') {
    if (committed)
      final = { category: classify({ ...NORMAL_ANSWER, reconciliation_matches: 1 }, ctr).category };
    else if (ctr.idempotency_honoured) [final, committed] = [{ category: 'succeeded' }, true];
    else
      [final, unknownReason] = [
        // A lookup that found nothing, with no key to retry under: a person decides.
        { category: 'outcome_unknown', retry: retryOf('looked_up_in_vain') },
        REASON_LOOKUP_NONE,
      ];
  } else if (c.remote_effect === 'unknown') {
    unknownReason = REASON_NO_LOOKUP;
  }
  return { c, next, final, unknownReason, committed };
}

export function rowFor(op: SpecOperation, cc: ConditionCase): Row {
  const ctr = op.contract;
  const write = ctr.action_class !== 'read';
  const { c, next, final, unknownReason, committed } = expectationFor(ctr, cc);
  return {
    id: `${op.operation.replace(/_/g, '-')}-${cc.suffix}`,
    title: `${op.operation} + ${cc.title}`,
    operation: op.operation,
    input: structuredClone(op.input),
    // A read also gets a record to read, so that a list is not empty and its items can be broken.
    ...(op.on_resource || !write
      ? {
          setup: {
            kind: op.kind,
            fields: op.changes ? { [op.changes.field]: op.changes.from } : {},
          },
        }
      : {}),
    condition: structuredClone(cc.condition) as Row['condition'],
    remote_effect_known: c.remote_effect === 'none' || c.category === 'succeeded',
    expect: {
      category: c.category,
      retry: c.retry,
      remote_effect: c.remote_effect,
      next_action: next,
      ...(final ? { final } : {}),
      remote: remoteFor(op, committed),
      ...(unknownReason !== undefined ? { unknown_reason: unknownReason } : {}),
      secret_in_result: false,
    },
  };
}

function remoteFor(op: SpecOperation, committed: boolean): Row['expect']['remote'] {
  const n = committed ? 1 : 0;
  if (op.contract.action_class === 'read') return { kind: op.kind, count: 0 };
  if (op.changes)
    return {
      kind: op.kind,
      setup_field: op.changes.field,
      equals: committed ? op.changes.to : op.changes.from,
    };
  if (op.on_resource && op.contract.action_class === 'destructive')
    return { kind: op.kind, setup_deleted: committed };
  if (op.on_resource && op.child !== null)
    return { kind: op.kind, child: op.child, child_count: n };
  return { kind: op.kind, count: n };
}

function matrixFor(ops: SpecOperation[], file: string): GeneratedMatrix {
  const rows = ops.flatMap((op) =>
    [...(op.contract.action_class === 'read' ? [] : PHASE_CASES), ...commonCases(op)]
      .filter((cc) => !(op.no_body && isBodyCase(cc.suffix)))
      .map((cc) => rowFor(op, cc)),
  );
  const base = file.split(/[\\/]/).at(-1) ?? file;
  return {
    matrix: snakeCase(base.replace(/\.(ya?ml|json)$/i, '')).replace(/_/g, '-') || 'generated',
    description: `Generated from ${base} by candor matrix generate; ready to edit. Remote-state expectations marked TODO are guesses.`,
    seed: 1,
    rows,
  };
}

// ---- rendering --------------------------------------------------------------------------------

function render(matrix: GeneratedMatrix, ops: SpecOperation[], file: string): string {
  const doc = new Document(matrix, { aliasDuplicateObjects: false });
  const base = file.split(/[\\/]/).at(-1) ?? file;
  doc.commentBefore = [
    ` Generated by \`candor matrix generate --openapi ${base}\` — ready to edit.`,
    ' Each row = operation x injected condition x "remote effect known?" x expectations (`candor schema matrix`).',
    " Expectations follow Candor's rules for each operation's declared contract: x-candor-action-class (or the",
    ' method), an Idempotency-Key header parameter (honoured key) and x-candor-lookup (reconciliation).',
    ' TODO: `operation` must name an action the runner knows; inputs are placeholders from the spec;',
    '   after-commit rows assume a client deadline below 2600 ms (the reference actions wait 2000 ms); every `remote` block is a guess (TODO).',
  ].join('\n');
  const byName = new Map(ops.map((o) => [o.operation, o]));
  const rows = doc.get('rows', true);
  if (!isSeq(rows)) return doc.toString({ lineWidth: 110 });
  let previousOp = '';
  for (const item of rows.items) {
    if (!isMap(item)) continue;
    for (const pair of item.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : '';
      const value = pair.value as Node | null;
      if (['input', 'condition'].includes(key) && isMap(value)) value.flow = flat(value);
      if (key === 'setup' && isMap(value))
        for (const p of value.items) if (isMap(p.value)) p.value.flow = true;
      if (key === 'operation' && isScalar(value) && value.value !== previousOp) {
        const op = byName.get(String(value.value));
        previousOp = String(value.value);
        if (op)
          item.commentBefore =
            ` ${op.operation}: ${op.method} ${op.path} — ${describe(op.contract)}` +
            (op.name_note !== null ? `\n ${op.name_note}` : '');
      }
      if (key === 'expect' && isMap(value)) {
        for (const p of value.items) {
          const k = isScalar(p.key) ? String(p.key.value) : '';
          if (isMap(p.value) && (k === 'remote' || k === 'final')) p.value.flow = true;
          if (k === 'remote' && isScalar(p.key))
            p.key.commentBefore =
              ' TODO: remote state guessed from the path and the fake service; check it';
          if (k === 'unknown_reason' && isScalar(p.key))
            p.key.commentBefore = ' TODO: confirm why the caller cannot learn the remote state';
        }
      }
    }
  }
  return doc.toString({ lineWidth: 110 });
}

/** Small maps of scalars read best on one line; nested ones stay in block style. */
function flat(map: YAMLMap): boolean {
  return map.items.every((p) => isScalar(p.value));
}

function describe(c: ResolvedContract): string {
  return [
    `class ${c.action_class}`,
    c.idempotency_honoured ? 'Idempotency-Key honoured' : 'no idempotency key',
    c.reconciliation ? 'lookup (x-candor-lookup)' : 'no lookup',
  ].join(', ');
}
