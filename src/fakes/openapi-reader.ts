// Reading the parts of an OpenAPI document Candor uses, following `$ref`s only where it reads:
// a reference that points nowhere there is a DocError at the reference's JSON pointer; schemas are
// copied into plain JSON Schema with a node budget, so a document whose schemas reference each
// other thousands of times (GitHub's) costs a bounded copy per operation, never a full dereference.
import { resolvePointer } from './openapi-source.js';

type Obj = Record<string, unknown>;

export type JsonSchema = Record<string, unknown>;

/** Where an operation's requests go: the server URL with its variables filled in. */
export interface ApiServer {
  url: string;
  /** `https://api.example.com`; undefined for a relative server URL (`/v1`) or none. */
  origin: string | undefined;
  /** Path prefix before the operation's path, without a trailing `/` (`/v1`, or ``). */
  prefix: string;
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A problem where Candor reads: the JSON pointer of the place and the rule broken. */
export class DocError extends Error {
  constructor(
    readonly pointer: string,
    message: string,
  ) {
    super(message);
  }
}

/** Schema nodes copied per schema; past it, deeper parts become "anything" (`{}`). */
const SCHEMA_BUDGET = 500;
/** Nesting kept per schema; deeper parts become "anything". */
const SCHEMA_DEPTH = 8;

const DROP = new Set([
  'xml',
  'externalDocs',
  'discriminator',
  'readOnly',
  'writeOnly',
  'deprecated',
  'examples',
  '$schema',
  '$id',
  '$anchor',
  '$defs',
  'definitions',
  '$comment',
  'nullable',
]);

const JSON_TYPES: ReadonlySet<unknown> = new Set([
  'string',
  'number',
  'integer',
  'boolean',
  'object',
  'array',
  'null',
]);

export class Reader {
  constructor(
    readonly root: Obj,
    readonly warn: (pointer: string, message: string) => void,
  ) {}

  /** Follows `$ref` chains; the pointer is where the value really is. */
  deref(value: unknown, pointer: string): { value: unknown; pointer: string } {
    let v = value;
    let p = pointer;
    for (let hops = 0; isObj(v) && typeof v.$ref === 'string'; hops++) {
      const ref = v.$ref;
      if (hops > 32) throw new DocError(`${p}/$ref`, `a $ref cycle through "${ref}"`);
      const target = resolvePointer(this.root, ref);
      if (target === undefined)
        throw new DocError(`${p}/$ref`, `"${ref}" points nowhere in the document`);
      v = target;
      p = ref.slice(1);
    }
    return { value: v, pointer: p };
  }

