// The Cedar schema Candor generates from candor.yaml's actions, and the Cedar values of a call's
// arguments typed by the same JSON Schema (one mapping, so a value always has its schema's type).
//
//   JSON Schema            Cedar
//   string / string enum   String
//   integer                Long
//   number                 decimal (extension; 4 fractional digits)
//   boolean                Boolean
//   array of a type above  Set
//   object                 Record (properties; `required` ones required)
//   anything else          left out of the schema and of the context
import type { CedarValueJson, SchemaJson, Type } from '@cedar-policy/cedar-wasm/nodejs';

export const NAMESPACE = 'Candor';

type CedarType = Type<string> & { required?: boolean };

const STRING: CedarType = { type: 'String' };
const LONG: CedarType = { type: 'Long' };
const BOOL: CedarType = { type: 'Boolean' };
const DECIMAL: CedarType = { type: 'Extension', name: 'decimal' };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The Cedar type of a JSON Schema, or null when it has none Candor maps (it is left out). */
export function cedarTypeOf(schema: unknown): CedarType | null {
  if (!isRecord(schema)) return null;
  const t = schema['type'];
  if (t === undefined && Array.isArray(schema['enum']))
    return schema['enum'].every((e) => typeof e === 'string') ? STRING : null;
  if (t === undefined && typeof schema['const'] === 'string') return STRING;
  switch (t) {
    case 'string':
      return STRING;
    case 'integer':
      return LONG;
    case 'number':
      return DECIMAL;
    case 'boolean':
      return BOOL;
    case 'array': {
      const element = cedarTypeOf(schema['items']);
      return element ? { type: 'Set', element } : null;
    }
    case 'object':
      return recordTypeOf(schema);
    default:
      return null;
  }
}

function recordTypeOf(schema: Record<string, unknown>): CedarType {
  const props = isRecord(schema['properties']) ? schema['properties'] : {};
  const required = new Set(
    Array.isArray(schema['required'])
      ? schema['required'].filter((r): r is string => typeof r === 'string')
      : [],
  );
  const attributes: Record<string, CedarType> = {};
  for (const [name, sub] of Object.entries(props)) {
    const t = cedarTypeOf(sub);
    if (t) attributes[name] = required.has(name) ? t : { ...t, required: false };
  }
  return { type: 'Record', attributes };
}

/**
 * The Cedar value of `value` under `schema`; undefined when the schema has no Cedar type or the
 * value does not fit it. Throws for a number that Cedar cannot represent (the evaluation then
 * fails closed).
 */
export function cedarValueOf(schema: unknown, value: unknown): CedarValueJson | undefined {
  const t = cedarTypeOf(schema);
  if (!t) return undefined;
  return valueOfType(t, schema, value);
}

function valueOfType(t: CedarType, schema: unknown, value: unknown): CedarValueJson | undefined {
  const s = isRecord(schema) ? schema : {};
  switch (t.type) {
    case 'String':
      return typeof value === 'string' ? value : undefined;
    case 'Boolean':
      return typeof value === 'boolean' ? value : undefined;
    case 'Long':
      if (typeof value !== 'number') return undefined;
      if (!Number.isSafeInteger(value))
        throw new Error(`${value} is not a whole number Cedar can hold`);
      return value;
    case 'Extension':
      if (typeof value !== 'number') return undefined;
      return { __extn: { fn: 'decimal', arg: decimalText(value) } };
    case 'Set':
      return Array.isArray(value)
        ? value
            .map((v) => cedarValueOf(s['items'], v))
            .filter((v): v is CedarValueJson => v !== undefined)
        : undefined;
    case 'Record': {
      if (!isRecord(value)) return undefined;
      const props = isRecord(s['properties']) ? s['properties'] : {};
      const out: Record<string, CedarValueJson> = {};
      for (const [name, sub] of Object.entries(props)) {
        if (!Object.hasOwn(value, name)) continue;
        const v = cedarValueOf(sub, value[name]);
        if (v !== undefined) out[name] = v;
      }
      return out;
    }
    default:
      return undefined;
  }
}

/** Cedar's decimal literal: at most 4 fractional digits, within its 64-bit range. */
function decimalText(n: number): string {
  if (!Number.isFinite(n) || Math.abs(n) > 922_337_203_685_477)
    throw new Error(`${n} is outside the range of a Cedar decimal`);
  const fixed = n.toFixed(4);
  if (Number(fixed) !== n)
    throw new Error(`${n} has more than 4 fractional digits (Cedar decimal)`);
  return fixed;
}

/** What the schema generator needs of one action. */
export interface SchemaAction {
  name: string;
  input_schema: Record<string, unknown>;
}

const OPERATION_TYPE: CedarType = {
  type: 'Record',
  attributes: {
    first_call: BOOL,
    attempts: LONG,
    may_have_applied: BOOL,
    effect: STRING,
    state: STRING,
    category: STRING,
  },
};

const TIME_TYPE: CedarType = {
  type: 'Record',
  attributes: {
    iso: STRING,
    date: STRING,
    hour: LONG,
    minute: LONG,
    weekday: STRING,
    zone: STRING,
  },
};

const TOTAL_TYPE: CedarType = { type: 'Record', attributes: { count: LONG, sum: LONG } };

/** The Cedar schema (JSON form) of a configuration's actions and declared totals. */
export function cedarSchema(
  actions: readonly SchemaAction[],
  totals: readonly string[],
): SchemaJson<string> {
  const totalsType: CedarType = {
    type: 'Record',
    attributes: Object.fromEntries(totals.map((t) => [t, TOTAL_TYPE])),
  };
  return {
    [NAMESPACE]: {
      entityTypes: {
        Caller: {
          shape: {
            type: 'Record',
            attributes: {
              kind: STRING,
              subject: STRING,
              client_id: { ...STRING, required: false },
              issuer: { ...STRING, required: false },
              scopes: { type: 'Set', element: STRING },
            },
          },
        },
        Resource: {
          shape: { type: 'Record', attributes: { kind: STRING, name: STRING } },
        },
      },
      actions: Object.fromEntries(
        actions.map((a) => [
          a.name,
          {
            appliesTo: {
              principalTypes: ['Caller'],
              resourceTypes: ['Resource'],
              context: {
                type: 'Record',
                attributes: {
                  args: cedarTypeOf({ ...a.input_schema, type: 'object' }) ?? {
                    type: 'Record',
                    attributes: {},
                  },
                  operation: OPERATION_TYPE,
                  time: TIME_TYPE,
                  totals: totalsType,
                },
              },
            },
          },
        ]),
      ),
    },
  };
}
