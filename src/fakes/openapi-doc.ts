// An OpenAPI 3.0/3.1 document (JSON or YAML) read into the small model that `candor init`, the
// OpenAPI fake and the matrix generator share: operations with their parameters, bodies, success
// responses and servers, the collections the paths describe, and the security schemes.
//
// Candor checks the parts it reads itself (paths, operations, parameters, bodies, responses,
// servers, security schemes, and every `$ref` among them): a problem there is one line naming the
// file, line:column, JSON pointer and the rule broken. What Candor does not read (examples, vendor
// extensions, stray keys, info) never stops it: a document up to 1.5 MB also gets the full
// OpenAPI schema check (openapi-check.ts), and what that finds is a warning. References are
// followed lazily, so a 1,200-operation document is never dereferenced whole.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { schemaProblem } from './openapi-check.js';
import { DocError, Reader, type ApiServer, type JsonSchema } from './openapi-reader.js';
import { bundled, hasExternalRefs, parseSource, pointerOf } from './openapi-source.js';

export type { ApiServer, JsonSchema } from './openapi-reader.js';
type Obj = Record<string, unknown>;

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export interface ApiParameter {
  name: string;
  required: boolean;
  schema: JsonSchema;
}

export interface ApiOperation {
  /** The action name: operationId in snake_case, shortened or made up when it has to be. */
  name: string;
  /** operationId as written, or the name made from method and path when there is none. */
  operation_id: string;
  /** Why `name` is not simply the operationId in snake_case (null: it is). */
  name_note: string | null;
  method: HttpMethod;
  /** Path template as written in the document, e.g. `/pet/{petId}` (without the server prefix). */
  path: string;
  server: ApiServer;
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
  /** The document's first usable server URL (variables filled in), or undefined. */
  server: string | undefined;
  security_schemes: Record<string, SecurityScheme>;
  operations: ApiOperation[];
  /** Problems where Candor does not look, and what it did instead: one line each. */
  warnings: string[];
}

export interface LoadOptions {
  /** Values for server URL variables (`--server-var name=value`), over their defaults. */
  server_vars?: Record<string, string>;
  /** A line of progress for long work (stderr in the CLI). */
  progress?: (line: string) => void;
}

export type ApiLoadResult =
  | { ok: true; value: ApiModel; failure?: never }
  | {
      ok: false;
      failure: { kind: 'unreadable' | 'invalid'; message: string };
      value?: never;
    };

/** Above this size the full schema check (warnings only) is skipped: it would dominate the time. */
const FULL_CHECK_MAX_BYTES = 1_500_000;
/**
 * Documents of this size or more report progress (stderr in the CLI); a smaller one loads silently,
 * whatever the machine's load (a rule by time made output depend on how busy the machine was).
 */
const PROGRESS_MIN_BYTES = 1_000_000;
/** Action names are at most this long (config schema). */
const NAME_MAX = 64;

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

const hash6 = (s: string): string => createHash('sha256').update(s).digest('hex').slice(0, 6);

/**
 * A name of at most 64 characters: the snake_case words that fit, then `_` and six hex digits of
 * the operationId's SHA-256 — the same document gives the same name on every run.
 */
export function shortName(name: string, seed: string): string {
  if (name.length <= NAME_MAX) return name;
  const room = NAME_MAX - 7;
  let head = name.slice(0, room);
  const cut = head.lastIndexOf('_');
  if (cut >= room - 16) head = head.slice(0, cut);
  return `${head.replace(/_+$/, '')}_${hash6(seed)}`;
}

/** `GET /parcels/{id}/items` → `get_parcels_by_id_items`. */
export function nameFromRoute(method: string, path: string): string {
  return snakeCase(`${method} ${path.replace(/\{([^}]+)\}/g, ' by $1 ')}`);
}

/** An operation's action name, and why it is not simply its operationId in snake_case. */
export interface ActionName {
  name: string;
  /** operationId as written, or the name made from method and path when there is none. */
  operation_id: string;
  note: string | null;
}

/**
 * The action name of one operation, as every Candor command gives it: the operationId in
 * snake_case; without an operationId, a stable name from method and path; a letter first; at most
 * 64 characters (`shortName`). Unique names across a document are `uniqueName`'s work.
 */
