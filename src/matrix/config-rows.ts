// `candor matrix generate --openapi SPEC --config candor.yaml`: rows naming the user's own actions
// (every write × every fault phase, reads × the faults a read can meet), with inputs sampled from
// each action's input schema and a setup record for actions on one record, so that every row runs
// as written against the OpenAPI fake or through the proxy. Expectations follow Candor's rules for
// each action's contract as configured (class, honoured key, lookup), like the plain generator.
import OpenAPISampler from 'openapi-sampler';
import { Document, isMap, isScalar, isSeq } from 'yaml';
import type { LoadedConfig } from '../config/load.js';
import { contractOf } from '../engine/action.js';
import { objectShapeOf, type ApiModel, type ApiOperation } from '../fakes/openapi-doc.js';
import {
  commonCases,
  CLIENT_ID,
  expectationFor,
  isBodyCase,
  PHASE_CASES,
  sent,
  when,
  type ConditionCase,
  type GeneratedMatrix,
  type SpecOperation,
} from './openapi.js';
import { UNIQUE_INT_MAX } from './spec.js';

type Row = GeneratedMatrix['rows'][number];
type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface ConfigMatrixOptions {
  /** Written into the matrix (`openapi:`), relative to where the matrix is written. */
  openapi_ref: string;
  name: string;
}

export type ConfigMatrixResult =
  | { ok: true; value: { matrix: GeneratedMatrix; yaml: string }; failure?: never }
  | { ok: false; failure: { message: string }; value?: never };

/** The after-forward phase: the request reached the service, the client is cut off before any answer. */
const AFTER_FORWARD: ConditionCase = when(
  'after-forward-rst',
  'RST once the request reached the service, before it answered',
  { phase: 'after_forward', action: 'rst' },
  sent('connection_reset'),
  true,
);

export function generateConfigMatrix(
  model: ApiModel,
  loaded: LoadedConfig,
  options: ConfigMatrixOptions,
): ConfigMatrixResult {
  const ops = new Map(model.operations.map((o) => [o.name, o]));
  const rows: Row[] = [];
  for (const [i, a] of loaded.config.actions.entries()) {
    const op = ops.get(a.name);
    const built = loaded.actions[i]!.definition;
    if (!op)
      return {
        ok: false,
        failure: {
          message: `${loaded.file}: actions.${i}.name: "${a.name}" is no operation of ${model.file} (operationId in snake_case)`,
        },
      };
    const ctr = { ...contractOf(built), default_retry_after_ms: 1000 };
    const write = a.class !== 'read';
    const deadline = a.timeouts?.total_ms ?? a.timeouts?.first_byte_ms;
    if (write && deadline === undefined)
      return {
        ok: false,
        failure: {
          message: `${loaded.file}: actions.${i}.timeouts: a write needs total_ms (the after-commit rows delay the reply past it)`,
        },
      };
    const setup = setupFor(model, loaded, op);
    if (setup === 'missing')
      return {
        ok: false,
        failure: {
          message: `${loaded.file}: actions.${i}: "${a.name}" acts on one record of ${op.collection}, but no configured action creates one there`,
        },
      };
    const input = sampleInput(a.input, op);
    const responseRequired = requiredField(a.response);
    const specOp = { required_field: responseRequired ?? 'id' } as SpecOperation;
    const phases = write
      ? [
          ...PHASE_CASES.map((cc) =>
            cc.suffix === 'after-commit-delay'
              ? {
                  ...cc,
                  condition: { ...cc.condition, delay_ms: (deadline ?? 0) + 400 },
                }
              : cc.suffix.startsWith('body-cut-')
                ? // A real service's body may be tiny (`{}`): one byte in is a cut for any JSON.
                  {
                    ...cc,
                    title: cc.title.replace('byte 5', 'byte 1'),
                    condition: { ...cc.condition, at_byte: 1 },
                  }
                : cc,
          ),
          AFTER_FORWARD,
        ]
      : [];
    // A success without a body (204 No Content, or a 2xx that documents none): there is nothing to
    // cut and nothing to break, and an empty answer is the contract, not a malformed one.
    const noBody = op.success.status === 204 || op.success.schema === undefined;
    const common = commonCases(specOp).filter(
      (cc) => responseRequired !== null || !cc.suffix.startsWith('missing-'),
    );
    for (const cc of [...phases, ...common].filter((c) => !(noBody && isBodyCase(c.suffix)))) {
      const e = expectationFor(ctr, cc);
      rows.push({
        id: `${a.name.replace(/_/g, '-')}-${cc.suffix}`,
        title: `${a.name} + ${cc.title}`,
        operation: a.name,
        input: structuredClone(input),
        ...(setup ? { setup: structuredClone(setup) } : {}),
        condition: structuredClone(cc.condition) as Row['condition'],
        remote_effect_known: e.c.remote_effect === 'none' || e.c.category === 'succeeded',
        expect: {
          category: e.c.category,
          retry: e.c.retry,
          remote_effect: e.c.remote_effect,
          next_action: e.next,
          ...(e.final ? { final: e.final } : {}),
          remote: { kind: op.collection, count: write && e.committed ? 1 : 0 },
          ...(e.unknownReason !== undefined ? { unknown_reason: e.unknownReason } : {}),
          secret_in_result: false,
        },
      });
    }
  }
  const matrix: GeneratedMatrix = {
    matrix: options.name,
    description: `Generated from ${model.file.split(/[\\/]/).at(-1) ?? model.file} and ${loaded.file.split(/[\\/]/).at(-1) ?? loaded.file} by candor matrix generate: the configured actions under every fault phase.`,
    openapi: options.openapi_ref,
    seed: 1,
    rows,
  };
  return { ok: true, value: { matrix, yaml: render(matrix) } };
}

