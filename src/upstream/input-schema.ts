// An upstream tool's `inputSchema`, enforced before anything is sent (DESIGN.md §5): arguments that
// break it are `invalid_input` naming the field, and the upstream never sees them. One compiled
// validator per upstream tool, compiled at the tool's first call, not at listing time: a gateway
// start lists every upstream's tools, and compiling them all (an ajv instance each) was about an
// eighth of the CPU of starting the starter configuration's gateway, for tools a session mostly
// never calls. The dialect follows `$schema`: draft-07 (and older drafts ajv reads the same way)
// with `ajv`, 2020-12 with `ajv/dist/2020` — also the default when `$schema` is absent, as MCP
// specifies. A schema ajv cannot compile (a broken `$ref`, an unsupported dialect) refuses every
// call of that tool with a message saying so: a tool whose arguments cannot be checked is not
// forwarded unchecked.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formatsModule from 'ajv-formats';

/** Why arguments were refused: the field (a path of property names and indexes) and the problem. */
export interface InputProblem {
  path: Array<string | number>;
  message: string;
}

export type InputCheck = (args: Record<string, unknown>) => InputProblem | null;

type AddFormats = (ajv: Ajv | Ajv2020) => unknown;
const addFormats: AddFormats =
  (formatsModule as unknown as { default?: AddFormats }).default ??
  (formatsModule as unknown as AddFormats);

const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-0[4-7]\/schema#?$/;
const DRAFT_2020 = /^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/;

function engine(dialect: '07' | '2020'): Ajv | Ajv2020 {
  const options = { strict: false, allErrors: false, logger: false } as const;
  const ajv = dialect === '07' ? new Ajv(options) : new Ajv2020(options);
  addFormats(ajv);
  return ajv;
}

/** The argument check of one upstream tool's inputSchema (compiled at its first use, once). */
export function compileInputSchema(schema: Record<string, unknown>): InputCheck {
  let check: InputCheck | undefined;
  return (args) => (check ??= compileNow(schema))(args);
}

function compileNow(schema: Record<string, unknown>): InputCheck {
  const declared = schema['$schema'];
  let dialect: '07' | '2020';
  if (declared === undefined || (typeof declared === 'string' && DRAFT_2020.test(declared)))
    dialect = '2020';
  else if (typeof declared === 'string' && DRAFT_07.test(declared)) dialect = '07';
  else
    return refuseAll(
      `its inputSchema declares an unsupported $schema (${JSON.stringify(declared)})`,
    );
  let validate: ValidateFunction;
  try {
    // Each tool gets its own instance: two upstream schemas with the same $id never collide.
    validate = engine(dialect).compile({ ...schema, type: 'object' });
  } catch (error) {
    const why = error instanceof Error ? error.message.split('\n')[0]!.slice(0, 200) : 'unknown';
    return refuseAll(`its inputSchema cannot be compiled (${why})`);
  }
  return (args) => {
    if (validate(args)) return null;
    return problemOf(validate.errors?.[0]);
  };
}

function refuseAll(why: string): InputCheck {
  return () => ({
    path: [],
    message: `the upstream tool's arguments cannot be checked: ${why}; its calls are refused, nothing was sent`,
  });
}

/** The failing field as a path: the instance location plus the property a keyword names. */
function problemOf(e: ErrorObject | undefined): InputProblem {
  if (!e) return { path: [], message: 'the arguments break the tool inputSchema' };
  const path: Array<string | number> = e.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((p) => (/^\d+$/.test(p) ? Number(p) : p));
  const params = e.params as Record<string, unknown>;
  if (e.keyword === 'required' && typeof params['missingProperty'] === 'string') {
    path.push(params['missingProperty']);
    return { path, message: 'required' };
  }
  if (e.keyword === 'additionalProperties' && typeof params['additionalProperty'] === 'string') {
    path.push(params['additionalProperty']);
    return { path, message: 'not declared by the tool (additionalProperties: false)' };
  }
  if (e.keyword === 'unevaluatedProperties' && typeof params['unevaluatedProperty'] === 'string') {
    path.push(params['unevaluatedProperty']);
    return { path, message: 'not declared by the tool (unevaluatedProperties: false)' };
  }
  return { path, message: e.message ?? `breaks ${e.keyword}` };
}