export function actionName(
  method: string,
  path: string,
  declaredId: string | undefined,
): ActionName {
  // An empty operationId names nothing: it is missing.
  if (declaredId?.trim() === '') declaredId = undefined;
  const id = declaredId ?? nameFromRoute(method, path);
  let name = snakeCase(id);
  let note: string | null =
    declaredId === undefined ? `no operationId: named from ${method} ${path}` : null;
  if (name === '') name = nameFromRoute(method, path);
  if (!/^[a-z]/.test(name)) name = `op_${name}`;
  if (name.length > NAME_MAX) {
    const short = shortName(name, id);
    note = `operationId "${id}" is ${name.length} characters in snake_case; shortened to ${short} (action names are at most ${NAME_MAX})`;
    name = short;
  }
  return { name, operation_id: id, note };
}

/**
 * The name again when an earlier operation (in the document's path order, then GET, POST, PUT,
 * PATCH, DELETE) already has it: six hex digits of the method and path are added, so the result
 * does not depend on which other operations exist.
 */
export function uniqueName(
  given: ActionName,
  method: string,
  path: string,
  clash: { method: string; path: string },
): ActionName {
  const renamed = shortName(`${given.name}_${hash6(`${method} ${path}`)}`, given.operation_id);
  return {
    name: renamed,
    operation_id: given.operation_id,
    note: `"${given.operation_id}" makes the same action name as ${clash.method} ${clash.path}; renamed ${renamed}`,
  };
}

export async function loadOpenApi(file: string, options: LoadOptions = {}): Promise<ApiLoadResult> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'error';
    return {
      ok: false,
      failure: { kind: 'unreadable', message: `${file}: cannot read (${code})` },
    };
  }
  const invalid = (message: string): ApiLoadResult => ({
    ok: false,
    failure: { kind: 'invalid', message },
  });
  const progress = (line: string): void => {
    // Only long work reports progress: a small document loads silently.
    if (options.progress && text.length >= PROGRESS_MIN_BYTES) options.progress(line);
  };
  // A file that is no OpenAPI document at all (a README, a JSON Schema) is named as such, instead
  // of a message about a field the user never meant to write.
  const notOpenApi = (why: string): ApiLoadResult =>
    invalid(`${file} is not an OpenAPI document: ${why} (give an OpenAPI 3.0 or 3.1 document)`);
  let parsed = parseSource(text, file);
  if (!parsed.ok)
    return /^\s*["']?(openapi|swagger)["']?\s*:/m.test(text)
      ? invalid(parsed.failure)
      : notOpenApi('it is neither JSON nor YAML');
  const root = parsed.value.root;
  if (!isObj(root)) return notOpenApi('it is not a JSON or YAML mapping');
  if (root.openapi === undefined && root.swagger === undefined)
    return notOpenApi('it has no top-level "openapi" field');
  const at = (pointer: string): string => {
    const where = parsed.ok ? parsed.value.locate(pointer) : undefined;
    return `${file}${where ? `:${where}` : ''}: ${pointer || '(root)'}`;
  };
  if (root.swagger !== undefined)
    return invalid(`${at('/swagger')}: Swagger 2.0 is not supported; use OpenAPI 3.0 or 3.1`);
  if (typeof root.openapi !== 'string' || !/^3\.[01]\./.test(root.openapi))
    return invalid(
      `${at('/openapi')}: expected "3.0.x" or "3.1.x", got ${JSON.stringify(root.openapi ?? null)}`,
    );
  // A text search first: walking 13 MB of objects for a rare case costs more than the regex.
  if (/\$ref['"]?\s*:\s*['"]?(?!#)[^\s'"]/.test(text) && hasExternalRefs(root)) {
    parsed = await bundled(parsed.value);
    if (!parsed.ok) return invalid(parsed.failure);
  }
  progress(`read ${file} (${Math.round(text.length / 1e6)} MB)`);
  const warnings: string[] = [];
  const reader = new Reader(parsed.value.root as Obj, (pointer, message) =>
    warnings.push(`${at(pointer)}: ${message}`),
  );
  let model: ApiModel;
  try {
    model = modelOf(reader, file, options, progress);
  } catch (e) {
    if (e instanceof DocError) return invalid(`${at(e.pointer)}: ${e.message}`);
    throw e;
  }
  if (text.length <= FULL_CHECK_MAX_BYTES) {
    const problem = schemaProblem(parsed.value.root as Obj);
    if (problem !== null)
      warnings.unshift(
        `${at(problem.pointer)}: the document breaks the OpenAPI schema where Candor does not read it (${problem.message}); loaded anyway`,
      );
  }
  model.warnings = warnings;
  return { ok: true, value: model };
}