  /**
   * The first server of a `servers` list whose URL variables all have a value (`--server-var`
   * over the variable's default, then its first enum value); undefined when there is no list.
   */
  server(list: unknown, pointer: string, vars: Record<string, string>): ApiServer | undefined {
    if (list === undefined) return undefined;
    if (!Array.isArray(list)) throw new DocError(pointer, 'servers must be a list');
    if (list.length === 0) return undefined;
    const problems: string[] = [];
    for (const [i, s] of list.entries()) {
      if (!isObj(s) || typeof s.url !== 'string')
        throw new DocError(`${pointer}/${i}`, 'a server needs a "url" (Server Object)');
      const variables = isObj(s.variables) ? s.variables : {};
      const missing: string[] = [];
      const url = s.url.replace(/\{([^}]+)\}/g, (_, name: string) => {
        const v = variables[name];
        const value =
          vars[name] ??
          (isObj(v) && typeof v.default === 'string' ? v.default : undefined) ??
          (isObj(v) && Array.isArray(v.enum) && typeof v.enum[0] === 'string'
            ? v.enum[0]
            : undefined);
        if (value === undefined) missing.push(name);
        return value ?? '';
      });
      if (missing.length) {
        problems.push(`${pointer}/${i}/url: no value for ${missing.join(', ')}`);
        continue;
      }
      const parsed = parseServerUrl(url);
      if (parsed && /^[^?#]*[^/:?#]\/\//.test(url))
        this.warn(
          `${pointer}/${i}/url`,
          `"${url}" has "//" in its path; taken as the prefix ${parsed.prefix || '/'}`,
        );
      if (parsed) return parsed;
      problems.push(`${pointer}/${i}/url: "${url}" is not an http(s) URL or a path`);
    }
    this.warn(
      pointer,
      `no usable server (${problems.join('; ')}); pass --server-var name=value or --origin`,
    );
    return undefined;
  }

  /** The JSON schema of a request body or response (its first JSON media type). */
  jsonBody(holder: unknown, pointer: string, side: 'request' | 'response'): JsonSchema | undefined {
    if (!isObj(holder) || !isObj(holder.content)) return undefined;
    const entry = Object.entries(holder.content).find(([t]) => /json/i.test(t));
    if (!entry) return undefined;
    const [type, media] = entry;
    if (!isObj(media) || media.schema === undefined) return undefined;
    return this.schema(
      media.schema,
      `${pointer}/content/${type.replace(/~/g, '~0').replace(/\//g, '~1')}/schema`,
      side,
    );
  }

  /**
   * A plain JSON Schema (draft 2020-12 subset) from an OpenAPI schema: references inlined (a cycle
   * or a reference that points nowhere becomes "anything", with a warning for the latter),
   * `nullable` becomes a type union, OpenAPI 3.0's boolean exclusive bounds become numbers,
   * OpenAPI-only keywords and examples go.
   */
  schema(raw: unknown, pointer: string, side: 'request' | 'response' = 'request'): JsonSchema {
    // A request leaves out readOnly properties (the service sets them), a response writeOnly ones.
    const hidden = side === 'request' ? 'readOnly' : 'writeOnly';
    const budget = { left: SCHEMA_BUDGET, hidden };
    return this.copy(raw, pointer, new Set(), 0, budget);
  }

  private isHidden(schema: unknown, keyword: string): boolean {
    const target =
      isObj(schema) && typeof schema.$ref === 'string'
        ? resolvePointer(this.root, schema.$ref)
        : schema;
    return isObj(target) && target[keyword] === true;
  }

  private copy(
    raw: unknown,
    pointer: string,
    stack: Set<string>,
    depth: number,
    budget: { left: number; hidden: string },
  ): JsonSchema {
    if (!isObj(raw) || depth > SCHEMA_DEPTH || budget.left <= 0) return {};
    budget.left--;
    if (typeof raw.$ref === 'string') {
      const ref = raw.$ref;
      if (stack.has(ref)) return {};
      const target = resolvePointer(this.root, ref);
      if (target === undefined) {
        this.warn(
          `${pointer}/$ref`,
          `"${ref}" points nowhere; that part of the schema accepts anything`,
        );
        return {};
      }
      const { $ref: _drop, ...siblings } = raw;
      stack.add(ref);
      const out = this.copy(target, ref.slice(1), stack, depth, budget);
      stack.delete(ref);
      for (const [k, v] of Object.entries(siblings))
        if (!DROP.has(k) && !k.startsWith('x-') && typeof v !== 'object') out[k] = v;
      return out;
    }
    const out: JsonSchema = {};
    for (const [k, v] of Object.entries(raw)) {
      if (DROP.has(k) || k.startsWith('x-')) continue;
      const at = `${pointer}/${k}`;
      if ((k === 'properties' || k === 'patternProperties') && isObj(v)) {
        const kept = Object.entries(v).filter(([, s]) => !this.isHidden(s, budget.hidden));
        if (kept.length < Object.keys(v).length && Array.isArray(raw.required))
          out.required = raw.required.filter((n) => kept.some(([m]) => m === n));
        out[k] = Object.fromEntries(
          kept.map(([n, s]) => [n, this.copy(s, `${at}/${n}`, stack, depth + 1, budget)]),
        );
      } else if (k === 'not')
        // Candor's schema conversion (zod) has no general `not`; what it excludes is not enforced.
        continue;
      else if (['items', 'additionalProperties', 'contains', 'propertyNames'].includes(k))
        out[k] = isObj(v) ? this.copy(v, at, stack, depth + 1, budget) : v;
      else if (
        (k === 'allOf' || k === 'anyOf' || k === 'oneOf' || k === 'prefixItems') &&
        Array.isArray(v)
      )
        out[k] = v.map((s, i) => this.copy(s, `${at}/${i}`, stack, depth + 1, budget));
      else if (k === 'type') {
        // A type JSON Schema does not know (`file`, `type: {…}`) says nothing: anything.
        const known = (Array.isArray(v) ? v : [v]).filter((t) => JSON_TYPES.has(t));
        if (known.length > 0) out[k] = Array.isArray(v) ? known : known[0];
      } else if (typeof v !== 'object' || v === null) out[k] = v;
      else if (k === 'required') out[k] ??= structuredClone(v);
      else if (k === 'enum') out[k] = structuredClone(v);
      else if (k === 'default' || k === 'const') out[k] = structuredClone(v);
    }
    if (raw.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
    for (const [bound, edge] of [
      ['exclusiveMinimum', 'minimum'],
      ['exclusiveMaximum', 'maximum'],
    ] as const) {
      if (out[bound] === true && typeof out[edge] === 'number') {
        out[bound] = out[edge];
        delete out[edge];
      } else if (typeof out[bound] === 'boolean') delete out[bound];
    }
    if (Array.isArray(out.required) && out.required.length === 0) delete out.required;
    return out;
  }
}

/** `https://api.example.com/v1/` → origin and prefix `/v1`; `/v1` → a prefix only. */
function parseServerUrl(url: string): ApiServer | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(url)) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return undefined;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
    // `https://host/{basePath}` with a basePath of `/v1` gives `https://host//v1`: the document
    // means one prefix `/v1` (a request path starting `//` would name another host).
    return {
      url,
      origin: u.origin,
      prefix: u.pathname.replace(/\/{2,}/g, '/').replace(/\/+$/, ''),
    };
  }
  if (url.startsWith('//')) return undefined;
  const path = url.split(/[?#]/)[0] ?? '';
  return { url, origin: undefined, prefix: `/${path}`.replace(/\/+/g, '/').replace(/\/+$/, '') };
}
