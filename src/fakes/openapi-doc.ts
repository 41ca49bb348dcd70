// An OpenAPI 3.0/3.1 document (JSON or YAML) read into the small model that `candor init`, the
// OpenAPI fake and the matrix generator share: operations with their parameters, bodies and success
// responses, the collections the paths describe, and the security schemes. Parsing, validation and
// `$ref` resolution are @readme/openapi-parser's (a maintained fork of swagger-parser); this file
// only turns its result into Candor's terms. A document that does not parse, breaks the spec or
// points a `$ref` nowhere is a failure naming the file and the place, never a thrown error.
import { readFile } from 'node:fs/promises';
import { dereference, parse, validate } from '@readme/openapi-parser';

export type JsonSchema = Record<string, unknown>;
type Obj = Record<string, unknown>;

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export interface ApiParameter {
  name: string;
  required: boolean;
  schema: JsonSchema;
}

export interface ApiOperation {
  /** operationId in snake_case: the action name. */
  name: string;
  operation_id: string;
  method: HttpMethod;
  /** Path template as written in the document, e.g. `/pet/{petId}` (without the server prefix). */
  path: string;
  summary: string;
  description: string;
  path_params: ApiParameter[];
  query_params: ApiParameter[];
  /** Header parameters other than the idempotency key. */
  header_params: ApiParameter[];
  body: JsonSchema | undefined;
  /** The first documented 2xx status and its JSON schema (undefined: no JSON body). */
  success: { status: number; schema: JsonSchema | undefined };
  /** Every documented status code (`default` and ranges left out). */
  statuses: number[];
  /** Names of the security schemes of the first requirement; empty: no credential. */
  security: string[];
  /** The idempotency header the operation declares, if any. */
  idempotency_header: string | undefined;
  /** `x-candor-class` (or `x-candor-action-class`) when the document declares one. */
  declared_class: string | undefined;
  /** The collection the operation acts on: its path without a trailing parameter. */
  collection: string;
  /** The last path segment is a parameter: the operation acts on one record. */
  on_item: boolean;
}

export interface SecurityScheme {
  type: string;
  /** apiKey: where and under which name. */
  in?: string;
  name?: string;
  /** http: `bearer` or `basic`. */
  scheme?: string;
}

export interface ApiModel {
  file: string;
  title: string;
  /** First server URL (may carry a path prefix), or undefined. */
  server: string | undefined;
  security_schemes: Record<string, SecurityScheme>;
  operations: ApiOperation[];
}

export type ApiLoadResult =
  | { ok: true; value: ApiModel; failure?: never }
  | {
      ok: false;
      failure: { kind: 'unreadable' | 'invalid'; message: string };
      value?: never;
    };

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `createDeployment`, `create-deployment`, `HTTPCheck` → `create_deployment`, `http_check`. */
export function snakeCase(id: string): string {
  return id
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toLowerCase();
}

class DocError extends Error {}

/** The first line of a parser message, and the key its code frame points at (the place). */
function oneLine(message: string): string {
  const lines = message.split('\n');
  const first = (lines[0] ?? '').replace(/^[A-Z_]+ (?=[a-z])/, '').trim();
  const pointed = lines.find((l) => /^>\s*\d+ \|/.test(l));
  const key = pointed ? /"([^"]+)"\s*:/.exec(pointed)?.[1] : undefined;
  return key !== undefined ? `${key}: ${first}` : first;
}