function modelOf(
  r: Reader,
  file: string,
  options: LoadOptions,
  progress: (line: string) => void,
): ApiModel {
  const doc = r.root;
  const components = isObj(doc.components) ? doc.components : {};
  const schemes = isObj(components.securitySchemes) ? components.securitySchemes : {};
  const security_schemes: Record<string, SecurityScheme> = {};
  for (const [name, raw] of Object.entries(schemes)) {
    const { value: s, pointer } = r.deref(raw, pointerOf(['components', 'securitySchemes', name]));
    if (!isObj(s) || typeof s.type !== 'string')
      throw new DocError(pointer, 'a security scheme needs a "type" (apiKey, http, oauth2, …)');
    security_schemes[name] = {
      type: s.type,
      ...(typeof s.in === 'string' ? { in: s.in } : {}),
      ...(typeof s.name === 'string' ? { name: s.name } : {}),
      ...(typeof s.scheme === 'string' ? { scheme: s.scheme.toLowerCase() } : {}),
    };
  }
  const vars = options.server_vars ?? {};
  const docServer = r.server(doc.servers, '/servers', vars);
  const title = isObj(doc.info) && typeof doc.info.title === 'string' ? doc.info.title : 'api';
  if (doc.paths !== undefined && !isObj(doc.paths))
    throw new DocError('/paths', 'expected a mapping of paths to path items');
  const paths = isObj(doc.paths) ? doc.paths : {};
  const operations: ApiOperation[] = [];
  const names = new Map<string, ApiOperation>();
  let skipped = 0;
  for (const [path, rawItem] of Object.entries(paths)) {
    if (path.startsWith('x-')) continue;
    const itemPointer = pointerOf(['paths', path]);
    if (!path.startsWith('/')) throw new DocError(itemPointer, 'a path must start with "/"');
    if (path.startsWith('//'))
      throw new DocError(
        itemPointer,
        'a path must start with a single "/" (a request path starting "//" names another host)',
      );
    const { value: item, pointer: ip } = r.deref(rawItem, itemPointer);
    if (!isObj(item)) throw new DocError(ip, 'a path item must be a mapping');
    const itemServer = r.server(item.servers, `${ip}/servers`, vars) ?? docServer;
    for (const m of ['head', 'options', 'trace']) if (item[m] !== undefined) skipped++;
    for (const method of HTTP_METHODS) {
      const raw = item[method.toLowerCase()];
      if (raw === undefined) continue;
      const where = `${ip}/${method.toLowerCase()}`;
      if (!isObj(raw)) throw new DocError(where, 'an operation must be a mapping');
      const server = r.server(raw.servers, `${where}/servers`, vars) ?? itemServer;
      const op = operationOf(r, path, method, item, ip, raw, where, server);
      const clash = names.get(op.name);
      if (clash !== undefined) {
        const renamed = uniqueName(
          { name: op.name, operation_id: op.operation_id, note: op.name_note },
          method,
          path,
          clash,
        );
        op.name = renamed.name;
        op.name_note = renamed.note;
      }
      names.set(op.name, op);
      operations.push(op);
      if (operations.length % 400 === 0) progress(`read ${operations.length} operations`);
    }
  }
  if (operations.length === 0) throw new DocError('/paths', 'the document has no operations');
  if (skipped > 0)
    r.warn('/paths', `${skipped} HEAD/OPTIONS/TRACE operations are left out (no action for them)`);
  assignCollections(operations);
  return {
    file,
    title,
    server: docServer?.url,
    security_schemes,
    operations,
    warnings: [],
  };
}