/** The create action of the record an on-record action needs, with a sampled input. */
function setupFor(
  model: ApiModel,
  loaded: LoadedConfig,
  op: ApiOperation,
): Row['setup'] | null | 'missing' {
  if (!op.on_item) return null;
  const creator = model.operations.find(
    (o) => o.method === 'POST' && !o.on_item && o.path === op.collection,
  );
  const action = creator && loaded.config.actions.find((a) => a.name === creator.name);
  if (!creator || !action) return 'missing';
  return {
    kind: op.collection,
    fields: {},
    action: action.name,
    input: sampleInput(action.input, creator),
  };
}

/** Schema-valid arguments; the record's own id comes from the setup. */
function sampleInput(schema: Obj, op: ApiOperation): Obj {
  let value: unknown;
  try {
    value = OpenAPISampler.sample(schema, { skipReadOnly: true, quiet: true });
  } catch {
    value = {};
  }
  const input = isObj(value) ? value : {};
  uniqueIds(input, schema);
  const last = op.path_params.at(-1);
  if (op.on_item && last) input[last.name] = '{{setup.id}}';
  return input;
}

/**
 * Client-chosen identifiers get a value unique to the row and the run (`{{correlation_id}}` and
 * `{{unique_int}}` are filled when the row runs), so that no row finds the record another row (or
 * an earlier run against the same service) made under the same id — with one sample id for every
 * row, a lookup by id sees ghosts. Only where the schema allows it: no enum, const, format or
 * pattern, and the value fits the length or range.
 */
function uniqueIds(input: Obj, schema: Obj): void {
  const props = isObj(schema.properties) ? schema.properties : {};
  for (const [name, raw] of Object.entries(props)) {
    if (!Object.hasOwn(input, name) || !CLIENT_ID.test(name) || !isObj(raw)) continue;
    if (['enum', 'const', 'pattern'].some((k) => raw[k] !== undefined)) continue;
    if (raw.type === 'string') {
      if (raw.format !== undefined) continue;
      const value = `${name}-{{correlation_id}}`;
      // The correlation id is the row id plus 7 characters; 64 covers the longest generated row id.
      if (typeof raw.maxLength === 'number' && raw.maxLength < name.length + 72) continue;
      input[name] = value;
    } else if (raw.type === 'integer') {
      if (raw.format !== undefined && raw.format !== 'int32' && raw.format !== 'int64') continue;
      const max = typeof raw.maximum === 'number' ? raw.maximum : Number.MAX_SAFE_INTEGER;
      if (max < UNIQUE_INT_MAX || (typeof raw.minimum === 'number' && raw.minimum > 1)) continue;
      input[name] = '{{unique_int}}';
    }
  }
}

/** `id` when the success body requires it, else its first required field; null: nothing required. */
function requiredField(schema: Obj): string | null {
  if (schema.type === 'array') return null;
  const { required } = objectShapeOf(schema);
  return required.includes('id') ? 'id' : (required[0] ?? null);
}

function render(matrix: GeneratedMatrix): string {
  const doc = new Document(matrix, { aliasDuplicateObjects: false });
  doc.commentBefore = [
    ' Generated by `candor matrix generate --openapi SPEC --config candor.yaml`; runs as written:',
    '   candor matrix run THIS_FILE --config candor.yaml                       (the OpenAPI fake)',
    '   candor matrix run THIS_FILE --config candor.yaml --target proxy --upstream URL',
    ' remote.count is how many writes of the row the service applied (its ground truth).',
  ].join('\n');
  const rows = doc.get('rows', true);
  if (isSeq(rows))
    for (const item of rows.items) {
      if (!isMap(item)) continue;
      for (const pair of item.items) {
        const key = isScalar(pair.key) ? String(pair.key.value) : '';
        if (['condition', 'input'].includes(key) && isMap(pair.value))
          pair.value.flow = JSON.stringify(pair.value.toJSON()).length < 90;
        if (key === 'expect' && isMap(pair.value))
          for (const p of pair.value.items) if (isMap(p.value)) p.value.flow = true;
      }
    }
  return doc.toString({ lineWidth: 110 });
}