export async function loadOpenApi(file: string): Promise<ApiLoadResult> {
  try {
    await readFile(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'error';
    return {
      ok: false,
      failure: { kind: 'unreadable', message: `${file}: cannot read (${code})` },
    };
  }
  const invalid = (message: string): ApiLoadResult => ({
    ok: false,
    failure: { kind: 'invalid', message: `${file}: ${message}` },
  });
  // Only references inside the document or to local files: a spec never makes Candor fetch a URL.
  const options = { resolve: { http: false } } as const;
  let raw: unknown;
  try {
    raw = await parse(file, options as never);
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    return invalid(oneLine(msg.replace(`Error parsing ${file}: `, '')));
  }
  if (!isObj(raw)) return invalid('(root): expected an OpenAPI document (a mapping)');
  if (raw.swagger !== undefined)
    return invalid('swagger: Swagger 2.0 is not supported; use OpenAPI 3.0 or 3.1');
  if (typeof raw.openapi !== 'string' || !/^3\.[01]\./.test(raw.openapi))
    return invalid(`openapi: expected 3.0.x or 3.1.x, got ${JSON.stringify(raw.openapi ?? null)}`);
  try {
    const checked = await validate(structuredClone(raw) as never, options as never);
    if (!checked.valid) return invalid(oneLine(checked.errors[0]?.message ?? 'invalid document'));
  } catch (e) {
    return invalid(oneLine(e instanceof Error ? e.message : String(e)));
  }
  let doc: unknown;
  try {
    doc = await dereference(file, {
      ...options,
      dereference: { circular: 'ignore' },
    } as never);
  } catch (e) {
    return invalid(oneLine(e instanceof Error ? e.message : String(e)));
  }
  try {
    return { ok: true, value: modelOf(doc as Obj, file) };
  } catch (e) {
    if (e instanceof DocError) return invalid(e.message);
    throw e;
  }
}

function modelOf(doc: Obj, file: string): ApiModel {
  const paths = isObj(doc.paths) ? doc.paths : {};
  const components = isObj(doc.components) ? doc.components : {};
  const schemes = isObj(components.securitySchemes) ? components.securitySchemes : {};
  const security_schemes: Record<string, SecurityScheme> = {};
  for (const [name, s] of Object.entries(schemes)) {
    if (!isObj(s)) continue;
    security_schemes[name] = {
      type: String(s.type),
      ...(typeof s.in === 'string' ? { in: s.in } : {}),
      ...(typeof s.name === 'string' ? { name: s.name } : {}),
      ...(typeof s.scheme === 'string' ? { scheme: s.scheme.toLowerCase() } : {}),
    };
  }
  const servers = Array.isArray(doc.servers) ? doc.servers : [];
  const server =
    isObj(servers[0]) && typeof servers[0].url === 'string' ? servers[0].url : undefined;
  const title = isObj(doc.info) && typeof doc.info.title === 'string' ? doc.info.title : 'api';
  const operations: ApiOperation[] = [];
  const names = new Map<string, string>();
  for (const [path, item] of Object.entries(paths)) {
    if (!isObj(item)) continue;
    for (const method of HTTP_METHODS) {
      const op = item[method.toLowerCase()];
      if (!isObj(op)) continue;
      const where = `paths.${path}.${method.toLowerCase()}`;
      const id = op.operationId;
      if (typeof id !== 'string')
        throw new DocError(`${where}: missing operationId (Candor names each action after it)`);
      const name = snakeCase(id);
      if (!/^[a-z][a-z0-9_]{0,63}$/.test(name))
        throw new DocError(
          `${where}.operationId: ${JSON.stringify(id)} does not make a snake_case action name`,
        );
      const clash = names.get(name);
      if (clash !== undefined)
        throw new DocError(`${where}.operationId: "${id}" makes the same action name as ${clash}`);
      names.set(name, where);
      operations.push(operationOf(doc, path, method, item, op, name));
    }
  }
  if (operations.length === 0) throw new DocError('paths: no operations');
  assignCollections(operations);
  return { file, title, server, security_schemes, operations };
}

function operationOf(
  doc: Obj,
  path: string,
  method: HttpMethod,
  item: Obj,
  op: Obj,
  name: string,
): ApiOperation {
  const params = new Map<string, Obj>();
  for (const list of [item.parameters, op.parameters])
    for (const p of Array.isArray(list) ? list : [])
      if (isObj(p) && typeof p.name === 'string') params.set(`${String(p.in)}:${p.name}`, p);
  const of = (where: string): ApiParameter[] =>
    [...params.values()]
      .filter((p) => p.in === where)
      .map((p) => ({
        name: String(p.name),
        required: p.required === true,
        schema: normalizeSchema(p.schema),
      }));
  const headers = of('header');
  const key = headers.find((h) => /^(x-)?idempotency-key$/i.test(h.name));
  const success = successOf(op.responses);
  const security = Array.isArray(op.security)
    ? op.security
    : Array.isArray(doc.security)
      ? doc.security
      : [];
  const first: unknown = security[0];
  const declared = op['x-candor-class'] ?? op['x-candor-action-class'];
  const segments = path.split('/').filter((s) => s !== '');
  const onItem = /^\{.+\}$/.test(segments.at(-1) ?? '');
  return {
    name,
    operation_id: String(op.operationId),
    method,
    path,
    summary: typeof op.summary === 'string' ? op.summary : '',
    description: typeof op.description === 'string' ? op.description : '',
    path_params: of('path'),
    query_params: of('query'),
    header_params: headers.filter((h) => h !== key),
    body: jsonSchemaOf(op.requestBody),
    success,
    statuses: Object.keys(isObj(op.responses) ? op.responses : {})
      .filter((k) => /^\d{3}$/.test(k))
      .map(Number),
    security: isObj(first) ? Object.keys(first) : [],
    idempotency_header: key?.name,
    declared_class: typeof declared === 'string' ? declared : undefined,
    collection: onItem ? `/${segments.slice(0, -1).join('/')}` : path,
    on_item: onItem,
  };
}

/**
 * A GET on a path that nothing creates under, whose parent path is a collection, is a search of
 * that parent (`/pet/findByStatus` searches `/pet`).
 */
function assignCollections(ops: ApiOperation[]): void {
  const created = new Set(ops.filter((o) => o.method === 'POST' && !o.on_item).map((o) => o.path));
  for (const o of ops) {
    if (o.on_item || o.method !== 'GET' || created.has(o.path)) continue;
    const parent = o.path.replace(/\/[^/]+$/, '');
    if (parent !== '' && created.has(parent)) o.collection = parent;
  }
}

function successOf(responses: unknown): ApiOperation['success'] {
  const all = isObj(responses) ? responses : {};
  const code = Object.keys(all).find((k) => /^2\d\d$/.test(k));
  if (code === undefined) return { status: 200, schema: undefined };
  return { status: Number(code), schema: jsonSchemaOf(all[code]) };
}

function jsonSchemaOf(holder: unknown): JsonSchema | undefined {
  const content = isObj(holder) && isObj(holder.content) ? holder.content : {};
  const media = Object.entries(content).find(([t]) => /json/i.test(t))?.[1];
  return isObj(media) && isObj(media.schema) ? normalizeSchema(media.schema) : undefined;
}

const DROP = new Set([
  'xml',
  'externalDocs',
  'discriminator',
  'readOnly',
  'writeOnly',
  'deprecated',
]);

/**
 * A plain JSON Schema (draft 2020-12 subset) from an OpenAPI schema: `nullable` becomes a type
 * union, OpenAPI-only keywords go, a reference left by a cycle becomes "anything" (it cannot be
 * followed without the document), and shared objects are copied.
 */
export function normalizeSchema(schema: unknown, seen: Set<unknown> = new Set()): JsonSchema {
  if (!isObj(schema) || seen.has(schema)) return {};
  if (typeof schema.$ref === 'string') return {};
  seen.add(schema);
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(schema)) {
    if (DROP.has(k) || k.startsWith('x-') || k === 'nullable') continue;
    if (k === 'properties' && isObj(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([n, s]) => [n, normalizeSchema(s, seen)]));
    else if ((k === 'items' || k === 'additionalProperties' || k === 'not') && isObj(v))
      out[k] = normalizeSchema(v, seen);
    else if ((k === 'allOf' || k === 'anyOf' || k === 'oneOf') && Array.isArray(v))
      out[k] = v.map((s) => normalizeSchema(s, seen));
    else out[k] = structuredClone(v);
  }
  if (schema.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  seen.delete(schema);
  return out;
}

/** The example values a schema carries (for placeholder inputs), without the normalization. */
export function exampleOf(schema: unknown): unknown {
  return isObj(schema) ? (schema.example ?? schema.default) : undefined;
}

/** Properties and required names of an object schema, through `allOf`. */
export function objectShapeOf(schema: unknown): { props: Obj; required: string[] } {
  const props: Obj = {};
  const required: string[] = [];
  const walk = (s: unknown): void => {
    if (!isObj(s)) return;
    if (isObj(s.properties)) Object.assign(props, s.properties);
    if (Array.isArray(s.required)) required.push(...s.required.map(String));
    if (Array.isArray(s.allOf)) s.allOf.forEach(walk);
  };
  walk(schema);
  return { props, required: [...new Set(required)] };
}