function operationOf(
  r: Reader,
  path: string,
  method: HttpMethod,
  item: Obj,
  itemPointer: string,
  op: Obj,
  where: string,
  server: ApiServer | undefined,
): ApiOperation {
  const params = new Map<string, Obj>();
  const lists: Array<[unknown, string]> = [
    [item.parameters, `${itemPointer}/parameters`],
    [op.parameters, `${where}/parameters`],
  ];
  for (const [list, lp] of lists) {
    if (list === undefined) continue;
    if (!Array.isArray(list)) throw new DocError(lp, 'parameters must be a list');
    list.forEach((raw, i) => {
      const { value: p, pointer } = r.deref(raw, `${lp}/${i}`);
      if (!isObj(p) || typeof p.name !== 'string' || typeof p.in !== 'string')
        throw new DocError(pointer, 'a parameter needs "name" and "in" (Parameter Object)');
      if (!['path', 'query', 'header', 'cookie'].includes(p.in))
        throw new DocError(
          `${pointer}/in`,
          `"in" is path, query, header or cookie, not ${JSON.stringify(p.in)}`,
        );
      params.set(`${p.in}:${p.name}`, { ...p, '#pointer': pointer });
    });
  }
  // A `{name}` in the path that no parameter declares is still a path parameter (a string).
  for (const m of path.matchAll(/\{([^}]+)\}/g))
    if (!params.has(`path:${m[1]!}`)) {
      r.warn(where, `path parameter "${m[1]!}" is not declared; taken as a string`);
      params.set(`path:${m[1]!}`, { name: m[1], in: 'path', required: true, schema: {} });
    }
  const of = (kind: string): ApiParameter[] =>
    [...params.values()]
      .filter((p) => p.in === kind)
      .map((p) => ({
        name: String(p.name),
        required: p.in === 'path' || p.required === true,
        schema: r.schema(p.schema ?? schemaOfContent(p.content), `${String(p['#pointer'])}/schema`),
      }));
  const headers = of('header');
  const key = headers.find((h) => /^(x-)?idempotency-key$/i.test(h.name));
  const declaredId = op.operationId;
  if (declaredId !== undefined && typeof declaredId !== 'string')
    throw new DocError(`${where}/operationId`, 'operationId must be a string');
  const { name, operation_id: id, note } = actionName(method, path, declaredId);
  const body = r.deref(op.requestBody, `${where}/requestBody`);
  if (body.value !== undefined && !isObj(body.value))
    throw new DocError(body.pointer, 'a request body must be a mapping (Request Body Object)');
  const responses = r.deref(op.responses, `${where}/responses`);
  if (responses.value !== undefined && !isObj(responses.value))
    throw new DocError(responses.pointer, 'responses must be a mapping of status codes');
  if (responses.value === undefined) r.warn(where, 'no responses: the success body is unknown');
  const success = successOf(r, responses.value, responses.pointer);
  const security = Array.isArray(op.security)
    ? op.security
    : Array.isArray(r.root.security)
      ? r.root.security
      : [];
  const first: unknown = security.find((s) => isObj(s) && Object.keys(s).length > 0);
  const declared = op['x-candor-class'] ?? op['x-candor-action-class'];
  const segments = path.split('/').filter((s) => s !== '');
  const onItem = /^\{.+\}$/.test(segments.at(-1) ?? '');
  return {
    name,
    operation_id: id,
    name_note: note,
    method,
    path,
    server: server ?? { url: '', origin: undefined, prefix: '' },
    summary: typeof op.summary === 'string' ? op.summary : '',
    description: typeof op.description === 'string' ? op.description : '',
    path_params: of('path'),
    query_params: of('query'),
    header_params: headers.filter((h) => h !== key),
    body: r.jsonBody(body.value, body.pointer, 'request'),
    success,
    statuses: Object.keys(isObj(responses.value) ? responses.value : {})
      .filter((k) => /^\d{3}$/.test(k))
      .map(Number),
    security: isObj(first) ? Object.keys(first) : [],
    idempotency_header: key?.name,
    declared_class: typeof declared === 'string' ? declared : undefined,
    collection: onItem ? `/${segments.slice(0, -1).join('/')}` : path,
    on_item: onItem,
  };
}

function schemaOfContent(content: unknown): unknown {
  if (!isObj(content)) return undefined;
  const media = Object.values(content)[0];
  return isObj(media) ? media.schema : undefined;
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

function successOf(
  r: Reader,
  responses: Obj | undefined,
  pointer: string,
): ApiOperation['success'] {
  const all = responses ?? {};
  const code = Object.keys(all).find((k) => /^2\d\d$/.test(k));
  if (code === undefined) return { status: 200, schema: undefined };
  const { value, pointer: rp } = r.deref(all[code], `${pointer}/${code}`);
  if (!isObj(value)) throw new DocError(rp, 'a response must be a mapping (Response Object)');
  return { status: Number(code), schema: r.jsonBody(value, rp, 'response') };
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
